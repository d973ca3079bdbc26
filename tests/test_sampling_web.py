"""From a raw log to an accepted, stratified, weighted sample: through the real URLs."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from annotation.models import Query
from sampling.models import LogQueryStat, LogStatus, QueryLog, QuerySample
from tests.conftest import World

pytestmark = pytest.mark.django_db


def make_log() -> bytes:
    """A hand-made log: 'pricing' 6 times, 'reset password' 3, then eight queries seen once.

    One session types 'exprot csv' and, 10 s later, 'export csv' (a reformulation); a
    zero-result query ('qm-9999') appears twice; one query holds an e-mail address.
    """
    lines = ["query,timestamp,session_id,user_id,result_count,clicked"]
    t = 1_700_000_000
    for i in range(6):
        lines.append(f"pricing,{t + i * 100},s{i},u{i},12,1")
    for i in range(3):
        lines.append(f"reset password,{t + 1000 + i},r{i},u{i},5,1")
    lines.append(f"exprot csv,{t + 2000},x1,u9,0,0")
    lines.append(f"export csv,{t + 2010},x1,u9,8,1")
    lines.append(f"qm-9999,{t + 3000},z1,u8,0,0")
    lines.append(f"qm-9999,{t + 3100},z2,u7,0,0")
    for i, q in enumerate(["dark mode", "offline notes", "share a page", "api limits"]):
        lines.append(f"{q},{t + 4000 + i},o{i},u{i},3,1")
    lines.append(f"contact bob@example.com,{t + 5000},p1,u1,1,0")
    return ("\n".join(lines) + "\n").encode()


@pytest.fixture(autouse=True)
def media(settings, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture
def upload(world: World, django_capture_on_commit_callbacks):
    """Upload as the lead; the ingestion task runs (eagerly) when the request commits."""

    def send(content: bytes, name: str = "log.csv", columns: str = "") -> QueryLog:
        client = world.client_for(world.lead)
        data = {"log": SimpleUploadedFile(name, content), "columns": columns}
        with django_capture_on_commit_callbacks(execute=True):
            response = client.post(reverse("log_list", args=[world.project.slug]), data)
        assert response.status_code == 302, response.content
        return QueryLog.objects.filter(project=world.project).latest("pk")

    return send


def test_it_goes_from_a_raw_log_to_accepted_queries(upload, world: World, media: Path) -> None:
    query_log = upload(make_log())
    assert query_log.status == LogStatus.DONE, query_log.error
    assert not any(media.rglob("*.csv"))  # the raw log is gone once ingested
    lead = world.client_for(world.lead)
    page = lead.get(reverse("log_detail", args=[world.project.slug, query_log.pk])).content.decode()
    assert 'id="strata-table"' in page and "<svg" in page
    stats = {s.query: s for s in LogQueryStat.objects.filter(log=query_log)}
    assert "contact bob@example.com" not in stats  # personal data excluded by default
    assert stats["pricing"].frequency == 6 and stats["qm-9999"].zero_result_rate == 1.0
    assert stats["exprot csv"].reformulation_rate == 1.0

    url = reverse("sample_create", args=[world.project.slug, query_log.pk])
    quotas = {"head": 1, "torso": 1, "tail": 2, "failures": 1, "seed": 7}
    response = lead.post(url, quotas)
    sample = QuerySample.objects.get()
    assert response.status_code == 302
    again = lead.post(url, quotas)
    assert again.status_code == 302
    repeat = QuerySample.objects.exclude(pk=sample.pk).get()
    assert [q["query"] for q in repeat.drawn] == [q["query"] for q in sample.drawn]  # same seed

    before = Query.objects.filter(project=world.project).count()
    lead.post(reverse("sample_accept", args=[world.project.slug, sample.pk]))
    added = Query.objects.filter(project=world.project, sampled__sample=sample)
    assert added.count() == len(sample.drawn) == Query.objects.count() - before
    for query in added:
        assert query.stratum in {"head", "torso", "tail", "failures"}
        assert 0 < (query.inclusion_probability or 0) <= 1
        assert query.signals is not None and query.frequency
    # Accepting twice adds nothing.
    lead.post(reverse("sample_accept", args=[world.project.slug, sample.pk]))
    assert Query.objects.count() - before == len(sample.drawn)


def test_it_excludes_queries_already_in_the_project(upload, world: World) -> None:
    query_log = upload(make_log())
    world.project.queries.create(qid="mine", text="Pricing")  # normalised: "pricing"
    lead = world.client_for(world.lead)
    url = reverse("sample_create", args=[world.project.slug, query_log.pk])
    lead.post(url, {"head": 5, "torso": 5, "tail": 20, "failures": 5, "seed": 1})
    drawn = {q["query"] for q in QuerySample.objects.get().drawn}
    assert "pricing" not in drawn and "reset password" in drawn


def test_it_refuses_a_log_over_the_upload_limit_and_says_what_to_do(
    world: World, settings, media: Path
) -> None:
    settings.LOG_UPLOAD_MAX_BYTES = 100
    client = world.client_for(world.lead)
    url = reverse("log_list", args=[world.project.slug])
    content = make_log()
    assert len(content) > 100
    response = client.post(url, {"log": SimpleUploadedFile("log.csv", content)}, follow=True)
    page = response.content.decode()
    assert "over this server&#x27;s limit of 100" in page and "import_log" in page
    assert not QueryLog.objects.exists() and not any(media.rglob("*"))
    settings.LOG_UPLOAD_MAX_BYTES = 10**9  # the same file within the limit is taken
    assert client.post(url, {"log": SimpleUploadedFile("log.csv", content)}).status_code == 302
    assert QueryLog.objects.count() == 1


def test_it_reports_a_bad_log_and_changes_nothing(upload, world: World, media: Path) -> None:
    queries_before = Query.objects.count()
    query_log = upload(b"search_terms,when\nhello,1\n")
    assert query_log.status == LogStatus.FAILED
    assert "search_terms" in query_log.error  # the message lists the columns found
    assert not LogQueryStat.objects.exists() and Query.objects.count() == queries_before
    assert not any(media.rglob("*.csv"))
    page = world.client_for(world.lead).get(
        reverse("log_detail", args=[world.project.slug, query_log.pk])
    )
    assert "could not be read" in page.content.decode()


def test_it_maps_columns_and_polls_progress_with_htmx(upload, world: World) -> None:
    content = make_log().replace(b"query,", b"q,", 1)
    query_log = upload(content, columns="query=q")
    assert query_log.status == LogStatus.DONE
    partial = world.client_for(world.lead).get(
        reverse("log_detail", args=[world.project.slug, query_log.pk]),
        headers={"HX-Request": "true"},
    )
    assert b'id="log-status"' in partial.content and b"<html" not in partial.content


def test_it_keeps_logs_from_annotators_and_outsiders(upload, world: World) -> None:
    url = reverse("log_list", args=[world.project.slug])
    assert world.client_for(world.alice).get(url).status_code == 403
    assert world.client_for(world.outsider).get(url).status_code == 404


def test_it_imports_a_log_and_samples_from_the_command_line(
    upload, world: World, tmp_path: Path
) -> None:
    path = tmp_path / "log.csv"
    path.write_bytes(make_log())
    out = io.StringIO()
    call_command(
        "import_log", world.project.slug, str(path), "--quota", "head=1,tail=2", "--seed", "3",
        "--accept", stdout=out,
    )  # fmt: skip
    assert "head" in out.getvalue() and "queries added" in out.getvalue()
    # Each stratum's draw is reported, a quota the stratum cannot fill included.
    assert "  head      quota    1, drew    1 of 1 (0 already in the project)" in out.getvalue()
    assert "  torso     quota    0, drew    0 of 1" in out.getvalue()
    sample = QuerySample.objects.get()
    # 17 events (the e-mail query is excluded); thirds end at 5.67 and 11.33. 'pricing' (6)
    # alone holds more than a third, but the most frequent query is always head. 'reset
    # password' ends at 9 and 'qm-9999' at 11: torso, but 'qm-9999' never finds anything
    # (seen twice): a known failure. The six queries seen once end at 17: tail. Head 1 and
    # tail 2 are drawn.
    assert {d["stratum"]: d["population"] for d in sample.draws} == {
        "head": 1,
        "torso": 1,
        "tail": 6,
        "failures": 1,
    }
    added = Query.objects.filter(project=world.project, sampled__sample=sample)
    assert added.count() == len(sample.drawn) == 3
    assert sorted(added.values_list("stratum", flat=True)) == ["head", "tail", "tail"]
    assert added.get(stratum="head").text == "pricing"
    bad = tmp_path / "bad.csv"
    bad.write_text("nothing,here\n1,2\n")
    with pytest.raises(CommandError, match="No statistics or queries were added") as raised:
        call_command("import_log", world.project.slug, str(bad))
    assert str(raised.value).count(str(bad)) == 1  # the file is named once
    failed = QueryLog.objects.get(job__state=LogStatus.FAILED)  # kept for the log history
    assert f"the failed attempt is listed among the project's logs (#{failed.pk})" in str(
        raised.value
    )


def test_it_adds_a_query_once_when_two_previews_are_accepted(upload, world: World) -> None:
    # Two previews drawn before either is accepted both see the same project: their draws
    # overlap. Accepting both must add each query once and say how many were skipped.
    query_log = upload(make_log())
    lead = world.client_for(world.lead)
    url = reverse("sample_create", args=[world.project.slug, query_log.pk])
    quotas = {"head": 5, "torso": 5, "tail": 20, "failures": 5}
    lead.post(url, {**quotas, "seed": 1})
    lead.post(url, {**quotas, "seed": 2})
    first, second = QuerySample.objects.order_by("pk")
    overlap = {q["query"] for q in first.drawn} & {q["query"] for q in second.drawn}
    assert overlap  # every query of this small log is drawn by both
    lead.post(reverse("sample_accept", args=[world.project.slug, first.pk]))
    response = lead.post(
        reverse("sample_accept", args=[world.project.slug, second.pk]), follow=True
    )
    texts = list(Query.objects.filter(project=world.project).values_list("text", flat=True))
    assert len(texts) == len(set(texts))
    added = len(second.drawn) - len(overlap)
    assert Query.objects.filter(sampled__sample=second).count() == added
    assert f"{len(overlap)} drawn queries were in the project already and skipped" in (
        response.content.decode()
    )


@pytest.mark.parametrize("seed", [str(2**63), str(2**70), "-1", "seven", "1.5"])
def test_it_refuses_a_seed_that_cannot_be_stored(upload, world: World, seed: str) -> None:
    query_log = upload(make_log())
    lead = world.client_for(world.lead)
    url = reverse("sample_create", args=[world.project.slug, query_log.pk])
    response = lead.post(url, {"head": 1, "tail": 2, "seed": seed}, follow=True)
    assert response.status_code == 200
    assert "the seed must be a whole number from 0 to 9223372036854775807" in (
        response.content.decode()
    )
    assert not QuerySample.objects.exists()
    lead.post(url, {"head": 1, "tail": 2, "seed": str(2**63 - 1)})
    assert QuerySample.objects.get().seed == 2**63 - 1  # the largest seed is kept as given


def test_it_refuses_a_seed_that_cannot_be_stored_on_the_command_line(
    world: World, tmp_path: Path
) -> None:
    path = tmp_path / "log.csv"
    path.write_bytes(make_log())
    with pytest.raises(CommandError, match="--seed: must be from 0 to"):
        call_command(
            "import_log", world.project.slug, str(path), "--quota", "tail=2", "--seed", str(2**63)
        )
    assert not QueryLog.objects.exists()  # refused before anything was read
