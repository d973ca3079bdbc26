"""The LLM judge: configuring a judge, its versions, labelling pairs, the pre-filter and the
human-only slice.

A judge version is the digest of everything that can change its answers (`judge_version_current`);
a new version has no calibration, and labelling beyond the calibration subset needs the
version's latest calibration to have passed (`gate_passed`: checked when a job is started and
again inside the job).

Labelling (`llm_label_pairs`) fans calls out to a pool of threads, `concurrency` of them; the
threads only call the endpoint, every database read and write stays on the job's own thread.
Rows are stored chunk by chunk with one row per (version, pair, repeat) kept by the unique
constraint, so a retried or redelivered job neither stores a pair twice nor calls again for a
pair that has a row; a cancelled job keeps what it stored and a new run resumes after it.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import Count, Q, Sum

from annotation.models import Project, ProtocolVersion, Query
from jobs.models import Job
from jobs.services import job_create, job_enqueue
from pooling.models import Pair

from .answers import current_answers
from .llm_batch import Batch, LabelResult, Progress, Tally, missing, pairs_of_project
from .llm_client import JudgeClient
from .llm_prompt import (
    DOCUMENT_CHARS,
    GRADE_SCHEMA,
    REASONING_PREAMBLE,
    SYSTEM_MESSAGE,
    PromptError,
    effective_template,
    judge_digest,
    template_check,
)
from .models import (
    Calibration,
    HumanOnlyQuery,
    JudgeKind,
    JudgeSettings,
    JudgeVersion,
    LLMJudge,
    LLMJudgment,
    LLMStatus,
    Screening,
    WorkItem,
    WorkUnit,
)

LLM_LABEL = "llm_label"
MODES = ("label", "prefilter", "calibration")
PLACEHOLDER_KEY = "none"  # local servers (vLLM, Ollama, llama.cpp) take any key
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
EDITABLE = {
    "base_url", "model", "api_key_env", "concurrency", "timeout", "max_retries",
    "prompt_template", "reasoning", "temperature", "price_input", "price_output",
}  # fmt: skip


class JudgeError(ValueError):
    """A bad configuration or a refused operation, in words a lead can act on."""


class GateRefused(JudgeError):
    """Labelling at scale asked of a version whose latest calibration did not pass."""


# --------------------------------------------------------------------------- judges


@transaction.atomic
def judge_add(
    *,
    project: Project,
    name: str,
    base_url: str,
    model: str,
    api_key_env: str = "",
    concurrency: int = 8,
    timeout: float = 60.0,
    max_retries: int = 4,
    prompt_template: str = "",
    reasoning: bool = False,
    price_input: float | None = None,
    price_output: float | None = None,
    user: User | None = None,
) -> LLMJudge:
    """A judge calling an OpenAI-compatible endpoint (its key read from `api_key_env` at call
    time, never stored)."""
    if not re.fullmatch(r"[-a-zA-Z0-9_]{1,64}", name or ""):
        raise JudgeError("A judge's name is 1-64 letters, digits, '-' or '_'.")
    if LLMJudge.objects.filter(project=project, name=name).exists():
        raise JudgeError(f"The project already has a judge named {name!r}.")
    judge = LLMJudge(
        project=project,
        name=name,
        kind=JudgeKind.ENDPOINT,
        base_url=base_url,
        model=model,
        api_key_env=api_key_env,
        concurrency=concurrency,
        timeout=timeout,
        max_retries=max_retries,
        prompt_template=prompt_template,
        reasoning=reasoning,
        price_input=price_input,
        price_output=price_output,
        created_by=user,
    )
    _validate(judge)
    try:
        with transaction.atomic():
            judge.save()
    except IntegrityError as error:  # added by someone else at the same moment
        raise JudgeError(f"The project already has a judge named {name!r}.") from error
    return judge


@transaction.atomic
def judge_update(*, judge: LLMJudge, **fields: Any) -> LLMJudge:
    """Change a judge's configuration (validated as `judge_add` does). What can change its
    answers makes a new version the next time it judges; the old versions keep their rows."""
    unknown = sorted(set(fields) - EDITABLE)
    if unknown:
        raise JudgeError(f"A judge has no setting {unknown[0]!r}.")
    for name, value in fields.items():
        setattr(judge, name, value)
    _validate(judge)
    judge.save(update_fields=sorted(fields) or None)
    return judge


def _validate(judge: LLMJudge) -> None:
    if judge.kind == JudgeKind.ENDPOINT:
        if not re.match(r"^https?://[^\s/]+", judge.base_url or ""):
            raise JudgeError("The base URL must be an http:// or https:// address.")
        if not (judge.model or "").strip():
            raise JudgeError("Name the model the endpoint serves.")
    if judge.api_key_env and not ENV_NAME.match(judge.api_key_env):
        raise JudgeError(
            f"{judge.api_key_env!r} is not an environment variable name "
            "(letters, digits and '_', not starting with a digit)."
        )
    checks = [
        (1 <= judge.concurrency <= 256, "Concurrency is 1 to 256 calls at once."),
        (judge.timeout > 0, "The timeout must be more than 0 seconds."),
        (0 <= judge.max_retries <= 10, "Retries are 0 to 10."),
        (0 <= judge.temperature <= 2, "The temperature is 0 to 2."),
        (judge.price_input is None or judge.price_input >= 0, "A price cannot be negative."),
        (judge.price_output is None or judge.price_output >= 0, "A price cannot be negative."),
    ]
    for holds, message in checks:
        if not holds:
            raise JudgeError(message)
    try:
        template_check(judge.prompt_template or "")
    except PromptError as error:
        raise JudgeError(str(error)) from error


# --------------------------------------------------------------------------- versions and the gate


def judge_config(judge: LLMJudge, protocol: ProtocolVersion) -> dict[str, Any]:
    """Everything that can change an endpoint judge's answers, without secrets: what its
    version's digest is the hash of. Concurrency, timeout and retries change when answers
    come, not what they are, so they are left out."""
    return {
        "kind": JudgeKind.ENDPOINT.value,
        "base_url": judge.base_url.rstrip("/"),
        "model": judge.model,
        "temperature": judge.temperature,
        "system": SYSTEM_MESSAGE,
        "template": effective_template(judge.prompt_template),
        "reasoning": judge.reasoning,
        "preamble": REASONING_PREAMBLE if judge.reasoning else "",
        "response_format": GRADE_SCHEMA,
        "document_chars": DOCUMENT_CHARS,
        "protocol": {"number": protocol.number, "id": protocol.pk},
    }


def judge_version_current(*, judge: LLMJudge) -> JudgeVersion:
    """The version the judge's configuration and the project's latest protocol make (created
    the first time it is seen). An external judge's version is the one its labels were
    imported as (the latest import)."""
    if judge.kind == JudgeKind.EXTERNAL:
        version = judge.versions.order_by("-pk").first()
        if version is None:
            raise JudgeError(
                f"No labels have been imported for the judge {judge.name!r} yet: import them with "
                f"`import_judgments {judge.project.slug} FILE --as {judge.name} --kind llm`."
            )
        return version
    protocol = ProtocolVersion.objects.filter(project_id=judge.project_id).order_by("-number")
    latest = protocol.first()
    if latest is None:
        raise JudgeError("Publish the project's protocol first: the judge's prompt comes from it.")
    config = judge_config(judge, latest)
    version, _ = JudgeVersion.objects.get_or_create(
        judge=judge, digest=judge_digest(config), defaults={"protocol": latest, "config": config}
    )
    return version


def latest_calibration(*, version: JudgeVersion) -> Calibration | None:
    return version.calibrations.order_by("-pk").first()


def gate_passed(*, version: JudgeVersion) -> bool:
    """Whether the version may label at scale: its latest calibration passed."""
    calibration = latest_calibration(version=version)
    return calibration is not None and calibration.passed


def gate_refusal(version: JudgeVersion) -> str:
    """Why the version may not label at scale, for people."""
    calibration = latest_calibration(version=version)
    if calibration is None:
        return (
            f"Judge version {version.short} has no calibration: calibrate it (a changed "
            "configuration or protocol is a new version) or run it as a pre-filter."
        )
    reasons = ", ".join(calibration.reasons) or "refused"
    return (
        f"Judge version {version.short} did not pass its calibration ({reasons}): "
        "it may only pre-filter."
    )


def judge_settings_of(*, project: Project) -> JudgeSettings:
    """The project's settings, or the defaults (unsaved) when it has none."""
    return JudgeSettings.objects.filter(project=project).first() or JudgeSettings(project=project)


# --------------------------------------------------------------------------- human-only slice


def round_half_up(value: float) -> int:
    return math.floor(value + 0.5)


def slice_key(project_id: int, qid: str) -> str:
    """The order queries join the human-only slice in: a hash of the project and the qid,
    so the draw is the same on every machine and a query's place never changes."""
    return hashlib.sha256(f"human-only/{project_id}/{qid}".encode()).hexdigest()


@transaction.atomic
def human_only_sync(*, project: Project) -> set[int]:
    """The query ids of the human-only slice, topped up first.

    Per stratum (a query's `stratum`; no stratum is a stratum of its own) the slice holds
    round(share x the stratum's queries) queries, rounding half up. Members stay forever (even
    past the target, should the share be lowered); the missing ones are drawn from the
    stratum's queries no judge has labelled yet, in `slice_key` order. The project row is
    locked first so that two syncs at once draw once.
    """
    Project.objects.select_for_update().filter(pk=project.pk).exists()
    share = judge_settings_of(project=project).human_only_share
    members = set(HumanOnlyQuery.objects.filter(project=project).values_list("query_id", flat=True))
    labelled = set(
        LLMJudgment.objects.filter(version__judge__project=project)
        .values_list("pair__query_id", flat=True)
        .distinct()
    )
    by_stratum: dict[str, list[tuple[int, str]]] = defaultdict(list)
    rows = Query.objects.filter(project=project).values_list("pk", "qid", "stratum")
    for pk, qid, stratum in rows:
        by_stratum[stratum or ""].append((pk, qid))
    added: list[int] = []
    for queries in by_stratum.values():
        wanted = round_half_up(share * len(queries))
        have = sum(1 for pk, _ in queries if pk in members)
        if wanted <= have:
            continue
        free = [(slice_key(project.pk, qid), pk) for pk, qid in queries]
        free = sorted(item for item in free if item[1] not in members and item[1] not in labelled)
        added.extend(pk for _, pk in free[: wanted - have])
    HumanOnlyQuery.objects.bulk_create(
        [HumanOnlyQuery(project=project, query_id=pk) for pk in added], ignore_conflicts=True
    )
    return members | set(added)


# --------------------------------------------------------------------------- labelling


def llm_label_scope(*, version: JudgeVersion, mode: str, limit: int | None = None) -> list[int]:
    """The pairs a label or prefilter run covers: every pair of the project outside the
    human-only slice (topped up first), in pair order; with `limit`, the first `limit` of
    them, whether labelled or not, so that running the same limit again does nothing new
    (raise the limit to go on)."""
    if mode not in ("label", "prefilter"):
        raise JudgeError("Only label and prefilter runs have a scope; calibration is given pairs.")
    project = version.judge.project
    slice_ids = human_only_sync(project=project)
    pairs = Pair.objects.filter(query__project=project).exclude(query_id__in=slice_ids)
    ids = list(pairs.order_by("pk").values_list("pk", flat=True))
    return ids[:limit] if limit is not None else ids


def llm_label_start(
    *,
    judge: LLMJudge,
    mode: str,
    limit: int | None = None,
    user: User | None = None,
    pair_ids: Sequence[int] | None = None,
) -> Job:
    """Start labelling in the background and publish the job (eager Celery runs it here and
    now; callers need not enqueue it again). Call it outside a transaction, as the worker
    must see the job's row. Mode "label" is refused (GateRefused) unless the version passed
    its calibration; "calibration" labels the given `pair_ids` only."""
    if mode not in MODES:
        raise JudgeError(f"Unknown mode {mode!r}: label, prefilter or calibration.")
    if judge.kind != JudgeKind.ENDPOINT:
        raise JudgeError(f"The judge {judge.name!r} has imported labels and no endpoint to call.")
    if limit is not None and limit < 1:
        raise JudgeError("The limit must be at least 1.")
    version = judge_version_current(judge=judge)
    if mode == "label" and not gate_passed(version=version):
        raise GateRefused(gate_refusal(version))
    if mode == "calibration" and not pair_ids:
        raise JudgeError("A calibration run needs the pairs to label.")
    params: dict[str, Any] = {"version_id": version.pk, "mode": mode, "limit": limit}
    if mode == "calibration":
        params["pair_ids"] = list(pair_ids or [])
    job = job_create(
        project=judge.project,
        kind=LLM_LABEL,
        handler="judging.tasks.llm_label_job",
        params=params,
        user=user,
    )
    job_enqueue(job)
    return job


def api_key_of(judge: LLMJudge) -> str:
    """The API key, read now from the environment variable the judge names (never stored);
    a judge naming none gets a placeholder, as local servers want no key. Read where the job
    runs (a worker may hold the secret the web process has not), so a missing one fails the
    job, with this message, before any call."""
    if not judge.api_key_env:
        return PLACEHOLDER_KEY
    key = os.environ.get(judge.api_key_env, "")
    if not key:
        raise JudgeError(
            f"The environment variable {judge.api_key_env} holding the judge's API key is not "
            "set where the jobs run."
        )
    return key


def client_for(version: JudgeVersion) -> JudgeClient:
    """A client for the version's endpoint and model (the version's, not the judge's current
    configuration); how it waits and retries is the judge's."""
    judge, config = version.judge, version.config
    return JudgeClient(
        base_url=config["base_url"],
        model=config["model"],
        api_key=api_key_of(judge),
        timeout=judge.timeout,
        max_retries=judge.max_retries,
        temperature=config["temperature"],
        backoff_base=settings.LLM_BACKOFF_MS / 1000,
        backoff_cap=float(settings.LLM_BACKOFF_CAP),
    )


def llm_label_pairs(
    *,
    version: JudgeVersion,
    pair_ids: Sequence[int],
    concurrency: int,
    repeat: int = 0,
    progress: Progress | None = None,
    job: Job | None = None,
    client: JudgeClient | None = None,
) -> LabelResult:
    """Label the pairs that have no row for (version, repeat), `concurrency` calls at once.

    Results are stored every 4 x concurrency answers (one statement, conflicts ignored), and
    before each chunk is called the pairs that gained a row meanwhile (another attempt of the
    job) are dropped. Between chunks a cancelled job stops (`JobCancelled`): the calls under
    way are awaited and stored first, so nothing paid for is lost. `client` is for tests and
    benchmarks (its backoff made short); by default one is made from the version.
    """
    if version.judge.kind != JudgeKind.ENDPOINT:
        raise JudgeError("A judge of imported labels cannot be called.")
    if version.protocol is None:
        raise JudgeError("The judge version has no protocol to render its prompt from.")
    wanted = list(dict.fromkeys(pair_ids))
    if not pairs_of_project(version.judge.project_id, wanted):
        raise JudgeError("Some of the pairs to label are not this project's.")
    todo = missing(version, wanted, repeat)
    tally = Tally(skipped=len(wanted) - len(todo))
    caller = client or (client_for(version) if todo else None)
    try:
        if caller is not None:
            batch = Batch(version, repeat, caller, tally, len(wanted), progress, job)
            batch.run(todo, concurrency)
    finally:
        if client is None and caller is not None:
            caller.close()
    if progress is not None:
        progress(1.0, f"{len(wanted):,} pairs labelled")
    return tally.result()


# --------------------------------------------------------------------------- the pre-filter


@dataclass(frozen=True)
class PrefilterResult:
    screened: int  # new Screening rows (graded below the threshold)
    audit: int  # of them, kept for humans as the audit
    removed_items: int  # work items taken out of units nobody had claimed
    removed_units: int  # units left empty, deleted


def audit_key(version: JudgeVersion, pair_id: int) -> str:
    """The order screened pairs are drawn into the audit: a hash of the version and the pair."""
    return hashlib.sha256(f"audit/{version.digest}/{pair_id}".encode()).hexdigest()


@transaction.atomic
def prefilter_apply(*, version: JudgeVersion) -> PrefilterResult:
    """Screen the pairs the version graded below the project's pre-filter threshold.

    Of all the version's screened pairs, round(audit share x their number) are audit pairs:
    they stay with the humans, and their grades measure what the pre-filter misses. Earlier
    audit pairs stay audit pairs; new ones are drawn in `audit_key` order. The other screened
    pairs are taken out of the work units nobody has claimed (a unit left empty is deleted);
    new pools skip them too. Parse failures and failed calls are never screened: humans get
    those pairs.
    """
    project = version.judge.project
    chosen = judge_settings_of(project=project)
    below = LLMJudgment.objects.filter(
        version=version, repeat=0, status=LLMStatus.OK, grade__lt=chosen.prefilter_threshold
    )
    known = Screening.objects.filter(version=version)
    seen = set(known.values_list("pair_id", flat=True))
    new = sorted(
        (pk for pk in below.values_list("pair_id", flat=True) if pk not in seen),
        key=lambda pk: audit_key(version, pk),
    )
    wanted = round_half_up(chosen.audit_share * (len(seen) + len(new)))
    more = max(0, wanted - known.filter(audit=True).count())
    Screening.objects.bulk_create(
        [Screening(version=version, pair_id=pk, audit=n < more) for n, pk in enumerate(new)],
        ignore_conflicts=True,
    )
    items, units = _unclaimed_work_remove(project, version)
    return PrefilterResult(len(new), min(more, len(new)), items, units)


def _unclaimed_work_remove(project: Project, version: JudgeVersion) -> tuple[int, int]:
    out = Screening.objects.filter(version=version, audit=False).values("pair_id")
    items = WorkItem.objects.filter(
        pair_id__in=out,
        unit__pool__project=project,
        unit__claims_taken=0,
        unit__gold_for__isnull=True,
    )
    touched = set(items.values_list("unit_id", flat=True))
    removed = items.delete()[0] if touched else 0
    # A unit with released or expired claims keeps its row (and their history) even when
    # emptied; one nobody ever held is deleted.
    empty = WorkUnit.objects.filter(pk__in=touched, claims_taken=0).annotate(
        n=Count("items", distinct=True), held=Count("claims", distinct=True)
    )
    gone = list(empty.filter(n=0, held=0).values_list("pk", flat=True)) if touched else []
    if gone:
        WorkUnit.objects.filter(pk__in=gone).delete()
    return removed, len(gone)


@dataclass(frozen=True)
class AuditReport:
    audited: int  # audit pairs
    reviewed: int  # of them, graded by at least one person
    misses: int  # reviewed audit pairs a person graded at or above the threshold
    miss_rate: float | None  # misses / reviewed
    screened_out: int  # screened pairs taken out of human work
    estimated_missed: float | None  # miss_rate x screened_out
    threshold: int

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def prefilter_audit(*, version: JudgeVersion) -> AuditReport:
    """What the pre-filter misses, from the humans' current grades on the audit pairs: an
    audit pair is a miss when any person's current grade reaches the threshold (the
    cautious reading: one person finding it relevant is enough)."""
    project = version.judge.project
    threshold = judge_settings_of(project=project).prefilter_threshold
    audit = set(
        Screening.objects.filter(version=version, audit=True).values_list("pair_id", flat=True)
    )
    screened_out = Screening.objects.filter(version=version, audit=False).count()
    best: dict[int, int] = {}
    for answer in _grades_on(project, audit):
        best[answer[0]] = max(best.get(answer[0], 0), answer[1])
    misses = sum(1 for grade in best.values() if grade >= threshold)
    rate = misses / len(best) if best else None
    return AuditReport(
        audited=len(audit),
        reviewed=len(best),
        misses=misses,
        miss_rate=rate,
        screened_out=screened_out,
        estimated_missed=None if rate is None else rate * screened_out,
        threshold=threshold,
    )


def _grades_on(project: Project, pair_ids: set[int]) -> Iterator[tuple[int, int]]:
    if not pair_ids:
        return
    for answer in current_answers(project_id=project.pk):
        if answer.pair_id in pair_ids and answer.grade is not None:
            yield answer.pair_id, answer.grade


# --------------------------------------------------------------------------- cost


def cost_of(*, version: JudgeVersion) -> dict[str, Any]:
    """Calls, tokens and (when the judge has prices per million tokens) cost, in all and per
    1,000 judgments, from the stored rows."""
    judge = version.judge
    totals = LLMJudgment.objects.filter(version=version).aggregate(
        judgments=Count("pk"),
        calls=Sum("attempts"),
        tokens_in=Sum("prompt_tokens"),
        tokens_out=Sum("completion_tokens"),
        graded=Count("pk", filter=Q(status=LLMStatus.OK)),
    )
    n = totals["judgments"] or 0
    tokens_in, tokens_out = totals["tokens_in"] or 0, totals["tokens_out"] or 0
    priced = judge.price_input is not None or judge.price_output is not None
    cost = (
        tokens_in / 1e6 * (judge.price_input or 0) + tokens_out / 1e6 * (judge.price_output or 0)
        if priced
        else None
    )

    def per_1000(value: float | None) -> float | None:
        return None if value is None or not n else value / n * 1000

    return {
        "judgments": n,
        "graded": totals["graded"] or 0,
        "calls": totals["calls"] or 0,
        "tokens_in": tokens_in,
        "tokens_out": tokens_out,
        "cost": cost,
        "per_1000": {
            "tokens_in": per_1000(tokens_in),
            "tokens_out": per_1000(tokens_out),
            "cost": per_1000(cost),
        },
        "price_input": judge.price_input,
        "price_output": judge.price_output,
    }
