"""The agreement report: every statistic of `kappa.py` on two qrels, with bootstrap intervals.

This is what the `agreement` command and the web pages print; the statistics themselves live in
`kappa.py`. Pure core: no Django.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from .kappa import (
    DEFAULT_RESAMPLES,
    Bootstrap,
    FloatArray,
    GradeRecall,
    IntArray,
    Kappa,
    Leniency,
    Level,
    Paired,
    Qrels,
    Unit,
    Weighting,
    align_qrels,
    alpha_from_coincidences,
    binarizer,
    bootstrap_confusions,
    confusion_matrix,
    disagreement_weights,
    grade_recall,
    kappa_parts,
    label_set,
    landis_koch,
    leniency,
    percentile_interval,
)

# "High raw agreement, low kappa" (the chapter's trap): at least 80% raw agreement while
# kappa is at most moderate.
_HIGH_RAW = 0.80
_LOW_KAPPA = 0.60
# Fewer resampling units than this make a bootstrap interval too coarse to trust.
_FEW_UNITS = 10
TRAP_SENTENCE = "high raw agreement with low kappa: most agreement is on the majority grade"


_KAPPAS: dict[str, Weighting] = {
    "kappa": None,
    "kappa_linear": "linear",
    "kappa_quadratic": "quadratic",
}
_ALPHAS: tuple[Level, ...] = ("nominal", "ordinal", "interval")
# The statistics that get a bootstrap interval.
CI_STATISTICS = ("observed", *_KAPPAS, "kappa_binary", *(f"alpha_{level}" for level in _ALPHAS))


def _statistics(
    confusions: FloatArray,
    values: IntArray,
    threshold: int,
    wanted: Collection[str] = CI_STATISTICS,
) -> dict[str, FloatArray]:
    """The statistics of confusion matrices stacked on axis 0 (``name``, and for a kappa
    ``name.observed`` and ``name.expected``): one function serves the point estimate and the
    resamples, so the two cannot drift apart. ``wanted`` limits the work to some statistics
    (each is computed alike whatever else is wanted)."""
    binarize = binarizer(values, threshold)
    stacks = {
        name: (confusions, disagreement_weights(len(values), w))
        for name, w in _KAPPAS.items()
        if name in wanted or (name == "kappa" and "observed" in wanted)
    }
    if "kappa_binary" in wanted:
        stacks["kappa_binary"] = (binarize.T @ confusions @ binarize, disagreement_weights(2))
    stats: dict[str, FloatArray] = {}
    for name, (matrices, weights) in stacks.items():
        stats[name], stats[f"{name}.observed"], stats[f"{name}.expected"] = kappa_parts(
            matrices, weights
        )
    if "kappa.observed" in stats:
        stats["observed"] = stats["kappa.observed"]
    # Two raters who both labelled every unit: each pair adds (a, b) and (b, a), m_u - 1 = 1.
    coincidences = confusions + np.swapaxes(confusions, -2, -1)
    for level in _ALPHAS:
        if f"alpha_{level}" in wanted:
            stats[f"alpha_{level}"] = alpha_from_coincidences(
                coincidences, values.astype(np.float64), level
            )
    return stats


@dataclass(frozen=True)
class AgreementReport:
    """Everything the ``agreement`` command prints; :meth:`as_dict` is its JSON shape."""

    n: int
    queries: int
    only_a: int
    only_b: int
    labels: tuple[int, ...]
    confusion: tuple[tuple[int, ...], ...]
    threshold: int
    unweighted: Kappa
    linear: Kappa
    quadratic: Kappa
    binary: Kappa
    binary_confusion: tuple[tuple[int, ...], ...]
    alpha_nominal: float
    alpha_ordinal: float
    alpha_interval: float
    leniency: Leniency
    recall: GradeRecall
    bootstrap: Bootstrap
    ci: Mapping[str, tuple[float, float] | None]
    notes: tuple[str, ...]

    @property
    def band(self) -> str:
        return landis_koch(self.unweighted.kappa)

    def prevalence(self) -> dict[str, list[float]]:
        """Share of each label (in ``labels`` order) among A's grades, B's, and both together:
        what chance agreement is made of, and why a rare grade makes kappa fragile."""
        matrix = np.array(self.confusion, dtype=np.float64)
        of_a, of_b = matrix.sum(axis=1) / self.n, matrix.sum(axis=0) / self.n
        return {
            "a": of_a.tolist(),
            "b": of_b.tolist(),
            "both": ((of_a + of_b) / 2).tolist(),
        }

    def as_dict(self) -> dict[str, Any]:
        """The stable JSON shape of ``manage.py agreement --format json``; NaN becomes None."""
        kappas = {"kappa": self.unweighted, "kappa_linear": self.linear}
        kappas |= {"kappa_quadratic": self.quadratic, "kappa_binary": self.binary}
        return {
            "n": self.n,
            "observed": _num(self.unweighted.observed),
            "expected": _num(self.unweighted.expected),
            **{name: _num(kappa.kappa) for name, kappa in kappas.items()},
            "threshold": self.threshold,
            **{f"alpha_{level}": _num(getattr(self, f"alpha_{level}")) for level in _ALPHAS},
            "confusion": [list(row) for row in self.confusion],
            "labels": list(self.labels),
            "ci": {name: None if ci is None else list(ci) for name, ci in self.ci.items()},
            "band": self.band,
            "band_binary": landis_koch(self.binary.kappa),
            "agreement": {
                name: {"observed": _num(kappa.observed), "expected": _num(kappa.expected)}
                for name, kappa in kappas.items()
            },
            "binary_confusion": [list(row) for row in self.binary_confusion],
            "leniency": asdict(self.leniency),
            "per_grade_recall": {
                "b_matches_a": [_num(v) for v in self.recall.b_matches_a],
                "a_matches_b": [_num(v) for v in self.recall.a_matches_b],
            },
            "queries": self.queries,
            "only_a": self.only_a,
            "only_b": self.only_b,
            "bootstrap": {**asdict(self.bootstrap), "method": "percentile"},
            "notes": list(self.notes),
        }


def _num(value: float) -> float | None:
    return None if np.isnan(value) else float(value)


def _matrix(confusion: FloatArray) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(row) for row in np.rint(confusion).astype(np.int64).tolist())


def _trap(kappa: Kappa, confusion: FloatArray) -> bool:
    """The chapter's trap: high raw agreement, kappa at most moderate, and more than half of
    the agreeing pairs in one diagonal cell (the grade nearly everything gets)."""
    diagonal = np.diag(confusion)
    high_raw_low_kappa = kappa.observed >= _HIGH_RAW and kappa.kappa <= _LOW_KAPPA
    return bool(high_raw_low_kappa and diagonal.max() > diagonal.sum() / 2)


def _notes(report: AgreementReport) -> tuple[str, ...]:
    notes: list[str] = []
    if np.isnan(report.unweighted.kappa):
        notes.append(
            "kappa is undefined (null): both judges gave every pair the same grade, "
            "so chance agreement p_e = 1"
        )
    if np.isnan(report.binary.kappa):
        notes.append(
            f"binary kappa is undefined (null): at threshold {report.threshold} both judges "
            "put every pair on the same side"
        )
    if _trap(report.unweighted, np.array(report.confusion)):
        notes.append(TRAP_SENTENCE)
    elif _trap(report.binary, np.array(report.binary_confusion)):
        notes.append(f"binary kappa (grade >= {report.threshold}): {TRAP_SENTENCE}")
    settings = report.bootstrap
    if settings.resamples and settings.units < _FEW_UNITS:
        # A handful of queries has only a handful of distinct resamples.
        notes.append(
            f"only {settings.units} {settings.unit}(s) to resample: the intervals are coarse"
        )
    return tuple(notes)


def _intervals(
    paired: Paired,
    values: IntArray,
    threshold: int,
    settings: Bootstrap,
    wanted: Collection[str],
) -> dict[str, tuple[float, float] | None]:
    intervals: dict[str, tuple[float, float] | None] = dict.fromkeys(CI_STATISTICS)
    if settings.resamples == 0 or not wanted:
        return intervals
    confusions = bootstrap_confusions(
        paired,
        values.tolist(),
        resamples=settings.resamples,
        unit=settings.unit,
        seed=settings.seed,
    )
    stats = _statistics(confusions, values, threshold, wanted)
    for name in CI_STATISTICS:
        if name in wanted:
            intervals[name] = percentile_interval(stats[name], settings.confidence)
    return intervals


def _check_settings(
    bootstrap: int, unit: str, confidence: float, intervals: Collection[str]
) -> None:
    unknown = set(intervals) - set(CI_STATISTICS)
    if unknown:
        raise ValueError(
            f"no interval for {sorted(unknown)}: choose from {', '.join(CI_STATISTICS)}"
        )
    if bootstrap < 0:
        raise ValueError(
            f"bootstrap must be 0 (no intervals) or a number of resamples, not {bootstrap}"
        )
    if unit not in ("query", "pair"):
        raise ValueError(f"unit must be 'query' or 'pair', not {unit!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, not {confidence}")


def agreement_report(
    a_qrels: Qrels,
    b_qrels: Qrels,
    threshold: int = 1,
    bootstrap: int = DEFAULT_RESAMPLES,
    unit: Unit = "query",
    seed: int | None = 0,
    *,
    labels: Sequence[int] | None = None,
    confidence: float = 0.95,
) -> AgreementReport:
    """Agreement of judge A and judge B on the (qid, docid) pairs both judged.

    ``threshold``: grades at or above it are relevant for the binary kappa. ``bootstrap``:
    number of percentile-bootstrap resamples (0 for none) of ``unit`` (``"query"`` or
    ``"pair"``), seeded by ``seed`` so that the same files give the same intervals.
    ``labels``: the label set (default: the sorted union of the labels used).
    Raises ``ValueError`` when no pair is judged in both.
    """
    _check_settings(bootstrap, unit, confidence, CI_STATISTICS)
    return paired_report(
        align_qrels(a_qrels, b_qrels),
        threshold,
        bootstrap,
        unit,
        seed,
        labels=labels,
        confidence=confidence,
    )


def paired_report(
    paired: Paired,
    threshold: int = 1,
    bootstrap: int = DEFAULT_RESAMPLES,
    unit: Unit = "query",
    seed: int | None = 0,
    *,
    labels: Sequence[int] | None = None,
    confidence: float = 0.95,
    intervals: Collection[str] = CI_STATISTICS,
) -> AgreementReport:
    """:func:`agreement_report` of labels already paired (what it computes after aligning the
    two qrels): the same numbers for the same pairs, in any order, whatever identifies the
    queries as long as they sort as the qids do. ``intervals`` names the statistics that get a
    bootstrap interval (the others' are None); fewer cost less and leave the rest unchanged.
    """
    _check_settings(bootstrap, unit, confidence, intervals)
    if paired.n == 0:
        raise ValueError(
            f"no (qid, docid) pair is judged in both: {paired.only_a} pairs only in A, "
            f"{paired.only_b} only in B"
        )
    values = label_set(paired.a, paired.b, labels)
    confusion = confusion_matrix(paired.a, paired.b, values.tolist()).astype(np.float64)
    point = {k: float(v[0]) for k, v in _statistics(confusion[None], values, threshold).items()}
    queries = len(np.unique(paired.qids))
    units = queries if unit == "query" else paired.n
    settings = Bootstrap(bootstrap, unit, units, seed, confidence)
    binarize = binarizer(values, threshold)
    report = AgreementReport(
        n=paired.n,
        queries=queries,
        only_a=paired.only_a,
        only_b=paired.only_b,
        labels=tuple(values.tolist()),
        confusion=_matrix(confusion),
        threshold=threshold,
        unweighted=_kappa_of(point, "kappa", "none"),
        linear=_kappa_of(point, "kappa_linear", "linear"),
        quadratic=_kappa_of(point, "kappa_quadratic", "quadratic"),
        binary=_kappa_of(point, "kappa_binary", "binary"),
        binary_confusion=_matrix(binarize.T @ confusion @ binarize),
        alpha_nominal=point["alpha_nominal"],
        alpha_ordinal=point["alpha_ordinal"],
        alpha_interval=point["alpha_interval"],
        leniency=leniency(confusion, values.tolist()),
        recall=grade_recall(confusion, values.tolist()),
        bootstrap=settings,
        ci=_intervals(paired, values, threshold, settings, intervals),
        notes=(),
    )
    # The notes read the finished numbers, so they are added last.
    return replace(report, notes=_notes(report))


def _kappa_of(point: Mapping[str, float], name: str, weights: str) -> Kappa:
    return Kappa(point[name], point[f"{name}.observed"], point[f"{name}.expected"], weights)


def confusion_statistics(
    confusions: npt.ArrayLike,
    labels: Sequence[int],
    threshold: int = 1,
    wanted: Collection[str] = ("kappa",),
) -> dict[str, FloatArray]:
    """The point estimates of many confusion tables at once (stacked on axis 0, rows = A,
    over ``labels``): for each table exactly what :func:`agreement_report` reports for the
    pairs it counts, computed by the same function, for a fraction of the cost of one report
    per table. Only the ``wanted`` statistics (names as in ``CI_STATISTICS``)."""
    if list(labels) != sorted(labels):
        raise ValueError(f"labels must be in ascending order, got {list(labels)}")
    stack = np.asarray(confusions, dtype=np.float64)
    if stack.ndim != 3 or stack.shape[1:] != (len(labels), len(labels)):
        raise ValueError(f"expected tables of {len(labels)} x {len(labels)}, got {stack.shape}")
    if (stack.sum(axis=(1, 2)) <= 0).any():
        raise ValueError("no pairs: a confusion table is empty")
    values = np.asarray(labels, dtype=np.int64)
    stats = _statistics(stack, values, threshold, wanted)
    return {name: stats[name] for name in wanted}
