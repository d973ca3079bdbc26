"""The regression gate against a release: `compare --release SLUG@N` and the API endpoint a CI
job calls with a run file, both equal to `compare` on the release's downloaded qrels."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from accounts.keys import key_digest
from accounts.models import ApiToken, password_stamp
from evaluation.models import MustNeverBreak
from tests.compare_world import MISSING_FROM_CANDIDATE, Compared, compared_world
from tests.conftest import World

pytestmark = pytest.mark.django_db


@pytest.fixture
def compared(world: World, tmp_path: Path) -> Compared:
    return compared_world(world.project, tmp_path)


def compare(*args: str) -> tuple[int, str]:
    """`compare` in process (it sees the test database): its exit code and output."""
    out = io.StringIO()
    try:
        call_command("compare", *args, stdout=out)
    except SystemExit as stop:
        return int(str(stop.code)), out.getvalue()
    return 0, out.getvalue()


def on_files(compared: Compared, *extra: str) -> tuple[int, str]:
    return compare(
        "--qrels",
        str(compared.qrels_path),
        "--baseline",
        str(compared.run_paths["base"]),
        "--candidate",
        str(compared.run_paths["cand"]),
        *extra,
    )


def on_release(compared: Compared, *extra: str) -> tuple[int, str]:
    return compare(
        "--release",
        "acme@1",
        "--baseline",
        str(compared.run_paths["base"]),
        "--candidate",
        str(compared.run_paths["cand"]),
        *extra,
    )


def test_it_counts_the_queries_missing_from_either_run(compared: Compared) -> None:
    _, text = on_files(compared)
    assert (
        f"missing from a run, scored 0: 0 from the baseline, {MISSING_FROM_CANDIDATE} "
        "from the candidate" in text
    )
    _, swapped = compare(
        "--qrels",
        str(compared.qrels_path),
        "--baseline",
        str(compared.run_paths["cand"]),
        "--candidate",
        str(compared.run_paths["base"]),
    )
    assert f"{MISSING_FROM_CANDIDATE} from the baseline, 0 from the candidate" in swapped
    _, raw = on_files(compared, "--format", "json")
    report = json.loads(raw)
    assert report["missing_from_run"] == {"baseline": 0, "candidate": MISSING_FROM_CANDIDATE}
    assert report["n"] == 40  # the missing queries count, scored 0


def test_it_gives_the_downloaded_qrels_result_on_a_release(compared: Compared) -> None:
    code_files, files = on_files(compared, "--format", "json")
    code_release, release = on_release(compared, "--format", "json")
    assert code_files == code_release
    assert json.loads(files) == json.loads(release)
    _, text = on_release(compared)
    assert "eval       acme release 1 · 40 queries" in text


def test_it_holds_the_candidate_to_the_projects_list_on_a_release(
    compared: Compared, world: World, tmp_path: Path
) -> None:
    # a document the candidate ranks below 3 for q00
    ranked = [line.split()[2] for line in compared.run_paths["cand"].read_text().splitlines()]
    docid = next(d for d in ranked[3:15] if d != "d0")
    MustNeverBreak.objects.create(project=world.project, qid="q00", docid=docid)
    code, raw = on_release(compared, "--format", "json")
    assert code == 1
    assert json.loads(raw)["must_never_break_violations"][0]["qid"] == "q00"
    empty = tmp_path / "none.txt"
    empty.write_text("# nothing must hold\n")
    code, raw = on_release(compared, "--format", "json", "--must-never-break", str(empty))
    assert json.loads(raw)["must_never_break_violations"] == []
    assert code == 0


def test_it_names_a_release_that_does_not_exist(compared: Compared) -> None:
    for tag, said in (("acme@9", "has no release 9"), ("nope@1", "no project"), ("acme", "SLUG@N")):
        with pytest.raises(CommandError, match=said):
            compare(
                "--release",
                tag,
                "--baseline",
                str(compared.run_paths["base"]),
                "--candidate",
                str(compared.run_paths["cand"]),
            )


# ---------------------------------------------------------------------------------------------
# The API
# ---------------------------------------------------------------------------------------------

URL = "/api/projects/acme/releases/1/compare/"


def post_run(client: Client, path: Path, **fields: Any) -> Any:
    with open(path, "rb") as run:
        return client.post(URL, {"run": run, "baseline": "r-base", **fields})


def test_it_answers_the_compare_json_for_a_run_file(compared: Compared, world: World) -> None:
    response = post_run(world.client_for(world.lead), compared.run_paths["cand"])
    assert response.status_code == 200, response.content
    body = response.json()
    code, raw = on_files(compared, "--format", "json")
    expected = json.loads(raw)
    expected["exit_code"] = code
    assert body == expected


def test_it_answers_200_with_the_verdict_and_exit_code_of_a_regression(
    compared: Compared, world: World
) -> None:
    client = world.client_for(world.lead)
    with open(compared.run_paths["base"], "rb") as run:
        response = client.post(URL, {"run": run, "baseline": "r-cand", "bootstrap": 2000})
    assert response.status_code == 200
    body = response.json()
    code, raw = compare(
        "--qrels",
        str(compared.qrels_path),
        "--baseline",
        str(compared.run_paths["cand"]),
        "--candidate",
        str(compared.run_paths["base"]),
        "--bootstrap",
        "2000",
        "--format",
        "json",
    )
    assert body["exit_code"] == code
    assert body["verdict"] == json.loads(raw)["verdict"]
    assert body["mean_diff"] == json.loads(raw)["mean_diff"]


def test_it_refuses_a_bad_run_file_naming_its_line(
    compared: Compared, world: World, tmp_path: Path
) -> None:
    bad = tmp_path / "candidate.run"
    bad.write_text("q00 Q0 d1 1 2.0 x\nq00 Q0 d2 2 two x\n")
    response = post_run(world.client_for(world.lead), bad)
    assert response.status_code == 400
    assert response.json()["detail"].startswith("candidate.run:2: ")


def test_it_refuses_an_unknown_baseline_and_release(compared: Compared, world: World) -> None:
    client = world.client_for(world.lead)
    with open(compared.run_paths["cand"], "rb") as run:
        response = client.post(URL, {"run": run, "baseline": "nope"})
    assert response.status_code == 400
    assert "no run named 'nope'" in response.json()["detail"]
    with open(compared.run_paths["cand"], "rb") as run:
        response = client.post(URL.replace("/1/", "/7/"), {"run": run, "baseline": "r-base"})
    assert response.status_code == 404


def test_it_is_for_leads_by_token_too(compared: Compared, world: World) -> None:
    assert post_run(world.client_for(world.alice), compared.run_paths["cand"]).status_code == 403
    assert post_run(world.client_for(world.outsider), compared.run_paths["cand"]).status_code == 404
    key = "k" * 40
    ApiToken.objects.create(
        user=world.lead, name="ci", digest=key_digest(key), stamp=password_stamp(world.lead)
    )
    with open(compared.run_paths["cand"], "rb") as run:
        response = Client().post(
            URL, {"run": run, "baseline": "r-base"}, HTTP_AUTHORIZATION=f"Token {key}"
        )
    assert response.status_code == 200
    assert response.json()["metric"] == "ndcg@10"


# ---------------------------------------------------------------------------------------------
# Against a release cut and re-scored by the release services (skipped until they are present)
# ---------------------------------------------------------------------------------------------


def test_it_equals_compare_on_a_cut_releases_downloads(
    tmp_path: Path, django_capture_on_commit_callbacks: Any
) -> None:
    pytest.importorskip("evaluation.services_release")
    worlds = pytest.importorskip("tests.release_world")
    from django.urls import reverse

    world = worlds.release_world(tmp_path)
    lead, slug = world.client_for(world.lead), world.project.slug
    data = {"policy": "adjudicated", "unresolved": "lower", "note": ""}
    with django_capture_on_commit_callbacks(execute=True):  # the re-scoring job, eager
        assert lead.post(reverse("releases", args=[slug]), data).status_code == 302
    download = lead.get(reverse("release_download", args=[slug, 1, "qrels"]))
    qrels = tmp_path / "release.qrels"
    qrels.write_bytes(b"".join(download.streaming_content))
    runs = {
        run.name: worlds.run_file(run, tmp_path / f"{run.name}.run")
        for run in world.project.runs.all()
    }
    files = ["--baseline", str(runs["b"]), "--candidate", str(runs["c"]), "--format", "json"]
    code, raw = compare("--qrels", str(qrels), *files)
    expected = json.loads(raw)
    assert compare("--release", f"{slug}@1", *files) == (code, raw)
    page = lead.get(reverse("compare", args=[slug, 1]), {"baseline": "b", "candidate": "c"})
    assert page.status_code == 200, page.content.decode()[:500]
    shown = page.context["report"].as_dict()
    assert shown == {k: v for k, v in expected.items() if k not in ("contract", "missing_from_run")}
    worst = page.context["worst"][0]
    assert worst["candidate_url"].startswith(
        reverse("inspector", args=[slug, 1, world.project.runs.get(name="c").pk])
    )
    assert lead.get(worst["candidate_url"]).status_code == 200
    with open(runs["c"], "rb") as run:
        api = lead.post(f"/api/projects/{slug}/releases/1/compare/", {"run": run, "baseline": "b"})
    assert api.status_code == 200
    assert api.json() == {**expected, "exit_code": code}
