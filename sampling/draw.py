"""Drawing a stratified sample: quotas, uniform or frequency-weighted, with inclusion probabilities.

Within a stratum of N queries (after excluding queries already in the project) a quota of n
is drawn without replacement:

- **uniform**: simple random sampling, every query has inclusion probability n / N;
- **frequency-weighted**: probability proportional to size (the query's frequency) by
  *randomised systematic sampling* (Goodman & Kish 1950; Hartley & Rao 1962). Target
  probabilities are pi_i = n f_i / sum(f); a query whose pi_i would exceed 1 is taken with
  certainty (pi = 1) and the remaining quota is spread again over the others, until no
  probability exceeds 1. The remaining queries are put in a random order, their pi_i laid
  end to end on [0, n), and the queries under the points u, u + 1, ..., u + n - 1 (u
  uniform on [0, 1)) are taken. Each point falls in exactly one interval and no interval
  is longer than 1, so the sample has exactly n distinct queries and query i is taken with
  probability exactly pi_i: the reported probabilities are the design's, not an
  approximation. The method is O(N), has no rejection loop that can stall on a skewed head,
  and the random order gives every pair of queries a chance to be drawn together. Its one
  weakness (no simple unbiased variance estimator from second-order probabilities) does not
  matter here: downstream statistics resample queries (bootstrap) instead.

Each stratum draws from its own random stream derived from (seed, stratum), so changing one
quota leaves the other strata's draws unchanged, and candidates are sorted by query text
first, so the sample depends on the seed and the statistics only, never on row order.

Pure core: numpy only.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from assay.options import SEED_LIMIT

from .strata import STRATA, Strata, StratumName

if TYPE_CHECKING:
    from .stats import LogStats

__all__ = [
    "DEFAULT_QUOTAS",
    "SEED_LIMIT",
    "Sample",
    "SampledQuery",
    "Signals",
    "StratumDraw",
    "check_seed",
    "inclusion_probabilities",
    "parse_quotas",
    "parse_seed",
    "sample_queries",
    "systematic_pps",
]

DEFAULT_QUOTAS: Mapping[StratumName, int] = {"head": 60, "torso": 90, "tail": 120, "failures": 30}
_CERTAIN = 1.0 - 1e-12  # probabilities this close to 1 are certainties (floating point)


@dataclass(frozen=True)
class Signals:
    """The failure signals of a query; None when the log could not provide them."""

    zero_result_rate: float | None
    reformulation_rate: float | None
    abandonment_rate: float | None


@dataclass(frozen=True)
class SampledQuery:
    """One drawn query with what the project stores about it."""

    query: str
    stratum: StratumName
    frequency: int
    inclusion_probability: float
    signals: Signals
    sessions: int | None = None
    users: int | None = None

    @property
    def weight(self) -> float:
        """The Horvitz-Thompson weight, 1 / inclusion probability."""
        return 1.0 / self.inclusion_probability

    def to_json(self) -> dict[str, Any]:
        """The ``sample_queries`` JSON-lines record (a stable public shape)."""
        return {
            "query": self.query,
            "stratum": self.stratum,
            "frequency": self.frequency,
            "inclusion_probability": self.inclusion_probability,
            "signals": {
                "zero_result_rate": self.signals.zero_result_rate,
                "reformulation_rate": self.signals.reformulation_rate,
                "abandonment_rate": self.signals.abandonment_rate,
            },
            "weight": self.weight,
            "sessions": self.sessions,
            "users": self.users,
        }


@dataclass(frozen=True)
class StratumDraw:
    """How one stratum's quota was met: population after exclusion, and what was drawn."""

    stratum: StratumName
    quota: int
    population: int
    excluded: int
    drawn: int

    @property
    def shortfall(self) -> int:
        """Quota the stratum could not fill because it has too few queries."""
        return self.quota - self.drawn


@dataclass(frozen=True)
class Sample:
    """A stratified sample: the queries (by stratum, then frequency descending) and the draws."""

    queries: tuple[SampledQuery, ...]
    draws: tuple[StratumDraw, ...]
    seed: int
    weighted: bool

    @property
    def scheme(self) -> str:
        if self.weighted:
            return "frequency-weighted randomised systematic PPS, take-all above pi = 1"
        return "simple random sampling without replacement"


def parse_seed(text: str, name: str = "the seed") -> int:
    """A seed typed by someone: a whole number in [0, 2**63), or a ValueError saying so."""
    try:
        seed = int(text.strip())
    except ValueError:
        seed = -1
    return check_seed(seed, name, shown=text.strip())


def check_seed(seed: int, name: str = "the seed", shown: str | None = None) -> int:
    if not 0 <= seed < SEED_LIMIT:
        got = shown if shown is not None else str(seed)
        raise ValueError(f"{name} must be a whole number from 0 to {SEED_LIMIT - 1}, got {got!r}")
    return seed


def parse_quotas(text: str) -> dict[StratumName, int]:
    """Parse ``head=60,torso=90,tail=120,failures=30``; strata left out get a quota of 0."""
    quotas: dict[StratumName, int] = dict.fromkeys(STRATA, 0)
    seen: set[str] = set()
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, value = item.partition("=")
        name = name.strip()
        if name not in quotas:
            raise ValueError(f"unknown stratum {name!r} in quota; use {', '.join(STRATA)}")
        if name in seen:  # "head=1,head=2" is a typo, not a quota: say so rather than guess
            raise ValueError(f"the quota for {name} is given twice")
        seen.add(name)
        try:
            count = int(value)
        except ValueError:
            raise ValueError(f"quota for {name} must be a whole number, got {value!r}") from None
        if count < 0:
            raise ValueError(f"quota for {name} must not be negative, got {count}")
        quotas[name] = count
    return quotas


def sample_queries(
    stats: LogStats,
    strata: Strata,
    *,
    quotas: Mapping[StratumName, int] = DEFAULT_QUOTAS,
    seed: int,
    weighted: bool = False,
    exclude: Collection[str] = (),
) -> Sample:
    """Draw ``quotas[h]`` queries from every stratum h of ``strata``, without replacement.

    ``exclude`` holds normalised queries already in the project: they are removed from the
    population before drawing, so inclusion probabilities are conditional on them being
    out. A stratum with fewer queries than its quota gives all of them (probability 1) and
    reports the shortfall; its unused quota is not moved to other strata, which would
    silently change the design.
    """
    check_seed(seed)
    excluded = frozenset(exclude)
    texts = np.asarray(stats.query, dtype=object)
    queries: list[SampledQuery] = []
    draws: list[StratumDraw] = []
    for index, name in enumerate(STRATA):
        # Statistics are sorted by query text, so ascending indices are a text order that
        # does not depend on how the log was laid out.
        members = np.flatnonzero(strata.labels == name)
        population = members
        if excluded:
            keep = np.fromiter((texts[i] not in excluded for i in members), bool, members.size)
            population = members[keep]
        quota = int(quotas.get(name, 0))
        rng = np.random.default_rng([seed, index])
        chosen, probability = _draw(rng, stats, population, quota, weighted)
        queries.extend(_sampled(stats, name, chosen, probability))
        draws.append(
            StratumDraw(
                name,
                quota,
                int(population.size),
                int(members.size - population.size),
                int(chosen.size),
            )
        )
    queries.sort(key=lambda q: (STRATA.index(q.stratum), -q.frequency, q.query))
    return Sample(tuple(queries), tuple(draws), seed, weighted)


def _draw(
    rng: np.random.Generator,
    stats: LogStats,
    population: np.ndarray,
    quota: int,
    weighted: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Chosen indices into the statistics and their inclusion probabilities."""
    size = population.size
    if quota <= 0 or size == 0:
        return population[:0], np.zeros(0)
    if quota >= size:
        return population, np.ones(size)
    if not weighted:
        picks = rng.choice(size, size=quota, replace=False)
        return population[picks], np.full(quota, quota / size)
    pi = inclusion_probabilities(np.asarray(stats.frequency)[population], quota)
    picks = systematic_pps(rng, pi)
    return population[picks], pi[picks]


def inclusion_probabilities(sizes: np.ndarray, n: int) -> np.ndarray:
    """pi_i proportional to ``sizes`` with sum n, capped at 1 (take-all, then spread again)."""
    sizes = np.asarray(sizes, dtype=np.float64)
    if n >= sizes.size:
        return np.ones(sizes.size)
    pi = np.zeros(sizes.size)
    certain = np.zeros(sizes.size, dtype=bool)
    while True:
        rest = ~certain
        remaining = n - int(certain.sum())
        pi[rest] = remaining * sizes[rest] / sizes[rest].sum()
        newly = rest & (pi >= _CERTAIN)
        if not newly.any():
            break
        certain |= newly
        pi[certain] = 1.0
    pi[certain] = 1.0
    return pi


def systematic_pps(rng: np.random.Generator, pi: np.ndarray) -> np.ndarray:
    """Indices drawn by randomised systematic sampling with inclusion probabilities ``pi``.

    ``pi`` must sum to a whole number n (as :func:`inclusion_probabilities` guarantees);
    certainties are taken outright and the rest laid out in a random order.
    """
    certain = np.flatnonzero(pi >= _CERTAIN)
    rest = np.flatnonzero(pi < _CERTAIN)
    n_rest = round(float(pi[rest].sum()))
    if n_rest == 0:
        return certain
    order = rng.permutation(rest)
    edges = np.cumsum(pi[order])
    edges *= n_rest / edges[-1]  # absorb rounding so that the last edge is exactly n_rest
    points = rng.random() + np.arange(n_rest)
    hits = np.minimum(np.searchsorted(edges, points, side="right"), order.size - 1)
    return np.concatenate([certain, order[hits]])


def _sampled(
    stats: LogStats, stratum: StratumName, chosen: np.ndarray, probability: np.ndarray
) -> list[SampledQuery]:
    sampled = []
    for index, p in zip(chosen, probability, strict=True):
        record = stats.record(int(index))
        signals = Signals(
            record.zero_result_rate, record.reformulation_rate, record.abandonment_rate
        )
        sampled.append(
            SampledQuery(
                query=record.query,
                stratum=stratum,
                frequency=record.frequency,
                inclusion_probability=float(p),
                signals=signals,
                sessions=record.sessions,
                users=record.users,
            )
        )
    return sampled
