"""The LLM judge end to end against a local OpenAI-compatible server, through the real `openai`
client: configuration and versions, labelling and its stored rows, the gate, cancel and resume,
and cost."""

from __future__ import annotations

import pytest

from annotation.models import Project
from annotation.services import protocol_publish
from jobs.models import Job, JobState
from jobs.run import job_execute
from jobs.services import job_cancel, job_create
from judging import llm_batch
from judging.models import Calibration, JudgeKind, JudgeVersion, LLMJudge, LLMJudgment
from judging.services_llm import (
    GateRefused,
    JudgeError,
    cost_of,
    gate_passed,
    judge_add,
    judge_update,
    judge_version_current,
    llm_label_pairs,
    llm_label_scope,
    llm_label_start,
)
from pooling.models import Pair
from tests.llm_project import endpoint_judge, llm_project, pair_key, pair_of, server
from tests.llm_server import LLMServer, Reply

__all__ = ["server"]  # the fixture, used by name

pytestmark = pytest.mark.django_db


def all_pairs(project: Project) -> list[int]:
    pairs = Pair.objects.filter(query__project=project).order_by("pk")
    return list(pairs.values_list("pk", flat=True))


def passed(version: JudgeVersion) -> None:
    Calibration.objects.create(version=version, n=120, passed=True)


def rows(version: JudgeVersion) -> dict[str, LLMJudgment]:
    found = LLMJudgment.objects.filter(version=version).select_related(
        "pair__query", "pair__document"
    )
    return {f"{r.pair.query.qid}/{r.pair.document.docid}": r for r in found}


def by_document(key: tuple[str, str]) -> Reply:
    """Doc 1 is graded 1, Doc 2 2, Doc 3 3, Doc 4 0."""
    return Reply.grade(int(key[1][-1]) % 4)


# --------------------------------------------------------------------------- configuration


def test_it_refuses_a_bad_configuration(server: LLMServer) -> None:
    project = llm_project()
    endpoint_judge(project, server)
    cases: list[tuple[dict[str, object], str]] = [
        ({"name": "gpt"}, "already has a judge named 'gpt'"),
        ({"name": "x", "base_url": "localhost:8000"}, "http:// or https://"),
        ({"name": "x", "model": " "}, "Name the model"),
        ({"name": "x", "api_key_env": "OPENAI KEY"}, "not an environment variable name"),
        ({"name": "x", "concurrency": 0}, "Concurrency is 1 to 256"),
        ({"name": "x", "timeout": 0}, "timeout"),
        ({"name": "x", "max_retries": 11}, "Retries are 0 to 10"),
        ({"name": "x", "prompt_template": "$query $document $passage"}, r"\$passage"),
    ]
    for options, message in cases:
        arguments: dict[str, object] = {
            "project": project, "name": "x", "base_url": server.url, "model": "m",
        }  # fmt: skip
        arguments.update(options)
        with pytest.raises(JudgeError, match=message):
            judge_add(**arguments)  # type: ignore[arg-type]
    judge = LLMJudge.objects.get(project=project)
    with pytest.raises(JudgeError, match="no setting 'api_key'"):
        judge_update(judge=judge, api_key="sk-secret")


def test_it_makes_a_new_version_for_what_changes_answers_only(server: LLMServer) -> None:
    project = llm_project()
    judge = endpoint_judge(project, server)
    first = judge_version_current(judge=judge)
    assert first.config["model"] == "test-model" and first.protocol is not None
    assert "api_key" not in str(first.config)
    judge_update(judge=judge, concurrency=16, timeout=5.0, max_retries=0)
    assert judge_version_current(judge=judge) == first  # when answers come, not what they are
    judge_update(judge=judge, prompt_template="Q: $query\nDocument: $document")
    second = judge_version_current(judge=judge)
    assert second != first and second.digest != first.digest
    judge_update(judge=judge, prompt_template="")
    assert judge_version_current(judge=judge) == first
    protocol_publish(project=project, text="Grades, reworded.")
    third = judge_version_current(judge=judge)
    assert third not in (first, second) and third.protocol.number == 2  # type: ignore[union-attr]
    judge_update(judge=judge, reasoning=True)
    assert judge_version_current(judge=judge) != third
    assert JudgeVersion.objects.filter(judge=judge).count() == 4


# --------------------------------------------------------------------------- labelling


def test_it_stores_scripted_grades_retries_and_failures(server: LLMServer) -> None:
    project = llm_project()
    version = judge_version_current(judge=endpoint_judge(project, server))
    server.default = by_document
    server.plan(pair_key(pair_of(project, "q1", "d1")), Reply.error(429, retry_after="0"),
                Reply.error(500), Reply.grade(3, "third time"))  # fmt: skip
    server.plan(pair_key(pair_of(project, "q1", "d2")), Reply.error(400, "context too long"))
    server.plan(pair_key(pair_of(project, "q1", "d3")), *[Reply.slow(5)] * 3)
    server.plan(pair_key(pair_of(project, "q2", "d1")), Reply.text('{"grade": 2, "reas'))
    server.plan(pair_key(pair_of(project, "q2", "d2")), Reply.text(""))
    server.plan(pair_key(pair_of(project, "q2", "d3")), Reply.text("It is a 2."))
    judge = version.judge
    judge_update(judge=judge, timeout=0.3)
    result = llm_label_pairs(version=version, pair_ids=all_pairs(project), concurrency=4)
    assert (result.labelled, result.parse_failures, result.failed) == (40, 3, 2)
    assert result.calls == 40 + 2 + 2  # the 429 and 500 retried, the timeouts twice
    assert result.skipped_existing == 0
    stored = rows(version)
    assert len(stored) == 40
    retried = stored["q1/d1"]
    assert (retried.status, retried.grade, retried.reason) == ("ok", 3, "third time")
    assert retried.attempts == 3
    refused = stored["q1/d2"]
    assert (refused.status, refused.grade, refused.attempts) == ("failed", None, 1)
    assert refused.error == "HTTP 400: context too long"
    slow = stored["q1/d3"]
    assert (slow.status, slow.attempts) == ("failed", 3) and "timed out" in slow.error
    for name, error in (("q2/d1", "not JSON"), ("q2/d2", "empty"), ("q2/d3", "not JSON")):
        row = stored[name]
        assert (row.status, row.grade) == ("parse_failure", None) and error in row.error
    assert stored["q2/d3"].raw == "It is a 2."
    plain = stored["q3/d4"]
    assert (plain.status, plain.grade, plain.attempts) == ("ok", 0, 1)
    assert plain.prompt_tokens and plain.completion_tokens and plain.latency_ms


def test_it_calls_nothing_again_for_pairs_with_a_row(server: LLMServer) -> None:
    project = llm_project()
    version = judge_version_current(judge=endpoint_judge(project, server))
    pairs = all_pairs(project)
    first = llm_label_pairs(version=version, pair_ids=pairs[:15], concurrency=4)
    assert (first.labelled, first.skipped_existing, server.requests) == (15, 0, 15)
    again = llm_label_pairs(version=version, pair_ids=pairs, concurrency=4)
    assert (again.labelled, again.skipped_existing, again.calls) == (25, 15, 25)
    assert server.requests == 40 and set(server.counts.values()) == {1}
    nothing = llm_label_pairs(version=version, pair_ids=pairs, concurrency=8)
    assert (nothing.labelled, nothing.calls, nothing.skipped_existing) == (0, 0, 40)
    assert server.requests == 40
    assert LLMJudgment.objects.filter(version=version).count() == 40
    retest = llm_label_pairs(version=version, pair_ids=pairs[:5], concurrency=2, repeat=1)
    assert retest.labelled == 5 and LLMJudgment.objects.filter(version=version).count() == 45


def test_it_reads_the_api_key_from_the_named_variable_at_call_time(
    server: LLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = llm_project()
    judge = endpoint_judge(project, server, api_key_env="ASSAY_JUDGE_KEY")
    monkeypatch.delenv("ASSAY_JUDGE_KEY", raising=False)
    passed(judge_version_current(judge=judge))
    failed = llm_label_start(judge=judge, mode="label")
    failed.refresh_from_db()
    assert failed.state == JobState.FAILED
    assert "ASSAY_JUDGE_KEY holding the judge's API key is not set" in failed.error
    assert server.requests == 0 and not LLMJudgment.objects.exists()
    monkeypatch.setenv("ASSAY_JUDGE_KEY", "sk-from-env")
    job = llm_label_start(judge=judge, mode="label", limit=3)
    job.refresh_from_db()
    assert job.state == JobState.DONE, job.error
    assert server.keys_sent == {"Bearer sk-from-env"}
    assert "sk-from-env" not in str(judge_version_current(judge=judge).config)
    keyless = endpoint_judge(project, server, name="local")
    passed(judge_version_current(judge=keyless))
    llm_label_start(judge=keyless, mode="label", limit=1)
    assert "Bearer none" in server.keys_sent


# --------------------------------------------------------------------------- the gate


def test_it_labels_at_scale_only_after_a_passed_calibration(server: LLMServer) -> None:
    project = llm_project()
    judge = endpoint_judge(project, server)
    version = judge_version_current(judge=judge)
    with pytest.raises(GateRefused, match="has no calibration"):
        llm_label_start(judge=judge, mode="label")
    Calibration.objects.create(version=version, n=120, passed=False, reasons=["floor", "recall"])
    with pytest.raises(GateRefused, match="did not pass its calibration \\(floor, recall\\)"):
        llm_label_start(judge=judge, mode="label")
    assert server.requests == 0 and not Job.objects.exists()
    passed(version)
    assert gate_passed(version=version)
    job = llm_label_start(judge=judge, mode="label")
    job.refresh_from_db()
    assert job.state == JobState.DONE, job.error
    assert (job.kind, job.handler) == ("llm_label", "judging.tasks.llm_label_job")
    assert job.params == {"version_id": version.pk, "mode": "label", "limit": None}
    assert job.result is not None
    assert job.result["labelled"] == 40 and job.result["skipped_existing"] == 0
    # A changed prompt is a new version, with no calibration: the gate closes again.
    judge_update(judge=judge, prompt_template="Query: $query\nDocument: $document\nGrade it.")
    changed = judge_version_current(judge=judge)
    assert changed != version and not gate_passed(version=changed)
    with pytest.raises(GateRefused):
        llm_label_start(judge=judge, mode="label")
    # So does a new protocol version, for the judge as it was.
    judge_update(judge=judge, prompt_template="")
    assert judge_version_current(judge=judge) == version
    protocol_publish(project=project, text="Grades, with a new ruling.")
    assert not gate_passed(version=judge_version_current(judge=judge))
    with pytest.raises(GateRefused, match="has no calibration"):
        llm_label_start(judge=judge, mode="label")
    assert server.requests == 40


def test_the_job_refuses_a_version_without_a_passed_calibration(server: LLMServer) -> None:
    project = llm_project()
    version = judge_version_current(judge=endpoint_judge(project, server))
    job = job_create(
        project=project, kind="llm_label", handler="judging.tasks.llm_label_job",
        params={"version_id": version.pk, "mode": "label", "limit": None},
    )  # fmt: skip
    job_execute(job.pk, heartbeat=False)
    job.refresh_from_db()
    assert job.state == JobState.FAILED and "has no calibration" in job.error
    assert server.requests == 0 and not LLMJudgment.objects.exists()


def test_it_refuses_pairs_of_another_project(server: LLMServer) -> None:
    project, other = llm_project(), llm_project("other")
    version = judge_version_current(judge=endpoint_judge(project, server))
    with pytest.raises(JudgeError, match="not this project's"):
        llm_label_pairs(version=version, pair_ids=all_pairs(other)[:2], concurrency=2)
    assert server.requests == 0


def test_calibration_mode_labels_only_the_given_pairs(server: LLMServer) -> None:
    project = llm_project()
    judge = endpoint_judge(project, server)
    pairs = all_pairs(project)[:6]
    job = llm_label_start(judge=judge, mode="calibration", pair_ids=pairs)
    job.refresh_from_db()
    assert job.state == JobState.DONE, job.error
    assert job.params["pair_ids"] == pairs
    assert set(LLMJudgment.objects.values_list("pair_id", flat=True)) == set(pairs)
    with pytest.raises(JudgeError, match="needs the pairs"):
        llm_label_start(judge=judge, mode="calibration")


def test_it_refuses_to_call_an_external_judge(server: LLMServer) -> None:
    project = llm_project()
    judge = LLMJudge.objects.create(project=project, name="umbrela", kind=JudgeKind.EXTERNAL)
    with pytest.raises(JudgeError, match="no endpoint"):
        llm_label_start(judge=judge, mode="prefilter")
    with pytest.raises(JudgeError, match="No labels have been imported"):
        judge_version_current(judge=judge)


# --------------------------------------------------------------------------- cancel and resume


def test_a_cancelled_job_keeps_its_rows_and_a_new_run_resumes(
    server: LLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = llm_project()
    judge = endpoint_judge(project, server, concurrency=2)  # chunks of 8 pairs
    version = judge_version_current(judge=judge)
    passed(version)
    real_store = llm_batch.store

    def store_then_cancel(*args: object) -> None:
        real_store(*args)  # type: ignore[arg-type]
        running = Job.objects.filter(state=JobState.RUNNING, cancel_requested=False).first()
        if running is not None:
            job_cancel(job=running)  # a lead, from the job's page

    monkeypatch.setattr(llm_batch, "store", store_then_cancel)
    job = llm_label_start(judge=judge, mode="label")
    job.refresh_from_db()
    assert job.state == JobState.DISCARDED and "cancelled" in job.message
    kept = LLMJudgment.objects.filter(version=version).count()
    assert 8 <= kept < 40  # the first chunk and the calls under way when it stopped
    assert server.requests == kept  # nothing called that was not stored
    monkeypatch.setattr(llm_batch, "store", real_store)
    resumed = llm_label_start(judge=judge, mode="label")
    resumed.refresh_from_db()
    assert resumed.state == JobState.DONE, resumed.error
    assert resumed.result is not None
    assert resumed.result["skipped_existing"] == kept and resumed.result["labelled"] == 40 - kept
    assert LLMJudgment.objects.filter(version=version).count() == 40
    assert server.requests == 40 and set(server.counts.values()) == {1}


# --------------------------------------------------------------------------- scope and cost


def test_the_limit_takes_the_first_pairs_of_the_scope(server: LLMServer) -> None:
    project = llm_project()
    version = judge_version_current(judge=endpoint_judge(project, server))
    assert llm_label_scope(version=version, mode="label", limit=5) == all_pairs(project)[:5]
    with pytest.raises(JudgeError):
        llm_label_scope(version=version, mode="calibration")


def test_it_reports_tokens_and_cost_per_thousand_judgments(server: LLMServer) -> None:
    project = llm_project()
    judge = endpoint_judge(project, server)
    version = judge_version_current(judge=judge)
    empty = cost_of(version=version)
    assert (empty["judgments"], empty["cost"], empty["per_1000"]["tokens_in"]) == (0, None, None)
    llm_label_pairs(version=version, pair_ids=all_pairs(project)[:10], concurrency=4)
    report = cost_of(version=version)
    stored = LLMJudgment.objects.filter(version=version)
    tokens_in = sum(r.prompt_tokens or 0 for r in stored)
    tokens_out = sum(r.completion_tokens or 0 for r in stored)
    assert (report["judgments"], report["calls"], report["graded"]) == (10, 10, 10)
    assert (report["tokens_in"], report["tokens_out"]) == (tokens_in, tokens_out)
    assert report["per_1000"]["tokens_in"] == pytest.approx(tokens_in * 100)
    assert report["cost"] is None
    judge_update(judge=judge, price_input=2.5, price_output=10.0)
    priced = cost_of(version=version)
    expected = tokens_in / 1e6 * 2.5 + tokens_out / 1e6 * 10.0
    assert priced["cost"] == pytest.approx(expected)
    assert priced["per_1000"]["cost"] == pytest.approx(expected * 100)
