"""The agreement dashboard of a project: every number the lead's page and the API show.

One read of everyone's current answers (`judging.answers.current_answers`), then the pure core
(`double.py`) forms the double-judged pairs and their comparisons, and every kappa and interval
comes from `report.paired_report`, the engine of `agreement_report`: the same pairs and seed
give exactly what ``manage.py agreement --labels 0,1,2,3`` prints for them.

Bootstrap budget: the headline (the whole project, or the filtered view) gets the command's
10,000 resamples and every interval; each breakdown row (stratum, protocol version, week) gets
1,000 resamples and the kappa interval only, enough to see drift at a tenth of the cost. Opening
a row shows it as the headline, with 10,000. The matrix of people and the per-person table show
kappa and n on the page (the API adds 1,000-resample intervals to the matrix).

The computed dashboard is kept in Django's cache, keyed by the project, its newest judgment and
adjudication ids (and its number of judgments), the thresholds and the filters: a new answer or
ruling changes the key, so a cached dashboard is never stale, and nothing is held in the process
itself.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import numpy.typing as npt
from django.core.cache import cache
from django.db.models import Count, Max

from annotation.models import Project
from judging.answers import current_answers
from judging.gold import gold_accuracy as gold_accuracy_of
from judging.gold import gold_checks
from judging.models import Grade, Judgment

from .double import (
    Answers,
    Comparisons,
    Filters,
    Judged,
    Person,
    Resolution,
    collect,
    headline,
    pair_names,
    people,
    person_pairs,
    ratings,
    resolution,
)
from .kappa import DEFAULT_RESAMPLES, Kappa, Qrels, krippendorff_alpha
from .models import Adjudication, AgreementSettings
from .report import (
    CI_STATISTICS,
    TRAP_SENTENCE,
    AgreementReport,
    confusion_statistics,
    paired_report,
)

# The protocol states no relevance threshold (its grades are 0-3 with definitions only), so the
# binary kappa and the noise floor use the evaluation default: grade 1 and above is relevant.
RELEVANCE_THRESHOLD = 1
LABELS: tuple[int, ...] = tuple(Grade.values)
RESAMPLES = DEFAULT_RESAMPLES
BREAKDOWN_RESAMPLES = 1_000
SEED = 0
CACHE_SECONDS = 24 * 3600
FILTERS = ("a", "b", "stratum", "protocol")


class DashboardError(ValueError):
    """Filters that name nothing in the project; the message says what to choose instead."""


@dataclass(frozen=True)
class Row:
    """One breakdown row: kappa, its interval and size, and the filters that open it."""

    label: str
    n: int
    queries: int
    kappa: float
    ci: tuple[float, float] | None
    params: Mapping[str, str] = field(default_factory=dict)

    @property
    def query(self) -> str:
        """The row's filters as a query string ("" when nothing opens the row)."""
        return urlencode(self.params)


@dataclass(frozen=True)
class PersonRow:
    """One grader against everyone else, with the flags the lead's thresholds raise."""

    person: Person
    kappa: float
    gold_accuracy: float | None
    flags: tuple[str, ...]


@dataclass(frozen=True)
class Choices:
    """What the filters can be set to: graders, strata and protocol versions of the project."""

    people: tuple[str, ...]
    strata: tuple[str, ...]
    protocols: tuple[int, ...]


@dataclass(frozen=True)
class Dashboard:
    filters: Filters
    choices: Choices
    threshold: int
    min_kappa: float
    min_gold_accuracy: float
    report: AgreementReport | None
    resolution: Resolution | None
    unsure_or_skipped: int
    raters: tuple[str, ...]
    alpha_all: float | None  # ordinal alpha over every grader, when more than two graded
    pairs: tuple[Row, ...]  # the matrix of people: label "a|b", a's grade as A
    strata: tuple[Row, ...]
    protocols: tuple[Row, ...]
    weeks: tuple[Row, ...]
    people: tuple[PersonRow, ...]
    resamples: int = RESAMPLES
    breakdown_resamples: int = BREAKDOWN_RESAMPLES

    @property
    def overall(self) -> Row | None:
        if self.report is None:
            return None
        report = self.report
        kappa = report.unweighted.kappa
        return Row("in view", report.n, report.queries, kappa, report.ci.get("kappa"))


def parse_filters(params: Mapping[str, str]) -> Filters:
    """The filters from query parameters ``a``, ``b``, ``stratum`` and ``protocol``; an empty
    value means all. Raises ValueError, saying what to send instead."""
    values = {name: (params.get(name) or "").strip() or None for name in FILTERS}
    version = values.pop("protocol")
    try:
        protocol = None if version is None else int(version)
    except ValueError:
        raise ValueError(
            f"protocol must be a protocol version number such as 2, not {version!r}"
        ) from None
    return Filters(values["a"], values["b"], values["stratum"], protocol)


def settings_of(project: Project) -> AgreementSettings:
    """The project's thresholds (the defaults, unsaved, when the lead never set them)."""
    found = AgreementSettings.objects.filter(project=project).first()
    return found or AgreementSettings(project=project)


def agreement_dashboard(
    *,
    project: Project,
    filters: Filters,
    pair_resamples: int = 0,
    gold_accuracy: Mapping[str, float] | None = None,
) -> Dashboard:
    """Everything the agreement page shows, from the project's current answers (cached).

    ``pair_resamples``: bootstrap resamples for each cell of the matrix of people (0: kappa and
    n only). ``gold_accuracy``: each person's accuracy on gold checks (0-1), shown and flagged
    beside agreement when given. Raises DashboardError for a person who graded nothing here.
    """
    settings = settings_of(project)
    version = judgments_version(project)
    if gold_accuracy is None:
        gold_accuracy = gold_rates(project)
    gold = sorted(gold_accuracy.items())
    thresholds = (settings.min_kappa, settings.min_gold_accuracy)
    key = cache_key("dashboard", version, filters, thresholds, pair_resamples, gold)
    found = cache.get(key)
    if isinstance(found, Dashboard):
        return found
    dashboard = _build(project, filters, settings, pair_resamples, gold_accuracy, version)
    cache.set(key, dashboard, CACHE_SECONDS)
    return dashboard


def gold_rates(project: Project) -> dict[str, float]:
    """Each annotator's accuracy on the gold checks they answered (people without any are
    absent): the figure the gold page draws per week, here overall."""
    people = gold_accuracy_of(gold_checks(project_id=project.pk))
    return {p.username: p.overall.rate for p in people if p.overall.rate is not None}


def judgments_version(project: Project) -> tuple[int, int | None, int, int | None]:
    """What changes whenever the project's current answers or rulings may have: the newest
    judgment id (judgments are only added), their number (deleting a document takes its
    judgments along) and the newest adjudication id."""
    judged = Judgment.objects.filter(pair__query__project=project)
    newest = judged.aggregate(newest=Max("pk"), rows=Count("pk"))
    ruled = Adjudication.objects.filter(pair__query__project=project).aggregate(Max("pk"))
    return (project.pk, newest["newest"], newest["rows"], ruled["pk__max"])


def cache_key(kind: str, version: tuple[Any, ...], filters: Filters, *more: Any) -> str:
    """A cache key of what was computed from one version of the project's answers."""
    parts = (version, sorted(filters.as_params().items()), more)
    # Hashed: the filters hold user text, which a cache key must not (memcached refuses
    # spaces and control characters, and keys longer than 250 bytes).
    return f"agreement-{kind}:" + hashlib.sha256(repr(parts).encode()).hexdigest()


def project_answers(project: Project, filters: Filters) -> Answers:
    """The project's current answers as columns, after checking the people filter."""
    answers = Answers.of(current_answers(project_id=project.pk))
    graders = answers.graders
    for name in filter(None, (filters.a, filters.b)):
        if name not in graders:
            raise DashboardError(
                f"nobody named {name!r} has graded a pair of this project; "
                f"choose one of: {', '.join(graders) or '(nobody has graded yet)'}"
            )
    return answers


def _build(
    project: Project,
    filters: Filters,
    settings: AgreementSettings,
    pair_resamples: int,
    gold_accuracy: Mapping[str, float] | None,
    version: tuple[Any, ...] = (),
) -> Dashboard:
    answers = project_answers(project, filters)
    judged = collect(answers, filters)
    shown = headline(judged, filters)
    if version:  # the noise floor, loaded right after the page, needs these labels
        cache.set(cache_key("labels", version, filters), shown.qrels(), CACHE_SECONDS)
    report = _report(shown, RESAMPLES, all_intervals=True) if shown.n else None
    everyone = collect(answers, filters.without_people()) if filters.people else judged
    return Dashboard(
        filters=filters,
        choices=Choices(answers.graders, answers.strata, answers.versions),
        threshold=RELEVANCE_THRESHOLD,
        min_kappa=settings.min_kappa,
        min_gold_accuracy=settings.min_gold_accuracy,
        report=report,
        resolution=resolution(report.n, report.ci.get("kappa")) if report else None,
        unsure_or_skipped=judged.unsure_or_skipped,
        raters=judged.raters,
        alpha_all=None if filters.people else _alpha_all(judged),
        pairs=_pair_rows(everyone, filters.without_people(), pair_resamples),
        strata=_rows(shown.by_stratum(), filters, "stratum"),
        protocols=_protocol_rows(answers, filters),
        weeks=_rows(shown.by_week(), filters, None),
        people=_people(everyone, settings, gold_accuracy or {}),
    )


def _report(shown: Comparisons, resamples: int, all_intervals: bool = False) -> AgreementReport:
    return paired_report(
        shown.paired(),
        RELEVANCE_THRESHOLD,
        bootstrap=resamples,
        unit="query",
        seed=SEED,
        labels=LABELS,
        intervals=CI_STATISTICS if all_intervals else ("kappa",),
    )


def _row(label: str, shown: Comparisons, resamples: int, params: Mapping[str, str]) -> Row:
    report = _report(shown, resamples)
    kappa = report.unweighted.kappa
    return Row(label, report.n, report.queries, kappa, report.ci.get("kappa"), params)


def _rows(
    groups: Iterable[tuple[str, Comparisons]], filters: Filters, param: str | None
) -> tuple[Row, ...]:
    """One row per group; ``param`` names the filter that opens a group (None: no filter
    opens it, as for weeks)."""
    base = filters.as_params()
    return tuple(
        # A blank stratum cannot be asked for (an empty value means all): its row opens nothing.
        _row(label, part, BREAKDOWN_RESAMPLES, {**base, param: label} if param and label else {})
        for label, part in groups
    )


def _protocol_rows(answers: Answers, filters: Filters) -> tuple[Row, ...]:
    """One row per protocol version: the pairs two people graded under it."""
    versions = answers.versions if filters.protocol is None else (filters.protocol,)
    found = []
    for version in versions:
        narrowed = filters.under(version)
        shown = headline(collect(answers, narrowed), narrowed)
        if shown.n:
            found.append(_row(f"v{version}", shown, BREAKDOWN_RESAMPLES, narrowed.as_params()))
    return tuple(found)


def _pair_rows(judged: Judged, everyone: Filters, resamples: int) -> tuple[Row, ...]:
    """The matrix of people. Without intervals, every cell's kappa comes from one stacked
    computation (the same statistics as a report per cell, at a fraction of the cost)."""
    base = everyone.as_params()
    both, keys = person_pairs(judged)
    answers = judged.answers

    def params(key: int) -> dict[str, str]:
        a, b = pair_names(answers, key)
        return {**base, "a": a, "b": b}

    def label(key: int) -> str:
        return "|".join(pair_names(answers, key))

    if resamples:
        return tuple(
            _row(label(key), part, resamples, params(key)) for key, part in both.split(keys)
        )
    distinct, tables, counts, queries = both.tables(keys, LABELS)
    if not len(distinct):
        return ()
    kappas = _kappas(tables)
    return tuple(
        Row(label(key), n, q, kappa, None, params(key))
        for key, n, q, kappa in zip(
            distinct.tolist(), counts.tolist(), queries.tolist(), kappas, strict=True
        )
    )


def _kappas(tables: npt.ArrayLike) -> list[float]:
    stats = confusion_statistics(tables, LABELS, RELEVANCE_THRESHOLD, wanted=("kappa",))
    return [float(v) for v in stats["kappa"]]


def _people(
    judged: Judged, settings: AgreementSettings, gold_accuracy: Mapping[str, float]
) -> tuple[PersonRow, ...]:
    persons = people(judged, LABELS)
    if not persons:
        return ()
    found = []
    for person, kappa in zip(persons, _kappas([p.confusion for p in persons]), strict=True):
        gold = gold_accuracy.get(person.username)
        flags = []
        if not math.isnan(kappa) and kappa < settings.min_kappa:
            flags.append(f"kappa below {settings.min_kappa:g}")
        if gold is not None and gold < settings.min_gold_accuracy:
            flags.append(f"gold accuracy below {settings.min_gold_accuracy:.0%}")
        found.append(PersonRow(person, kappa, gold, tuple(flags)))
    return tuple(found)


def _alpha_all(judged: Judged) -> float | None:
    """Krippendorff's ordinal alpha over every grader of every double-judged pair in view,
    when more than two people graded (with two, the headline's alpha is the same number; with
    the people filter, the view is those two)."""
    if len(judged.raters) <= 2:
        return None
    alpha = krippendorff_alpha(ratings(judged), "ordinal")
    return None if math.isnan(alpha) else alpha


def trap_words(report: AgreementReport) -> dict[str, str]:
    """The chapter's kappa trap in words, next to the number it concerns: ``{"kappa": ...}``
    or ``{"kappa_binary": ...}`` when the report notes it (high raw agreement, low kappa)."""
    found = {}
    for note in report.notes:
        if note == TRAP_SENTENCE:
            found["kappa"] = _trap_sentence(report.unweighted, report.confusion, report.labels)
        elif note.endswith(TRAP_SENTENCE):
            relevant = ("not relevant", f"relevant (grade {report.threshold} or more)")
            found["kappa_binary"] = _trap_sentence(report.binary, report.binary_confusion, relevant)
    return found


def _trap_sentence(
    kappa: Kappa, confusion: tuple[tuple[int, ...], ...], labels: Sequence[object]
) -> str:
    diagonal = [row[i] for i, row in enumerate(confusion)]
    top = max(range(len(diagonal)), key=diagonal.__getitem__)
    total = sum(map(sum, confusion))
    share = (sum(confusion[top]) + sum(row[top] for row in confusion)) / (2 * total)
    label = labels[top]
    name = f"grade {label}" if isinstance(label, int) else f'"{label}"'
    return (
        f"Raw agreement is {kappa.observed:.0%}, yet kappa is only {kappa.kappa:.2f}: most of "
        f"the agreement is on {name}, which {share:.0%} of all grades are, so two judges "
        f"guessing at these rates would already agree {kappa.expected:.0%} of the time. "
        "Kappa counts only the agreement beyond that."
    )


def double_judged_qrels(
    *, project: Project, filters: Filters, version: tuple[Any, ...] | None = None
) -> tuple[Qrels, Qrels]:
    """The headline's two sets of labels (first judge's and second's, or A's and B's) of the
    double-judged pairs in view: what the noise floor scores runs under. Taken from the cache
    when the dashboard of the same answers was just built. Raises DashboardError as
    `agreement_dashboard` does."""
    version = version or judgments_version(project)
    found = cache.get(cache_key("labels", version, filters))
    if isinstance(found, tuple):
        return found
    answers = project_answers(project, filters)
    labels = headline(collect(answers, filters), filters).qrels()
    cache.set(cache_key("labels", version, filters), labels, CACHE_SECONDS)
    return labels
