"""Means of one measure over parts of a release's queries: per stratum, re-weighted to the
query log the sample was drawn from, and over a canary slice (queries picked by an attribute).

All of it is computed from the stored per-query values of a run (what `evaluate` wrote), so
a slice's mean is the plain mean of those values over the slice's queries, and the weighted
mean is the Hájek estimator:

    mean_w = sum_i w_i x_i / sum_i w_i,   w_i = 1 / pi_i  or  w_i = f_i / pi_i

with pi_i the query's inclusion probability in the stratified sample (annotation's
``Query.inclusion_probability``) and f_i its frequency in the log (``Query.frequency``).
Weights 1 / pi estimate the mean over the log's distinct queries (each counted once); weights
f / pi the mean over its searches, the traffic (a query searched 1,000 times counts 1,000
times). With a frequency-proportional draw (pi proportional to f) the traffic weights are
equal within a stratum, as they should be: the draw already favoured frequent queries.

Hájek rather than Horvitz–Thompson (sum_i w_i x_i / N): HT needs the log's number of
distinct queries (or searches) N, which the project does not keep, and the ratio form is the
one that stays within [0, 1] for a measure within [0, 1]. Queries without an inclusion
probability (not drawn from a log), or without a frequency for the traffic mean, are left out
of the weighted mean and counted: a weight of 1 beside weights of 1 / pi in the thousands
would be a number with no meaning. A query with pi = 1 (taken with certainty) weighs 1.

Canary conditions compare a document's metadata value with a typed one: as numbers when
both are numbers, else as strings, so ISO dates (``2024-01-01``) order as dates.

Pure core: no Django import; mappings in, frozen dataclasses out.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "STRATA",
    "Condition",
    "SliceMean",
    "WeightedMean",
    "parse_condition",
    "slice_mean",
    "stratum_means",
    "stratum_order",
    "weighted_mean",
]

STRATA = ("head", "torso", "tail", "failures")
ESTIMATOR = "Hájek"

_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "!=": operator.ne,
    "=": operator.eq,
    "<": operator.lt,
    ">": operator.gt,
}
# Longest operators first, so that "<=" is not read as "<" followed by "=...".
_CONDITION_RE = re.compile(r"\s*(?P<key>[^\s<>=!]+)\s*(?P<op><=|>=|!=|=|<|>)\s*(?P<value>.*?)\s*")


@dataclass(frozen=True)
class SliceMean:
    """A measure's mean over the slice's scored queries (None when it has none) and n."""

    mean: float | None
    n: int


@dataclass(frozen=True)
class WeightedMean:
    """The Hájek mean over the queries with an inclusion probability, how many those were
    and how many scored queries had none (left out)."""

    mean: float | None
    n: int
    unweighted: int
    estimator: str = ESTIMATOR


def slice_mean(values: Mapping[str, float], qids: Collection[str]) -> SliceMean:
    """Mean of ``values`` (qid -> value of the scored queries) over the qids in ``qids``."""
    picked = np.fromiter((v for q, v in values.items() if q in qids), dtype=np.float64)
    return SliceMean(float(picked.mean()) if picked.size else None, int(picked.size))


def stratum_means(values: Mapping[str, float], strata: Mapping[str, str]) -> dict[str, SliceMean]:
    """Mean per stratum: head, torso, tail, failures first (when present), then any other
    stratum by name, then "" (queries without one)."""
    groups: dict[str, list[float]] = {}
    for qid, value in values.items():
        groups.setdefault(strata.get(qid, ""), []).append(value)
    order = sorted(groups, key=stratum_order)
    return {name: SliceMean(float(np.mean(groups[name])), len(groups[name])) for name in order}


def stratum_order(name: str) -> tuple[int, int, str]:
    """Sort key: the four sampling strata in their order, other names, then "" last."""
    if name in STRATA:
        return (0, STRATA.index(name), "")
    return (1 if name else 2, 0, name)


def weighted_mean(
    values: Mapping[str, float],
    pi: Mapping[str, float],
    frequency: Mapping[str, float] | None = None,
) -> WeightedMean:
    """Hájek mean of ``values`` with weights 1 / pi, or frequency / pi when ``frequency`` is
    given (per search rather than per distinct query). Queries without a usable pi (absent,
    not in (0, 1]) or, with ``frequency``, without a positive frequency are counted in
    ``unweighted`` and left out."""
    usable = []
    for qid, value in values.items():
        p = pi.get(qid)
        f = 1.0 if frequency is None else frequency.get(qid)
        if p is not None and _usable(p) and f is not None and math.isfinite(f) and f > 0:
            usable.append((value, f / p))
    if not usable:
        return WeightedMean(None, 0, len(values))
    x, w = np.array(usable, dtype=np.float64).T
    return WeightedMean(float(np.sum(w * x) / np.sum(w)), len(usable), len(values) - len(usable))


def _usable(p: float | None) -> bool:
    return p is not None and math.isfinite(p) and 0.0 < p <= 1.0


# --------------------------------------------------------------------------- canary conditions


@dataclass(frozen=True)
class Condition:
    """``key op value`` on a document's metadata, e.g. ``published >= 2024-01-01``."""

    key: str
    op: str
    value: str

    def __str__(self) -> str:
        return f"{self.key} {self.op} {self.value}"

    def matches(self, metadata: Mapping[str, object]) -> bool:
        """True when the metadata has the key and its value satisfies the comparison.

        Numbers (not booleans) compare as numbers when the typed value is one too;
        everything else compares as text (JSON true/false as "true"/"false")."""
        return self.key in metadata and self.holds(metadata[self.key])

    def holds(self, found: object) -> bool:
        """True when a metadata value (JSON: text, number, boolean, null...) satisfies the
        comparison; null never does."""
        if found is None:
            return False
        compare = _OPERATORS[self.op]
        number = _number(self.value)
        if isinstance(found, int | float) and not isinstance(found, bool) and number is not None:
            return compare(float(found), number)
        return compare(_text(found), self.value)


def parse_condition(text: str) -> Condition:
    """``"published >= 2024-01-01"`` -> Condition; raises ValueError saying what is wrong."""
    match = _CONDITION_RE.fullmatch(text)
    if not match or not match["value"]:
        raise ValueError(
            "write a condition as 'key op value' with op one of = != < <= > >= "
            "(e.g. published >= 2024-01-01)"
        )
    return Condition(match["key"], match["op"], match["value"])


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
