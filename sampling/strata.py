"""The strata definition and the stratification of per-query statistics.

Traffic strata cut the rank-frequency curve by cumulative share of traffic (the most frequent
queries are always head; see :class:`StrataDefinition` for the rule at ties); the
known-failures stratum is carved out of them by thresholds on the failure signals. Everything
here works on arrays aligned with a :class:`~sampling.ingest.LogStats`.

Pure core: no Django, no DuckDB.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from .text import Normalisation

if TYPE_CHECKING:
    from .stats import LogStats

__all__ = [
    "STRATA",
    "DefinitionError",
    "FailureRule",
    "PiiPolicy",
    "Strata",
    "StrataDefinition",
    "StratumName",
    "StratumSummary",
    "rank_frequency_points",
    "stratify",
]

StratumName = Literal["head", "torso", "tail", "failures"]
STRATA: tuple[StratumName, ...] = ("head", "torso", "tail", "failures")
PiiPolicy = Literal["exclude", "mask"]
DEFINITION_VERSION = 1


class DefinitionError(ValueError):
    """A strata definition (or its JSON) is not valid."""


@dataclass(frozen=True)
class FailureRule:
    """When a query is a *known failure*.

    A query with ``frequency >= min_frequency`` is a known failure when any of its failure
    signals reaches its threshold: zero-result rate >= ``zero_result_rate``, reformulation
    rate >= ``reformulation_rate``, or abandonment rate >= ``abandonment_rate``. A threshold
    of None switches that signal off; a signal the log cannot provide (null) never fires.

    Defaults: half of the searches returning nothing or being immediately rephrased is a
    failure by any reading; abandonment needs a higher bar (0.8) because plenty of
    successful searches end without a click (the answer is in the snippet). The minimum
    support of 2 keeps one-off events from turning every unlucky tail query into a
    "failure" on the strength of a single 0-or-1 observation.
    """

    zero_result_rate: float | None = 0.5
    reformulation_rate: float | None = 0.5
    abandonment_rate: float | None = 0.8
    min_frequency: int = 2

    def __post_init__(self) -> None:
        for name in ("zero_result_rate", "reformulation_rate", "abandonment_rate"):
            value = getattr(self, name)
            if value is not None and not 0.0 <= value <= 1.0:
                raise DefinitionError(f"failure threshold {name} must be in [0, 1], got {value}")
        if self.min_frequency < 1:
            raise DefinitionError(f"min_frequency must be at least 1, got {self.min_frequency}")


@dataclass(frozen=True)
class StrataDefinition:
    """Everything that decides which query lands in which stratum; stored per project.

    - ``head_share`` / ``torso_share``: cut points on the cumulative share of traffic.
      Queries are ranked by frequency; the head is the most frequent queries that together
      make up at most ``head_share`` of all traffic, head and torso together at most
      ``torso_share``, the tail is the rest. Queries with equal frequency are never split:
      a group of ties belongs to the stratum its *last* query would reach, so a tie group
      that straddles a cut falls to the lower stratum, with one exception: the most
      frequent tie group is always head (unless ``head_share`` is 0), even when it alone
      holds more than ``head_share`` of traffic. So the tail always holds at least
      ``1 - torso_share`` of traffic unless the most frequent queries alone hold more than
      ``torso_share``; a log whose queries all have the same frequency (every query unique,
      say) has no head or torso: all of it is tail. (Labelling a tie group by where it
      *starts* instead would give the head its top query too, but put a log's queries seen
      once, often a third to a half of real traffic, in the torso whenever they start before
      the torso cut, leaving the tail empty.) Defaults are thirds of traffic: each traffic
      stratum then stands for the same volume, so the quotas alone say how much a stratum is
      over- or under-weighted (60/90/120 weighs the tail twice the head), and a third of
      traffic is also the size of the head in the method's own worked example.
    - ``failures``: the :class:`FailureRule`; known failures leave their traffic stratum.
    - ``normalisation``, ``reformulation_window`` (seconds) and ``pii`` (exclude or mask)
      decide how a log becomes per-query statistics; they are part of the definition so
      that a later sample into the same project counts queries the same way.
    """

    head_share: float = 1 / 3
    torso_share: float = 2 / 3
    failures: FailureRule = field(default_factory=FailureRule)
    normalisation: Normalisation = field(default_factory=Normalisation)
    reformulation_window: float = 300.0
    pii: PiiPolicy = "exclude"

    def __post_init__(self) -> None:
        if not 0.0 <= self.head_share <= self.torso_share <= 1.0:
            raise DefinitionError(
                "cut points must satisfy 0 <= head_share <= torso_share <= 1, "
                f"got {self.head_share} and {self.torso_share}"
            )
        if not (self.reformulation_window > 0 and math.isfinite(self.reformulation_window)):
            raise DefinitionError(
                f"reformulation_window must be a positive number of seconds, "
                f"got {self.reformulation_window}"
            )
        if self.pii not in ("exclude", "mask"):
            raise DefinitionError(f"pii must be 'exclude' or 'mask', got {self.pii!r}")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with a ``version`` key; :meth:`from_dict` reads it back."""
        return {"version": DEFINITION_VERSION, **asdict(self)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StrataDefinition:
        """Rebuild a definition; unknown keys or a newer version are errors, not guesses."""
        data = dict(data)
        version = data.pop("version", DEFINITION_VERSION)
        if version != DEFINITION_VERSION:
            raise DefinitionError(f"unsupported strata definition version {version!r}")
        try:
            failures = FailureRule(**data.pop("failures", {}))
            normalisation = Normalisation(**data.pop("normalisation", {}))
            return cls(failures=failures, normalisation=normalisation, **data)
        except TypeError as error:
            raise DefinitionError(f"invalid strata definition: {error}") from None

    @classmethod
    def from_json(cls, text: str) -> StrataDefinition:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise DefinitionError(f"strata definition is not JSON: {error}") from None
        if not isinstance(data, dict):
            raise DefinitionError("strata definition must be a JSON object")
        return cls.from_dict(data)


@dataclass(frozen=True)
class StratumSummary:
    """One row of the strata table (after known failures left their traffic stratum)."""

    name: StratumName
    queries: int
    traffic: int
    share: float
    min_frequency: int | None
    max_frequency: int | None


@dataclass(frozen=True)
class Strata:
    """The stratification of a :class:`LogStats`.

    ``labels[i]`` is the stratum of query ``i`` of the statistics, ``traffic_labels[i]``
    its traffic stratum before known failures were taken out. ``cut_ranks`` are the ranks
    (1-based, frequency descending, ties by query text) of the last head and the last torso
    query, for marking the cuts on the rank-frequency chart (0 when the stratum is empty).
    ``rank_frequency`` is that chart's data: (rank, frequency) points on a logarithmic grid
    of ranks, always including the first and the last rank.
    """

    definition: StrataDefinition
    labels: np.ndarray
    traffic_labels: np.ndarray
    summary: tuple[StratumSummary, ...]
    cut_ranks: tuple[int, int]
    rank_frequency: tuple[tuple[int, int], ...]
    warnings: tuple[str, ...] = ()

    def stratum(self, name: StratumName) -> StratumSummary:
        return next(row for row in self.summary if row.name == name)


def stratify(stats: LogStats, definition: StrataDefinition) -> Strata:
    """Assign every query of ``stats`` to head, torso, tail or failures (see the definition)."""
    frequency = np.asarray(stats.frequency, dtype=np.int64)
    order = _rank_order(frequency)
    traffic = _traffic_codes(frequency, order, definition)
    failing = _failing(stats, definition.failures)
    # Labels are worked out as small integers (string arrays of a million rows are slow to
    # fill and compare) and named once at the end.
    codes = np.where(failing, _CODES["failures"], traffic)
    ranked = frequency[order]
    head, torso = (int(np.count_nonzero(traffic == _CODES[name])) for name in ("head", "torso"))
    total = frequency.sum()
    return Strata(
        definition=definition,
        labels=_NAMES[codes],
        traffic_labels=_NAMES[traffic],
        summary=tuple(_summary(name, frequency[codes == _CODES[name]], total) for name in STRATA),
        cut_ranks=(head, head + torso),
        rank_frequency=rank_frequency_points(ranked),
        warnings=_warnings(ranked, traffic, definition),
    )


_NAMES = np.array(STRATA, dtype="<U8")
_CODES = {name: np.int8(code) for code, name in enumerate(STRATA)}


def _rank_order(frequency: np.ndarray) -> np.ndarray:
    """Indices by frequency descending; ties keep index order, which is query-text order."""
    return np.argsort(-frequency, kind="stable")


def _traffic_codes(
    frequency: np.ndarray, order: np.ndarray, definition: StrataDefinition
) -> np.ndarray:
    labels = np.full(frequency.shape, _CODES["tail"], dtype=np.int8)
    if frequency.size == 0:
        return labels
    ranked = frequency[order]
    cumulative = np.cumsum(ranked)
    # A tie group is labelled by the cumulative traffic where its *last* member ends, so
    # that queries with equal frequency never straddle a cut.
    last_of_group = np.r_[ranked[1:] != ranked[:-1], True]
    group_end_traffic = cumulative[_group_last_index(last_of_group)]
    total = float(cumulative[-1])
    slack = 1e-9 * total  # so that shares such as 1/3 of 3 compare as intended
    ranked_labels = np.where(
        group_end_traffic <= definition.head_share * total + slack,
        _CODES["head"],
        np.where(
            group_end_traffic <= definition.torso_share * total + slack,
            _CODES["torso"],
            _CODES["tail"],
        ),
    ).astype(np.int8)
    if definition.head_share > 0 and ranked[0] != ranked[-1]:
        # The most frequent queries are head however much traffic they hold alone: a head
        # without the log's top query would misname every stratum.
        ranked_labels[ranked == ranked[0]] = _CODES["head"]
    labels[order] = ranked_labels
    return labels


def _group_last_index(last_of_group: np.ndarray) -> np.ndarray:
    """For each ranked position, the position of the last member of its tie group."""
    ends = np.flatnonzero(last_of_group)
    # a position's group is the number of groups that ended before it
    group = np.empty(last_of_group.size, dtype=np.intp)
    group[0] = 0
    np.cumsum(last_of_group[:-1], out=group[1:])
    return ends[group]


def _failing(stats: LogStats, rule: FailureRule) -> np.ndarray:
    failing = np.zeros(len(stats.frequency), dtype=bool)
    for threshold, rates in (
        (rule.zero_result_rate, stats.zero_result_rate),
        (rule.reformulation_rate, stats.reformulation_rate),
        (rule.abandonment_rate, stats.abandonment_rate),
    ):
        if threshold is not None:
            # NaN (signal unknown) compares False: an unknown signal never fires.
            failing |= np.asarray(rates, dtype=np.float64) >= threshold
    return failing & (np.asarray(stats.frequency) >= rule.min_frequency)


def _summary(name: StratumName, frequencies: np.ndarray, total: int) -> StratumSummary:
    traffic = int(frequencies.sum())
    return StratumSummary(
        name=name,
        queries=int(frequencies.size),
        traffic=traffic,
        share=float(traffic / total) if total else 0.0,
        min_frequency=int(frequencies.min()) if frequencies.size else None,
        max_frequency=int(frequencies.max()) if frequencies.size else None,
    )


def _warnings(
    ranked: np.ndarray, traffic: np.ndarray, definition: StrataDefinition
) -> tuple[str, ...]:
    if ranked.size and ranked[0] == ranked[-1]:
        return (
            f"every query occurs {int(ranked[0])} time(s): the rank-frequency curve is flat, "
            "so there is no head or torso and all traffic strata collapse into the tail",
        )
    cuts = f"{definition.head_share:.1%} and {definition.torso_share:.1%}"
    return tuple(
        f"the {name} stratum is empty with cut points at {cuts} of traffic (queries of equal "
        "frequency are never split across a cut): its quota draws nothing"
        for name in ("head", "torso", "tail")
        if ranked.size and not np.any(traffic == _CODES[name])
    )


def rank_frequency_points(
    ranked_frequency: np.ndarray, max_points: int = 200
) -> tuple[tuple[int, int], ...]:
    """(rank, frequency) pairs for a log-log chart: ranks on a logarithmic grid.

    ``ranked_frequency`` is sorted descending. A log grid keeps the chart's shape (the head
    is a few points, the tail a long straight run) in a bounded number of points whatever
    the number of distinct queries.
    """
    size = len(ranked_frequency)
    if size == 0:
        return ()
    grid = np.unique(np.rint(np.geomspace(1, size, num=min(max_points, size))).astype(np.int64))
    return tuple((int(rank), int(ranked_frequency[rank - 1])) for rank in grid)
