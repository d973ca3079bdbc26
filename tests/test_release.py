"""Releases: the labels of each policy with their provenance, the manifest, immutability, the
diff, and the runs re-scored under a release (equal to `evaluate` on the downloaded files)."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Any

import pytest

from agreement.services_adjudication import adjudication_create
from evaluation.measures import evaluate_files
from evaluation.models import Release, ReleaseLabel, RunEvaluation
from evaluation.services import qrels_export
from evaluation.services_release import (
    STORED_CONTRACT,
    STORED_MEASURES,
    ReleaseError,
    release_create,
    release_diff,
    release_of,
    release_qrels,
    release_rescore,
    run_ranking,
    run_scores,
)
from evaluation.stats import bootstrap_interval
from jobs.models import Job
from judging.services_import import judgments_import
from pooling.models import Run
from tests.llm_project import pair_of
from tests.release_world import (
    ReleaseWorld,
    alice_grade,
    llm_grade,
    release_world,
    run_file,
    write_qrels,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(tmp_path: Path) -> ReleaseWorld:
    return release_world(tmp_path)


def labels(release: Release) -> dict[tuple[str, str], ReleaseLabel]:
    return {(x.qid, x.docid): x for x in release.labels.all()}


def exported(world: ReleaseWorld, unresolved: str = "lower") -> list[tuple[str, str, int]]:
    out = io.StringIO()
    qrels_export(project=world.project, out=out, unresolved=unresolved)  # type: ignore[arg-type]
    return [(q, d, int(g)) for q, _, d, g in (line.split() for line in out.getvalue().splitlines())]


def test_it_numbers_releases_and_takes_the_final_labels_of_the_adjudicated_policy(
    world: ReleaseWorld,
) -> None:
    first = release_create(project=world.project, policy="adjudicated", user=world.lead)
    second = release_create(project=world.project, policy="adjudicated", user=world.lead)
    assert (first.number, second.number) == (1, 2)
    assert release_qrels(release=first) == exported(world)
    assert first.content_hash == second.content_hash
    found = labels(first)
    assert len(found) == 32  # q1-q8, four documents each
    assert found[("q1", "d1")].source == "adjudicated" and found[("q1", "d1")].by == ["lead"]
    assert found[("q1", "d1")].grade == 3
    assert found[("q1", "d2")].source == "unresolved"
    assert found[("q1", "d2")].grade == min(alice_grade(1, 2), (alice_grade(1, 2) + 1) % 4)
    assert found[("q1", "d3")].source == "agreed" and found[("q1", "d3")].by == ["alice", "bob"]
    assert found[("q5", "d1")].source == "single" and found[("q5", "d1")].by == ["alice"]
    assert found[("q1", "d1")].stratum == "head" and found[("q8", "d1")].stratum == "tail"


@pytest.mark.parametrize("unresolved", ["exclude", "lower", "higher"])
def test_its_qrels_equal_the_export_for_each_unresolved_policy(
    world: ReleaseWorld, unresolved: str
) -> None:
    release = release_create(project=world.project, policy="adjudicated", unresolved=unresolved)
    assert release_qrels(release=release) == exported(world, unresolved)


def test_the_humans_policy_leaves_adjudications_out(world: ReleaseWorld) -> None:
    release = release_create(project=world.project, policy="humans")
    found = labels(release)
    assert found[("q1", "d1")].source == "unresolved"
    assert {x.source for x in found.values()} == {"agreed", "single", "unresolved"}
    assert len(found) == 32


def test_the_llm_policy_adds_the_passed_judge_outside_the_human_only_slice(
    world: ReleaseWorld,
) -> None:
    release = release_create(project=world.project, policy="llm")
    found = labels(release)
    llm = {key: x for key, x in found.items() if x.source == "llm"}
    assert sorted(llm) == [("q9", f"d{d}") for d in range(1, 5)]  # q10 is human-only
    assert all(x.grade == llm_grade(9, int(x.docid[1:])) for x in llm.values())
    assert {x.judge_version_id for x in llm.values()} == {world.version.pk}
    manifest = release.manifest
    assert manifest["counts"]["source"]["llm"] == 4
    assert manifest["human_only"] == ["q10"]
    assert manifest["judge_versions"] == [
        {"judge": "umbrela", "digest": world.version.digest, "kappa": 0.61, "labels": 4}
    ]


def test_a_judge_without_a_passed_gate_labels_nothing(world: ReleaseWorld) -> None:
    world.version.calibrations.all().update(passed=False)
    release = release_create(project=world.project, policy="llm")
    assert not release.labels.filter(source="llm").exists()


def test_the_manifest_says_what_the_release_was_made_of(world: ReleaseWorld) -> None:
    project, lead = world.project, world.lead
    release = release_create(project=project, policy="adjudicated", note="v1", user=lead)
    manifest = release.manifest
    assert manifest["release"] == 1 and manifest["policy"] == "adjudicated"
    assert manifest["unresolved"] == "lower" and manifest["note"] == "v1"
    assert manifest["created_by"] == "lead"
    assert manifest["protocol_versions"] == [1]
    assert [p["depth"] for p in manifest["pools"]] == [4] and manifest["runs_pooled"] == ["a"]
    assert sum(manifest["counts"]["grade"].values()) == 32 == release.pairs
    assert manifest["counts"]["stratum"] == {"head": 24, "tail": 8}
    lines = "".join(f"{q} 0 {d} {g}\n" for q, d, g in release_qrels(release=release))
    assert manifest["content_hash"] == hashlib.sha256(lines.encode()).hexdigest()


def test_later_judgments_do_not_change_a_release(world: ReleaseWorld, tmp_path: Path) -> None:
    first = release_create(project=world.project, policy="adjudicated")
    before = release_qrels(release=first)
    grades = {(f"q{q}", f"d{d}"): 3 for q in (9, 10) for d in range(1, 5)}
    path = write_qrels(tmp_path / "c.qrels", grades)
    judgments_import(project=world.project, path=path, name="carol", kind="human")
    adjudication_create(pair=pair_of(world.project, "q3", "d1"), lead=world.lead, grade=2)
    second = release_create(project=world.project, policy="adjudicated")
    assert release_qrels(release=release_of(project=world.project, number=1)) == before
    assert first.content_hash != second.content_hash and second.pairs == 40
    diff = release_diff(old=first, new=second)
    assert sorted(diff.added) == sorted((q, d, 3) for (q, d) in grades)
    assert not diff.removed
    assert [(x.qid, x.docid, x.why) for x in diff.regraded] == [("q3", "d1", "adjudication")]
    assert {s.stratum: (s.added, s.regraded) for s in diff.strata} == {
        "head": (0, 1),
        "tail": (8, 0),
    }


def test_the_diff_tells_an_llm_label_from_new_judgments(world: ReleaseWorld) -> None:
    humans = release_create(project=world.project, policy="humans")
    llm = release_create(project=world.project, policy="llm")
    diff = release_diff(old=humans, new=llm)
    assert {(q, d) for q, d, _ in diff.added} == {("q9", f"d{d}") for d in range(1, 5)}
    assert {x.why for x in diff.regraded} == {"adjudication"}
    back = release_diff(old=llm, new=humans)
    assert len(back.removed) == 4 and {x.why for x in back.regraded} == {"new judgments"}


def test_it_refuses_an_unknown_policy(world: ReleaseWorld) -> None:
    with pytest.raises(ReleaseError):
        release_create(project=world.project, policy="everything")
    with pytest.raises(ReleaseError):
        release_create(project=world.project, policy="humans", unresolved="median")
    assert not Release.objects.exists()


# --------------------------------------------------------------------------- re-scoring


def test_a_new_release_scores_every_run_equal_to_evaluate_on_the_files(
    world: ReleaseWorld, tmp_path: Path, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):  # eager Celery: scored at commit
        release = release_create(project=world.project, policy="adjudicated")
    job = Job.objects.get(kind="release_rescore")
    assert job.state == "done" and job.params == {"release_id": release.pk}
    qrels = tmp_path / "release.qrels"
    qrels.write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in release_qrels(release=release)))
    stored = run_scores(release=release)
    assert [e.run.name for e in stored] == ["a", "b", "c"]
    for evaluation in stored:
        path = run_file(evaluation.run, tmp_path / f"{evaluation.run.name}.run")
        expected = evaluate_files(qrels, [path], STORED_MEASURES, STORED_CONTRACT)[str(path)]
        assert evaluation.means == pytest.approx(expected.mean, abs=1e-12)
        assert evaluation.per_query.keys() == expected.per_query.keys()
        for qid, values in expected.per_query.items():
            assert evaluation.per_query[qid] == pytest.approx(values, abs=1e-12)
        assert evaluation.queries == {
            "scored": expected.scored,
            "skipped_no_relevant": expected.skipped_no_relevant,
            "missing_from_run": expected.missing_from_run,
        }
        ndcg = [expected.per_query[q]["ndcg@10"] for q in expected.per_query]
        interval = bootstrap_interval(ndcg, resamples=10_000, seed=0)
        assert evaluation.intervals["ndcg@10"] == pytest.approx([interval.lo, interval.hi])
        assert evaluation.contract == STORED_CONTRACT.as_dict()
    c = next(e for e in stored if e.run.name == "c")
    assert c.queries["missing_from_run"] == 1  # q8 (q9, q10 are not in the release)


def test_a_retried_rescore_writes_no_duplicate(
    world: ReleaseWorld, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        release = release_create(project=world.project, policy="adjudicated")
    assert RunEvaluation.objects.filter(release=release).count() == 3
    assert release_rescore(release=release) == 0  # every run is scored: nothing to do
    runs = list(Run.objects.filter(project=world.project))
    assert release_rescore(release=release, runs=runs) == 3  # asked again: replaced
    assert RunEvaluation.objects.filter(release=release).count() == 3


def test_run_ranking_is_in_trec_eval_order(world: ReleaseWorld) -> None:
    run = Run.objects.get(project=world.project, name="b")
    assert run_ranking(run=run, qid="q1") == [("d4", 4.0), ("d3", 3.0), ("d2", 2.0), ("d1", 1.0)]


def test_it_refuses_a_release_with_no_label_and_numbers_nothing() -> None:
    from tests.llm_project import llm_project

    project = llm_project("empty")
    with pytest.raises(ReleaseError, match="Nothing to release: no pair has a label"):
        release_create(project=project, policy="llm")
    assert not Release.objects.filter(project=project).exists()
