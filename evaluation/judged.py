"""Finding the qrels grade of every row of a run, in bulk.

Pure core: no Django import.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from formats.trec import QrelsTable, widen

__all__ = ["JudgedIndex"]

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]

_HASH_BITS = 23  # an 8 MB filter: about 3% of a run's rows pass it for 250,000 judged ids
_MULTIPLIERS = np.array(
    [0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9], dtype=np.uint64
)


@dataclass(frozen=True)
class JudgedIndex:
    """Finds the grade of (query, document) rows in qrels.

    A hash filter drops the rows whose document no query has judged (most rows of a deep
    run); the rest take two binary searches: the document's key among every judged key,
    then ``query * len(docs) + that index`` among the judged pairs.
    """

    docs: npt.NDArray[np.generic]  # sorted distinct judged keys, see _searchable
    width: int
    pairs: I64
    grades: I64
    seen: Bools  # one flag per hash value of a judged key

    @classmethod
    def build(cls, qrels: QrelsTable) -> JudgedIndex:
        docs, doc_index = np.unique(_searchable(qrels.doc_keys), return_inverse=True)
        pairs = qrels.qid_codes.astype(np.int64) * len(docs) + doc_index.ravel()
        order = np.argsort(pairs)
        seen = np.zeros(1 << _HASH_BITS, dtype=bool)
        seen[_hash(qrels.doc_keys)] = True
        return cls(docs, qrels.doc_keys.shape[1], pairs[order], qrels.grades[order], seen)

    def grades_of(self, queries: I64, keys: U64) -> tuple[Bools, I64]:
        """(judged, grade) of each row; ``queries`` index the qrels' qids, -1 for none."""
        judged = np.zeros(len(keys), dtype=bool)
        grades = np.zeros(len(keys), dtype=np.int64)
        rows = np.flatnonzero(self.seen[_hash(keys)] & (queries >= 0))
        judged[rows], grades[rows] = self._lookup(queries[rows], keys[rows])
        return judged, grades

    def _lookup(self, queries: I64, keys: U64) -> tuple[Bools, I64]:
        # A key wider than every judged key matches only if its extra words are empty.
        fits = ~keys[:, self.width :].any(axis=1)
        probe = _searchable(widen(keys[:, : self.width], self.width))
        at = np.minimum(np.searchsorted(self.docs, probe), max(len(self.docs) - 1, 0))
        judged = fits & (self.docs[at] == probe) if len(self.docs) else np.zeros_like(fits)
        rows = np.flatnonzero(judged)
        pair = queries[rows] * len(self.docs) + at[rows]
        slot = np.minimum(np.searchsorted(self.pairs, pair), max(len(self.pairs) - 1, 0))
        found = self.pairs[slot] == pair
        judged[rows] = found
        grades = np.zeros(len(keys), dtype=np.int64)
        grades[rows[found]] = self.grades[slot[found]]
        return judged, grades


def _hash(keys: U64) -> I64:
    """_HASH_BITS bits of a multiplicative hash of each key (zero words add nothing, so a
    key and its widened form hash alike)."""
    mixed = np.zeros(len(keys), dtype=np.uint64)
    for j in range(keys.shape[1]):
        mixed += keys[:, j] * _MULTIPLIERS[j % len(_MULTIPLIERS)]
    return (mixed >> np.uint64(64 - _HASH_BITS)).astype(np.int64)


def _searchable(keys: U64) -> npt.NDArray[np.generic]:
    """Keys as a 1-D array ordered like the ids: the word itself when keys are one word
    wide, else the big-endian bytes as numpy void, which compares like memcmp."""
    if keys.shape[1] == 1:
        return keys[:, 0]
    big_endian = np.ascontiguousarray(keys.astype(">u8"))
    return big_endian.view(f"V{8 * keys.shape[1]}").ravel()
