"""Who judges what, as plain arithmetic: no Django here.

Blind double-judging needs two choices. Which queries get a second judge: a fixed share of each
stratum, drawn at random with a seed, so that agreement is measured across every kind of query
and a rebuild gives the same choice. The draw uses its own generator, seeded from the pool's
seed and the purpose: drawn with the generator that shuffled the display order, the doubles
were the last fifth of the order, which told an annotator which queries were double-judged.

And which query an annotator takes next: the first open one in the pool's order, except that a
query already judged once goes preferably to someone who has rarely been paired with its first
judge, so that pairs rotate.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


def double_count(size: int, share: float) -> int:
    """round(share x size), halves rounded up (Python's round() would round 0.5 down to 0)."""
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"the double-judged share must be between 0 and 1, not {share!r}")
    return min(size, math.floor(share * size + 0.5))


def derived_seed(seed: int, purpose: str) -> int:
    """A seed for one purpose, independent of `seed` itself and of every other purpose's: the
    first 8 bytes of SHA-256 over both (stable across processes and Python versions)."""
    digest = hashlib.sha256(f"{seed}/{purpose}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def draw_double(
    candidates: Mapping[str, Sequence[int]], wanted: Mapping[str, int], seed: int
) -> set[int]:
    """`wanted[s]` ids (at most all of them) drawn from each stratum's candidates, with a seed
    derived from `seed`, so that the draw owes nothing to the pool's display order.

    Strata are visited in sorted order and ids sorted within each, so the draw depends only on
    the seed and the sets of ids, never on the order they were given in.
    """
    rng = random.Random(derived_seed(seed, "double-judged"))
    chosen: set[int] = set()
    for stratum in sorted(candidates):
        members = sorted(candidates[stratum])
        chosen.update(rng.sample(members, min(len(members), wanted.get(stratum, 0))))
    return chosen


@dataclass(frozen=True)
class Candidate:
    """An open work unit as the claim sees it."""

    unit_id: int
    position: int
    other_judges: tuple[int, ...]  # user ids already holding the unit (double units only)


def pick(candidates: Sequence[Candidate], pairings: Mapping[int, int]) -> list[Candidate]:
    """Candidates in the order to try them.

    A unit nobody holds yet ranks as if paired 0 times, so it comes in position order; a unit
    already held by someone comes earlier the fewer times this annotator was paired with them.
    Ties go to the earlier position.
    """

    def key(candidate: Candidate) -> tuple[int, int]:
        times = max((pairings.get(u, 0) for u in candidate.other_judges), default=0)
        return times, candidate.position

    return sorted(candidates, key=key)


# --- gold checks ---------------------------------------------------------------------------


def gold_due(*, gold: int, received: int, share: float) -> bool:
    """Whether a person's next query should be a gold check: the gold items they have received
    fall short of `share` of every item they have received (gold ones included). Nobody's first
    query is gold (0 < share x 0 is false), and over time gold stays within one gold query of
    the share."""
    return gold < share * received


def gold_query(candidates: Sequence[int], *, user_id: int, gold: int) -> int:
    """The query of a person's next gold check, drawn from `candidates` (query ids, in any
    order) with a seed of the person and of how many gold items they have received: the same
    state always draws the same query, and two people draw independently."""
    rng = random.Random(derived_seed(user_id, f"gold/{gold}"))
    return rng.choice(sorted(candidates))


def gold_order(pair_ids: Sequence[int], *, user_id: int, query_id: int) -> list[int]:
    """The display order of a gold check's pairs: shuffled, as every query's documents are, so
    that the order says nothing about how the pairs came to be known."""
    ordered = sorted(pair_ids)
    random.Random(derived_seed(user_id, f"gold-order/{query_id}")).shuffle(ordered)
    return ordered
