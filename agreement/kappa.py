"""Agreement between relevance judges: Cohen's kappa and friends, Krippendorff's alpha.

Chapter 7, step 4 of the method: raw agreement overstates how much two judges share a
definition of relevance, because two judges who both say "not relevant" most of the time agree
often by chance. Cohen's kappa corrects for that::

    kappa = (p_o - p_e) / (1 - p_e)

with p_o the observed agreement and p_e the agreement expected if both judges labelled
independently at their own base rates. Everything here is computed from the confusion matrix
``C`` (rows = judge A's labels, columns = judge B's, over a sorted label set), which is also
what makes the bootstrap cheap: a resample is just another confusion matrix.

Decisions, stated once:

* Label set: ``labels=None`` means the sorted union of both judges' labels. Weighted kappa
  follows scikit-learn and weighs by *positions* in the label set, so a grade nobody used
  changes the weights; pass ``labels=(0, 1, 2, 3)`` to pin the relevance scale.
* Undefined values are NaN, never an exception: kappa when ``p_e == 1`` (both judges gave
  every pair the same grade; scikit-learn also returns nan), alpha when only one value occurs.
  `report.AgreementReport.as_dict` turns NaN into ``None`` (JSON ``null``).
* Empty input is a ``ValueError``: there is nothing to agree on.
* Bootstrap: percentile intervals, seeded, resampling whole queries (the unit of
  independence: pairs of one query share a topic and a judge's mood) or single pairs.

This module is a pure core: no Django; arrays or plain records in, frozen dataclasses out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import numpy.typing as npt

__all__ = [
    "Bootstrap",
    "GradeRecall",
    "Kappa",
    "Leniency",
    "Paired",
    "align_qrels",
    "alpha_from_coincidences",
    "binarizer",
    "binary_kappa",
    "bootstrap_confusions",
    "cohen_kappa",
    "confusion_matrix",
    "disagreement_weights",
    "grade_recall",
    "kappa_from_confusion",
    "kappa_parts",
    "krippendorff_alpha",
    "label_set",
    "landis_koch",
    "leniency",
    "percentile_interval",
    "rating_matrix",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
Weighting = Literal["linear", "quadratic"] | None
Level = Literal["nominal", "ordinal", "interval"]
Unit = Literal["query", "pair"]
Qrels = Mapping[str, Mapping[str, int]]

DEFAULT_RESAMPLES = 10_000
# Bounds the (resamples x queries) table of draws held at once: about 8 MB of int64. Smaller
# tables also run faster (they stay in the cache), and the draws are the same in any chunks.
_MAX_DRAWS = 1 << 20

_BANDS = (
    (0.20, "slight"),
    (0.40, "fair"),
    (0.60, "moderate"),
    (0.80, "substantial"),
)


# --------------------------------------------------------------------------- records


@dataclass(frozen=True, eq=False)
class Paired:
    """The labels of the (qid, docid) pairs both judges labelled, in A's order.

    ``qids`` holds each pair's query: the qid itself, or any code that sorts as the qids do
    (the query bootstrap numbers the queries in sorted order, so equal order means equal
    resamples).

    ``only_a`` / ``only_b`` count the pairs only one judge labelled; they take no part in
    agreement, but a large number usually means the two files are not about the same pool.
    """

    qids: npt.NDArray[np.generic]
    a: IntArray
    b: IntArray
    only_a: int
    only_b: int

    @property
    def n(self) -> int:
        return len(self.a)


@dataclass(frozen=True)
class Kappa:
    """One kappa with the agreements it is made of.

    With disagreement weights ``w`` (0 on the diagonal, at most 1), ``n`` pairs and
    ``E = outer(row sums, column sums) / n`` the confusion expected by chance::

        observed = 1 - sum(w * C) / n        (p_o; plain agreement when unweighted)
        expected = 1 - sum(w * E) / n        (p_e)
        kappa    = 1 - sum(w * C) / sum(w * E) = (p_o - p_e) / (1 - p_e)

    ``kappa`` is NaN when ``expected == 1``.
    """

    kappa: float
    observed: float
    expected: float
    weights: str


@dataclass(frozen=True)
class Leniency:
    """Who grades higher: mean grade of each judge and the share of pairs each one grades above
    the other (the rest are ties)."""

    mean_a: float
    mean_b: float
    a_higher: float
    b_higher: float


@dataclass(frozen=True)
class GradeRecall:
    """Per grade g of the label set: ``b_matches_a[g] = C[g, g] / (row g sum)``, the share of
    A's g that B also labelled g; ``a_matches_b`` the same the other way round. NaN for a grade
    the judge never used."""

    labels: tuple[int, ...]
    b_matches_a: tuple[float, ...]
    a_matches_b: tuple[float, ...]


@dataclass(frozen=True)
class Bootstrap:
    """How the intervals were made: ``resamples`` (0 = no intervals), the resampled ``unit``
    and how many of them there were, the ``seed`` and the two-sided ``confidence``."""

    resamples: int
    unit: Unit
    units: int
    seed: int | None
    confidence: float


# --------------------------------------------------------------------------- pairing


def align_qrels(a: Qrels, b: Qrels) -> Paired:
    """Pair the labels of the (qid, docid) pairs present in both qrels, in A's order."""
    qids: list[str] = []
    grades_a: list[int] = []
    grades_b: list[int] = []
    for qid, docs in a.items():
        other = b.get(qid, {})
        for docid, grade in docs.items():
            if docid in other:
                qids.append(qid)
                grades_a.append(grade)
                grades_b.append(other[docid])
    n = len(qids)
    return Paired(
        qids=np.array(qids, dtype=np.str_),
        a=np.array(grades_a, dtype=np.int64),
        b=np.array(grades_b, dtype=np.int64),
        only_a=sum(len(docs) for docs in a.values()) - n,
        only_b=sum(len(docs) for docs in b.values()) - n,
    )


def rating_matrix(raters: Sequence[Qrels]) -> FloatArray:
    """Units x raters over the union of the raters' (qid, docid) pairs, NaN where a rater did
    not judge the pair: the input of :func:`krippendorff_alpha` for two or more raters.
    Units are in order of first appearance."""
    units: dict[tuple[str, str], int] = {}
    cells: list[tuple[int, int, int]] = []
    for column, qrels in enumerate(raters):
        for qid, docs in qrels.items():
            for docid, grade in docs.items():
                row = units.setdefault((qid, docid), len(units))
                cells.append((row, column, grade))
    matrix = np.full((len(units), len(raters)), np.nan)
    if cells:
        rows, columns, grades = np.array(cells).T
        matrix[rows, columns] = grades
    return matrix


# --------------------------------------------------------------------------- labels


def _check_pairs(a: npt.ArrayLike, b: npt.ArrayLike) -> tuple[IntArray, IntArray]:
    a_arr, b_arr = np.asarray(a), np.asarray(b)
    if a_arr.ndim != 1 or a_arr.shape != b_arr.shape:
        raise ValueError(
            f"labels must be two 1-D arrays of one length, got {a_arr.shape} and {b_arr.shape}"
        )
    if a_arr.size == 0:
        raise ValueError("no pairs: agreement needs at least one pair labelled by both judges")
    for arr in (a_arr, b_arr):
        # bool is welcome: it is what ``grades >= threshold`` gives.
        if not (np.issubdtype(arr.dtype, np.integer) or arr.dtype == np.bool_):
            raise ValueError(f"labels must be integers, got dtype {arr.dtype}")
    return a_arr.astype(np.int64), b_arr.astype(np.int64)


def label_set(a: npt.ArrayLike, b: npt.ArrayLike, labels: Sequence[int] | None = None) -> IntArray:
    """The sorted label set: the union of both judges' labels, or ``labels`` (sorted) after
    checking that it holds every label used."""
    a_arr, b_arr = _check_pairs(a, b)
    used = np.union1d(a_arr, b_arr)
    if labels is None:
        return used
    values = np.unique(np.asarray(labels, dtype=np.int64))
    missing = np.setdiff1d(used, values)
    if missing.size:
        raise ValueError(f"label {int(missing[0])} is used but not in labels {values.tolist()}")
    return values


def confusion_matrix(
    a: npt.ArrayLike, b: npt.ArrayLike, labels: Sequence[int] | None = None
) -> IntArray:
    """``C[i, j]`` = number of pairs A labelled ``labels[i]`` and B labelled ``labels[j]``."""
    a_arr, b_arr = _check_pairs(a, b)
    values = label_set(a_arr, b_arr, labels)
    k = len(values)
    cells = np.searchsorted(values, a_arr) * k + np.searchsorted(values, b_arr)
    return np.bincount(cells, minlength=k * k).reshape(k, k)


# --------------------------------------------------------------------------- kappa


def disagreement_weights(k: int, weights: Weighting = None) -> FloatArray:
    """Disagreement weights over the positions of a k-label set, as scikit-learn's
    ``cohen_kappa_score``: unweighted ``[i != j]``, linear ``|i - j| / (k - 1)``, quadratic
    ``(i - j)^2 / (k - 1)^2``. (Scaling to a maximum of 1 leaves kappa unchanged and makes
    ``1 - observed disagreement`` an agreement between 0 and 1.)"""
    positions = np.arange(k)
    distance = np.abs(positions[:, None] - positions[None, :]).astype(np.float64)
    if weights is None:
        return (distance > 0).astype(np.float64)
    scaled = distance / max(k - 1, 1)
    if weights == "linear":
        return scaled
    if weights == "quadratic":
        return scaled**2
    raise ValueError(f"weights must be None, 'linear' or 'quadratic', not {weights!r}")


def kappa_parts(confusion: FloatArray, w: FloatArray) -> tuple[FloatArray, ...]:
    """(kappa, observed, expected) of confusion matrices stacked on the leading axes."""
    n = confusion.sum(axis=(-2, -1))
    chance = confusion.sum(axis=-1)[..., :, None] * confusion.sum(axis=-2)[..., None, :]
    d_observed = (w * confusion).sum(axis=(-2, -1))
    d_expected = (w * chance).sum(axis=(-2, -1)) / n
    # d_expected is a sum of non-negative terms: exactly 0 means p_e == 1, kappa undefined.
    with np.errstate(divide="ignore", invalid="ignore"):
        kappa = np.where(d_expected > 0, 1 - d_observed / d_expected, np.nan)
    return kappa, 1 - d_observed / n, 1 - d_expected / n


def kappa_from_confusion(confusion: npt.ArrayLike, weights: Weighting = None) -> Kappa:
    """Cohen's kappa of one confusion matrix (rows = A); see :class:`Kappa` for the formulas."""
    matrix = np.asarray(confusion, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"a confusion matrix is square, got shape {matrix.shape}")
    if matrix.sum() <= 0:
        raise ValueError("no pairs: the confusion matrix is empty")
    kappa, observed, expected = kappa_parts(matrix, disagreement_weights(len(matrix), weights))
    return Kappa(float(kappa), float(observed), float(expected), weights or "none")


def cohen_kappa(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    *,
    weights: Weighting = None,
    labels: Sequence[int] | None = None,
) -> Kappa:
    """Cohen's kappa of two judges' labels of the same pairs, unweighted or weighted."""
    return kappa_from_confusion(confusion_matrix(a, b, labels), weights)


def binarizer(values: IntArray, threshold: int) -> FloatArray:
    """k x 2 indicator: label i goes to column 1 (relevant) when ``values[i] >= threshold``."""
    relevant = (values >= threshold).astype(np.int64)
    return np.eye(2)[relevant]


def binary_kappa(a: npt.ArrayLike, b: npt.ArrayLike, threshold: int = 1) -> Kappa:
    """Unweighted kappa after mapping labels ``>= threshold`` to 1 (relevant) and others to 0."""
    a_arr, b_arr = _check_pairs(a, b)
    relevant_a, relevant_b = (a_arr >= threshold) * 1, (b_arr >= threshold) * 1
    return replace(cohen_kappa(relevant_a, relevant_b, labels=(0, 1)), weights="binary")


def landis_koch(kappa: float) -> str:
    """Landis & Koch (1977) band: < 0 poor, <= 0.20 slight, <= 0.40 fair, <= 0.60 moderate,
    <= 0.80 substantial, above that almost perfect; "undefined" for NaN. The published bands
    (0.21-0.40, ...) leave gaps between them; a value in a gap goes to the band above."""
    if np.isnan(kappa):
        return "undefined"
    if kappa < 0:
        return "poor"
    return next((name for bound, name in _BANDS if kappa <= bound), "almost perfect")


# --------------------------------------------------------------------------- alpha


def _distances(values: FloatArray, marginals: FloatArray, level: Level) -> FloatArray:
    """Krippendorff's squared distances between the values (stacked like ``marginals``).

    nominal ``[c != k]``; interval ``(c - k)^2``; ordinal
    ``(sum of n_g for g from c to k - (n_c + n_k) / 2)^2``, written with the mid-ranks
    ``m = cumsum(n) - n / 2`` as ``(m_k - m_c)^2`` so that it vectorises.
    """
    if level == "nominal":
        return 1.0 - np.eye(len(values))
    if level == "interval":
        return (values[:, None] - values[None, :]) ** 2
    if level == "ordinal":
        mid = np.cumsum(marginals, axis=-1) - marginals / 2
        return (mid[..., None, :] - mid[..., :, None]) ** 2
    raise ValueError(f"level must be 'nominal', 'ordinal' or 'interval', not {level!r}")


def alpha_from_coincidences(
    coincidences: FloatArray, values: FloatArray, level: Level
) -> FloatArray:
    """``alpha = 1 - (n - 1) * sum(o * d) / sum(n_c * n_k * d)`` for coincidence matrices ``o``
    stacked on the leading axes (``n_c`` their marginals, ``n`` their total); NaN when the
    expected disagreement is 0 (a single value was used)."""
    marginals = coincidences.sum(axis=-2)
    n = marginals.sum(axis=-1)
    d = _distances(values, marginals, level)
    d_observed = (coincidences * d).sum(axis=(-2, -1))
    d_expected = (marginals[..., :, None] * marginals[..., None, :] * d).sum(axis=(-2, -1)) / (
        n - 1
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(d_expected > 0, 1 - d_observed / d_expected, np.nan)


def _coincidences(counts: IntArray) -> FloatArray:
    """``o_ck = sum over units u of (n_uc * n_uk - [c == k] * n_uc) / (m_u - 1)``, from the
    units x values counts; units with fewer than two labels cannot be paired and drop out."""
    m = counts.sum(axis=1)
    pairable = counts[m >= 2].astype(np.float64)
    inverse = 1.0 / (m[m >= 2] - 1)
    o = (pairable * inverse[:, None]).T @ pairable
    o[np.diag_indices_from(o)] -= inverse @ pairable
    return o


def krippendorff_alpha(ratings: npt.ArrayLike, level: Level = "ordinal") -> float:
    """Krippendorff's alpha of a units x raters matrix, NaN where a rater gave no label.

    Any number of raters; a unit counts when at least two raters labelled it. Equals
    ``krippendorff.alpha(reliability_data=ratings.T, level_of_measurement=level)`` (that
    package takes raters x units), except that a single used value gives NaN here instead of
    an exception.
    """
    matrix = np.asarray(ratings, dtype=np.float64)
    if matrix.ndim != 2:
        raise ValueError(f"ratings must be a units x raters matrix, got shape {matrix.shape}")
    present = ~np.isnan(matrix)
    if not (present.sum(axis=1) >= 2).any():
        raise ValueError("no unit has labels from two raters: alpha needs at least one")
    values = np.unique(matrix[present])
    unit_of, _ = np.nonzero(present)
    cells = unit_of * len(values) + np.searchsorted(values, matrix[present])
    counts = np.bincount(cells, minlength=len(matrix) * len(values)).reshape(len(matrix), -1)
    return float(alpha_from_coincidences(_coincidences(counts), values, level))


# --------------------------------------------------------------------------- leniency


def leniency(confusion: npt.ArrayLike, labels: Sequence[int]) -> Leniency:
    """Mean grade of each judge and the share of pairs where each grades above the other."""
    matrix = np.asarray(confusion, dtype=np.float64)
    values = np.asarray(labels, dtype=np.float64)
    n = matrix.sum()
    return Leniency(
        mean_a=float(matrix.sum(axis=1) @ values / n),
        mean_b=float(matrix.sum(axis=0) @ values / n),
        # Labels are sorted, so below the diagonal A's grade is the higher one.
        a_higher=float(np.tril(matrix, -1).sum() / n),
        b_higher=float(np.triu(matrix, 1).sum() / n),
    )


def grade_recall(confusion: npt.ArrayLike, labels: Sequence[int]) -> GradeRecall:
    """Per-grade recall both ways; see :class:`GradeRecall`."""
    matrix = np.asarray(confusion, dtype=np.float64)
    diagonal = np.diag(matrix)
    with np.errstate(divide="ignore", invalid="ignore"):
        of_a = diagonal / matrix.sum(axis=1)
        of_b = diagonal / matrix.sum(axis=0)
    return GradeRecall(
        labels=tuple(int(v) for v in labels),
        b_matches_a=tuple(float(v) for v in of_a),
        a_matches_b=tuple(float(v) for v in of_b),
    )


# --------------------------------------------------------------------------- bootstrap


def _group_multiplicities(groups: int, resamples: int, rng: np.random.Generator) -> FloatArray:
    """How often each of ``groups`` is drawn in each resample (resamples x groups): all draws
    at once, counted with one bincount over flattened (resample, group) indices."""
    draws = rng.integers(0, groups, size=(resamples, groups))
    flat = (np.arange(resamples)[:, None] * groups + draws).ravel()
    return (
        np.bincount(flat, minlength=resamples * groups)
        .reshape(resamples, groups)
        .astype(np.float64)
    )


def _query_resamples(
    cells: IntArray, qids: npt.NDArray[np.generic], k: int, resamples: int, rng: np.random.Generator
) -> FloatArray:
    """Confusion matrices (flattened) of query resamples: the per-query confusion counts,
    weighted by how often each query is drawn, summed by one matrix product."""
    _, group = np.unique(qids, return_inverse=True)
    groups = int(group.max()) + 1
    per_query = np.bincount(group * k * k + cells, minlength=groups * k * k).reshape(groups, k * k)
    chunk = max(1, _MAX_DRAWS // groups)
    parts = [
        _group_multiplicities(groups, min(chunk, resamples - start), rng) @ per_query
        for start in range(0, resamples, chunk)
    ]
    return np.concatenate(parts)


def bootstrap_confusions(
    paired: Paired,
    labels: Sequence[int],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    unit: Unit = "query",
    seed: int | None = 0,
) -> FloatArray:
    """Confusion matrices of ``resamples`` bootstrap resamples (resamples x k x k).

    ``unit="query"`` draws whole queries with replacement (as many as there are), keeping
    each query's pairs together. ``unit="pair"`` draws n pairs with replacement; the cell
    counts of such a resample are by definition Multinomial(n, observed cell shares), so
    they are drawn as that directly, without materialising resamples x n indices.
    """
    values = label_set(paired.a, paired.b, labels)
    k = len(values)
    cells = np.searchsorted(values, paired.a) * k + np.searchsorted(values, paired.b)
    rng = np.random.default_rng(seed)
    if unit == "query":
        flat = _query_resamples(cells, paired.qids, k, resamples, rng)
    elif unit == "pair":
        shares = np.bincount(cells, minlength=k * k) / paired.n
        flat = rng.multinomial(paired.n, shares, size=resamples).astype(np.float64)
    else:
        raise ValueError(f"unit must be 'query' or 'pair', not {unit!r}")
    return flat.reshape(resamples, k, k)


def percentile_interval(samples: FloatArray, confidence: float) -> tuple[float, float] | None:
    """Percentile interval; resamples where the statistic is undefined (NaN) are left out."""
    defined = samples[~np.isnan(samples)]
    if defined.size == 0:
        return None
    tail = (1 - confidence) / 2
    lo, hi = np.quantile(defined, [tail, 1 - tail])
    return float(lo), float(hi)
