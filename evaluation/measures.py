"""Retrieval measures under a stated metric contract, trec_eval-exact and vectorised.

Notation, for one query. r = 1, 2, ... are the ranks of the run's documents in trec_eval
order: score descending, ties broken by docid descending, whatever the rank column says.
Scores are compared in single precision because trec_eval keeps them in a C ``float``, so
two scores that differ only beyond about 7 significant digits tie. g_r is the qrels grade
of the document at rank r (an unjudged document gains 0 and is not relevant); t is the
contract's relevance threshold; rel_r = 1 if that document is judged with g_r >= t, else
0; R is the number of the query's judged documents with grade >= t.

* gain(g) = 2**g - 1 ("exponential", the default) or g ("linear"); a negative grade gains 0
* ndcg@k = DCG@k / IDCG@k with DCG@k = sum_{r<=k} gain(g_r) / log2(r + 1) and IDCG@k the
  DCG@k of all the query's judged grades sorted descending (0 when IDCG@k = 0). nDCG uses
  the grades and ignores t, as trec_eval does.
* recall@k = sum_{r<=k} rel_r / R
* p@k = sum_{r<=k} rel_r / k (k even when the run has fewer documents: trec_eval's P_k)
* hit@k = 1 if sum_{r<=k} rel_r > 0 else 0
* mrr = 1 / r1 with r1 the rank of the first relevant document (0 without one);
  mrr@k is 0 when r1 > k
* map = (1 / R) * sum_{r: rel_r = 1} (sum_{i<=r} rel_i) / r (relevant documents the run
  misses add 0 to the sum but count in R)
* judged@k = (number of judged documents, any grade, in the top k) / min(k, documents
  retrieved), 0 for an empty run: the share of the run's window a person looked at, whose
  complement is the hole rate that reveals pooling bias. This is ir_measures' Judged@k (a
  run shorter than k is not penalised for the ranks it did not fill); trec_eval has none.

Which queries count: every query of the qrels. A query with no relevant document (R = 0)
is skipped (``empty="skip"``, the default) or kept with every measure whose denominator is
R taken as 0 (``empty="zero"``; its nDCG is computed as usual, so with t = 2 a query judged
only 0 and 1 keeps the nDCG its grade-1 documents earn, as in trec_eval). A query of the
qrels the run does not have scores 0 everywhere and counts. Queries of the run that the
qrels do not have are ignored. With ``gain="linear", empty="zero"`` every value equals
trec_eval's (``trec_eval -c``: ``ndcg_cut_k``, ``recall_k``, ``P_k``, ``recip_rank``,
``map`` at ``-l t``).

Pure core: no Django import; numbers in, frozen dataclasses out.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt

from evaluation.judged import JudgedIndex
from formats.trec import (
    I32,
    U64,
    NotSplit,
    QrelsTable,
    RunRow,
    RunTable,
    concat_tables,
    has_duplicates,
    iter_run_pieces,
    lexsort_keys,
    read_qrels_table,
    read_run,
    trec_order,
)

__all__ = [
    "Contract",
    "Empty",
    "Gain",
    "RankedRows",
    "RankedScorer",
    "RunScores",
    "evaluate",
    "evaluate_files",
    "evaluate_ranked",
    "parse_measures",
]

Gain = Literal["exponential", "linear"]
Empty = Literal["skip", "zero"]

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]

_WITH_CUTOFF = ("ndcg", "recall", "p", "hit", "judged")
_NAME_RE = re.compile(r"(?P<kind>[a-z]+)(?:@(?P<k>\S*))?")
_KNOWN = "ndcg@K, recall@K, p@K, hit@K, judged@K, mrr, mrr@K, map (K a positive integer)"


# --------------------------------------------------------------------------- contract


@dataclass(frozen=True)
class Contract:
    """How graded judgments become numbers; printed next to every score it produced."""

    gain: Gain = "exponential"
    rel_threshold: int = 1
    empty: Empty = "skip"

    def __post_init__(self) -> None:
        if self.gain not in ("exponential", "linear"):
            raise ValueError(f"gain must be 'exponential' or 'linear', not {self.gain!r}")
        if self.empty not in ("skip", "zero"):
            raise ValueError(f"empty must be 'skip' or 'zero', not {self.empty!r}")
        if isinstance(self.rel_threshold, bool) or not isinstance(self.rel_threshold, int):
            raise ValueError(f"rel_threshold must be an integer, not {self.rel_threshold!r}")

    def as_dict(self) -> dict[str, object]:
        """The contract as plain data: the three choices, then what they mean in words."""
        gain = "2^grade - 1" if self.gain == "exponential" else "grade"
        empty = "skipped" if self.empty == "skip" else "scored 0"
        return {
            "gain": self.gain,
            "rel_threshold": self.rel_threshold,
            "empty": self.empty,
            "gain_formula": f"{gain} (negative grades gain 0)",
            "discount": "log2(rank + 1)",
            "ideal": "all judged grades of the query, sorted descending, cut at k",
            "relevant": f"grade >= {self.rel_threshold} (binary measures; nDCG uses grades)",
            "no_relevant_queries": empty,
            "missing_from_run": "scored 0",
            "ties": "score (single precision, as trec_eval) descending, then docid descending",
            "judged_denominator": "min(k, documents retrieved), as ir_measures' Judged@k",
        }


# --------------------------------------------------------------------------- measure names


@dataclass(frozen=True)
class _Spec:
    name: str
    kind: str
    k: int | None


def parse_measures(spec: str | Sequence[str]) -> list[str]:
    """Validated, canonical measure names from ``"ndcg@10,recall@100,mrr"`` or a list.

    Names are case-insensitive and come back lower-case with the cutoff as a plain integer
    (``"P@010"`` -> ``"p@10"``), duplicates dropped. Raises ValueError naming the bad entry.
    """
    parts = [spec] if isinstance(spec, str) else list(spec)
    names = [n.strip() for part in parts for n in part.split(",") if n.strip()]
    if not names:
        raise ValueError(f"no measure given; known measures: {_KNOWN}")
    return list(dict.fromkeys(_parse_one(n).name for n in names))


def _parse_one(name: str) -> _Spec:
    match = _NAME_RE.fullmatch(name.lower())
    if not match:
        raise ValueError(f"unknown measure {name!r}; known measures: {_KNOWN}")
    kind, cutoff = match["kind"], match["k"]
    if kind not in (*_WITH_CUTOFF, "mrr", "map"):
        raise ValueError(f"unknown measure {name!r}; known measures: {_KNOWN}")
    if cutoff is None:
        if kind in _WITH_CUTOFF:
            raise ValueError(f"{name!r} needs a cutoff, as in {kind}@10")
        return _Spec(kind, kind, None)
    if kind == "map":
        raise ValueError(f"{name!r}: map takes no cutoff (it is computed over the whole run)")
    if not cutoff.isdigit() or int(cutoff) < 1:
        raise ValueError(f"bad cutoff in {name!r}: it must be a positive integer")
    return _Spec(f"{kind}@{int(cutoff)}", kind, int(cutoff))


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class RunScores:
    """One run's scores. ``per_query`` and ``mean`` cover the queries that count (``scored``
    of them, ``missing_from_run`` of which the run lacks and score 0).

    ``no_relevant`` counts the qrels queries without a relevant document (skipped or scored
    0 as the contract says) and ``not_in_qrels`` the run's queries that were ignored.
    """

    measures: tuple[str, ...]
    per_query: dict[str, dict[str, float]]
    mean: dict[str, float]
    scored: int
    skipped_no_relevant: int
    missing_from_run: int
    no_relevant: int = 0
    not_in_qrels: int = 0


# --------------------------------------------------------------------------- judgments


@dataclass(frozen=True)
class _Judgments:
    """The qrels under one contract: the grade index, R and IDCG per query."""

    table: QrelsTable
    contract: Contract
    index: JudgedIndex
    position: dict[str, int]  # qid -> index of the qrels query
    n_rel: I64
    _ideal: dict[int, F64] = field(default_factory=dict)

    @classmethod
    def build(cls, qrels: QrelsTable, contract: Contract) -> _Judgments:
        relevant = qrels.grades >= contract.rel_threshold
        n_rel = np.bincount(qrels.qid_codes[relevant], minlength=len(qrels.qids))
        position = {qid: i for i, qid in enumerate(qrels.qids)}
        return cls(qrels, contract, JudgedIndex.build(qrels), position, n_rel.astype(np.int64))

    @property
    def qids(self) -> tuple[str, ...]:
        return self.table.qids

    def ideal_dcg(self, k: int) -> F64:
        """IDCG@k per query: the DCG@k of the query's judged grades sorted descending."""
        if k not in self._ideal:
            order = np.lexsort((-self.table.grades, self.table.qid_codes))
            codes, grades = self.table.qid_codes[order], self.table.grades[order]
            ranks = ranks_within(codes)
            top = ranks <= k
            gains = _gain(grades[top], self.contract.gain) / np.log2(ranks[top] + 1)
            self._ideal[k] = np.bincount(codes[top], gains, minlength=len(self.qids))
        return self._ideal[k]


def _gain(grades: I64, gain: Gain) -> F64:
    positive = np.maximum(grades, 0).astype(np.float64)
    return np.exp2(positive) - 1.0 if gain == "exponential" else positive


# --------------------------------------------------------------------------- trec_eval order


def ranks_within(groups: npt.NDArray[np.integer]) -> I64:
    """1-based position of each row inside its run of equal consecutive ``groups`` values."""
    n = len(groups)
    starts = np.flatnonzero(np.concatenate(([True], groups[1:] != groups[:-1])))
    return np.arange(1, n + 1) - np.repeat(starts, np.diff(np.append(starts, n)))


@dataclass(frozen=True)
class Ranked:
    """Rows of whole queries, grouped by query, with each row's rank in its query.

    ``tied[i]`` says row i and row i + 1 belong to one query and have equal scores. The
    ranks are final except inside runs of tied rows, whose order trec_eval decides by docid:
    :meth:`ranks_of` settles that, only for the rows asked about (the judged ones).
    """

    codes: I32
    keys: U64
    ranks: I64
    tied: Bools | None

    def ranks_of(self, rows: I64) -> I64:
        """Final ranks of ``rows``: inside a run of tied rows, docid descending (trec_eval)."""
        if self.tied is None:
            return self.ranks[rows]
        return self._settled[rows]

    @cached_property
    def _settled(self) -> I64:
        # Only the tied rows are sorted again, by (tie group, docid descending): a sort rather
        # than a comparison with every fellow, so that a run scoring a thousand documents of a
        # query alike costs what sorting them costs.
        assert self.tied is not None
        n = len(self.keys)
        starts = np.flatnonzero(np.concatenate(([True], ~self.tied)))
        sizes = np.diff(np.append(starts, n))
        group = np.repeat(np.arange(len(starts)), sizes)
        tied = np.flatnonzero(sizes[group] > 1)
        order = tied[np.lexsort([*lexsort_keys(self.keys[tied], descending=True), group[tied]])]
        settled = self.ranks.copy()
        settled[order] = self.ranks[starts[group[order]]] + ranks_within(group[order]) - 1
        return settled


def rank_rows(codes: I32, scores: npt.NDArray[np.floating], keys: U64) -> Ranked:
    """Group rows by query and rank them as trec_eval does: score descending, then docid
    descending, whatever order they came in.

    Runs are nearly always written grouped and by descending score; then this costs a few
    comparisons per row, and only tied rows are looked at again (:class:`Ranked`). Other
    runs are sorted.
    """
    same = codes[1:] == codes[:-1]
    heads = codes[np.concatenate(([True], ~same))]
    if len(np.unique(heads)) != len(heads) or (same & (scores[1:] > scores[:-1])).any():
        order = trec_order(codes, scores, keys)
        codes, keys = codes[order], keys[order]
        return Ranked(codes, keys, ranks_within(codes), None)
    tied = same & (scores[1:] == scores[:-1])
    return Ranked(codes, keys, ranks_within(codes), tied if tied.any() else None)


# --------------------------------------------------------------------------- scoring


class _Ungrouped(Exception):  # a signal between two functions of this module
    """A query's rows are not all together in the file: score it as one table instead."""


class _DuplicateDocument(ValueError):
    def __init__(self) -> None:
        super().__init__("a document appears twice for one query of the run")


@dataclass
class _Stats:
    """Per-query sums gathered from a run's judged rows; every array is indexed like the
    qrels' queries. One mutable accumulator per run, private to one scoring call."""

    specs: tuple[_Spec, ...]
    judgments: _Judgments
    n_ret: I64
    dcg: dict[int, F64]
    rel_at: dict[int, I64]
    judged_at: dict[int, I64]
    first_rel: I64
    ap_sum: F64
    not_in_qrels: int = 0

    @classmethod
    def empty(cls, specs: tuple[_Spec, ...], judgments: _Judgments) -> _Stats:
        nq = len(judgments.qids)
        cut = {kind: {s.k for s in specs if s.kind == kind and s.k} for kind in _WITH_CUTOFF}
        return cls(
            specs,
            judgments,
            np.zeros(nq, np.int64),
            {k: np.zeros(nq) for k in cut["ndcg"]},
            {k: np.zeros(nq, np.int64) for k in cut["recall"] | cut["p"] | cut["hit"]},
            {k: np.zeros(nq, np.int64) for k in cut["judged"]},
            np.zeros(nq, np.int64),
            np.zeros(nq),
        )

    def add(self, queries: I64, ranks: I64, grades: I64) -> None:
        """Add judged rows: query indexes, ranks and grades, in (query, rank) order."""
        nq = len(self.n_ret)
        for k, dcg in self.dcg.items():
            top = ranks <= k
            gains = _gain(grades[top], self.judgments.contract.gain) / np.log2(ranks[top] + 1)
            dcg += np.bincount(queries[top], gains, minlength=nq)
        for k, judged in self.judged_at.items():
            judged += np.bincount(queries[ranks <= k], minlength=nq)
        rel = grades >= self.judgments.contract.rel_threshold
        queries, ranks = queries[rel], ranks[rel]
        for k, count in self.rel_at.items():
            count += np.bincount(queries[ranks <= k], minlength=nq)
        nth_relevant = ranks_within(queries)
        self.ap_sum += np.bincount(queries, nth_relevant / ranks, minlength=nq)
        first = nth_relevant == 1
        self.first_rel[queries[first]] = ranks[first]


def _score_rows(table: RunTable, qmap: I64, stats: _Stats) -> None:
    """Add the rows of whole queries (every row of each query they mention) to ``stats``."""
    if not len(table.qid_codes):
        return
    # trec_eval keeps scores in a C float: scores equal in single precision tie.
    ranked = rank_rows(table.qid_codes, table.scores.astype(np.float32), table.doc_keys)
    if has_duplicates(ranked.codes, ranked.keys):
        raise _DuplicateDocument
    queries = qmap[ranked.codes]
    heads = np.flatnonzero(ranked.ranks == 1)
    lengths = np.diff(np.append(heads, len(queries)))
    known = queries[heads] >= 0
    stats.not_in_qrels += int((~known).sum())
    stats.n_ret[queries[heads][known]] += lengths[known]
    judged, grades = stats.judgments.index.grades_of(queries, ranked.keys)
    rows = np.flatnonzero(judged)
    queries, ranks, grades = queries[rows], ranked.ranks_of(rows), grades[rows]
    order = np.lexsort((ranks, queries))  # tie-broken ranks may reorder rows of a query
    stats.add(queries[order], ranks[order], grades[order])


def _qmap(qids: tuple[str, ...], judgments: _Judgments, known: I64) -> I64:
    """Run qid code -> qrels query index (-1 when the qrels lack it), extending ``known``."""
    fresh = [judgments.position.get(q, -1) for q in qids[len(known) :]]
    return np.concatenate((known, np.array(fresh, dtype=np.int64)))


def _score_stream(pieces: Iterator[RunTable], stats: _Stats) -> None:
    """Score a run piece by piece, holding back the rows of the last query of each piece
    until the next piece shows whether that query goes on. Memory stays one piece."""
    qmap = np.zeros(0, dtype=np.int64)
    done = np.zeros(0, dtype=bool)
    pending: RunTable | None = None
    for piece in pieces:
        qmap = _qmap(piece.qids, stats.judgments, qmap)
        done = np.concatenate((done, np.zeros(len(piece.qids) - len(done), dtype=bool)))
        if not len(piece.qid_codes):
            continue
        rows = piece if pending is None else concat_tables([pending, piece])
        codes = rows.qid_codes
        change = np.flatnonzero(codes[1:] != codes[:-1])
        tail = int(change[-1]) + 1 if len(change) else 0
        _score_complete(rows.take(slice(0, tail)), qmap, done, stats)
        pending = rows.take(slice(tail, len(codes)))
    if pending is not None:
        _score_complete(pending, qmap, done, stats)


def _score_complete(rows: RunTable, qmap: I64, done: Bools, stats: _Stats) -> None:
    all_codes = rows.qid_codes
    if not len(all_codes):
        return
    codes = all_codes[np.concatenate(([True], all_codes[1:] != all_codes[:-1]))]
    if done[codes].any():
        raise _Ungrouped
    _score_rows(rows, qmap, stats)
    done[codes] = True


def _finish(stats: _Stats) -> RunScores:
    """Measure values from the sums, and which queries count (see the module docstring)."""
    judg = stats.judgments
    has_rel = judg.n_rel > 0
    counted = has_rel if judg.contract.empty == "skip" else np.ones(len(has_rel), dtype=bool)
    names = tuple(s.name for s in stats.specs)
    values = np.column_stack([_values(s, stats) for s in stats.specs]) if names else None
    per_query: dict[str, dict[str, float]] = {}
    mean = dict.fromkeys(names, float("nan"))
    if values is not None:
        rows = np.flatnonzero(counted)
        for i, row in zip(rows.tolist(), values[rows].tolist(), strict=True):
            per_query[judg.qids[i]] = dict(zip(names, row, strict=True))
        if len(rows):
            mean = dict(zip(names, values[rows].mean(axis=0).tolist(), strict=True))
    return RunScores(
        measures=names,
        per_query=per_query,
        mean=mean,
        scored=int(counted.sum()),
        skipped_no_relevant=int((~counted).sum()),
        missing_from_run=int((counted & (stats.n_ret == 0)).sum()),
        no_relevant=int((~has_rel).sum()),
        not_in_qrels=stats.not_in_qrels,
    )


def _values(spec: _Spec, stats: _Stats) -> F64:
    """One measure for every qrels query (formulas in the module docstring)."""
    n_rel = stats.judgments.n_rel
    k = spec.k or 0
    if spec.kind == "ndcg":
        return _ratio(stats.dcg[k], stats.judgments.ideal_dcg(k))
    if spec.kind == "recall":
        return _ratio(stats.rel_at[k], n_rel)
    if spec.kind == "p":
        return stats.rel_at[k] / k
    if spec.kind == "hit":
        return (stats.rel_at[k] > 0).astype(np.float64)
    if spec.kind == "judged":
        return _ratio(stats.judged_at[k], np.minimum(stats.n_ret, k))
    if spec.kind == "mrr":
        first = stats.first_rel
        reached = (first > 0) & ((first <= k) if k else True)
        return _ratio(reached.astype(np.float64), first)
    return _ratio(stats.ap_sum, n_rel)  # map


def _ratio(num: npt.NDArray[np.number], den: npt.NDArray[np.number]) -> F64:
    """num / den, 0 where den is 0 (trec_eval's convention for an empty denominator)."""
    out = np.zeros(len(num))
    np.divide(num, den, out=out, where=den > 0)
    return out


# --------------------------------------------------------------------------- entry points


def evaluate(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Sequence[RunRow]],
    measures: Sequence[str],
    contract: Contract = Contract(),
) -> RunScores:
    """Score ``run`` (``{qid: rows}``, any row order) against ``qrels``
    (``{qid: {docid: grade}}``). Raises ValueError for unknown measures, non-finite scores
    or a document listed twice for one query."""
    specs = tuple(_parse_one(name) for name in parse_measures(measures))
    judgments = _Judgments.build(QrelsTable.from_mapping(qrels), contract)
    return _score_table(RunTable.from_mapping(run), _Stats.empty(specs, judgments))


def evaluate_files(
    qrels_path: str | Path,
    run_paths: Sequence[str | Path],
    measures: Sequence[str] | str,
    contract: Contract = Contract(),
) -> dict[str, RunScores]:
    """Score run files against a qrels file: ``{str(run path as given): scores}``.

    The qrels are read once. A run is read and scored block by block (a few MB at a time)
    when its queries are written together, as tools write them; otherwise it is read whole.
    Raises :class:`formats.trec.FormatError` naming the file and line of a bad input line.
    """
    specs = tuple(_parse_one(name) for name in parse_measures(measures))
    judgments = _Judgments.build(read_qrels_table(qrels_path), contract)
    return {str(path): _score_file(path, specs, judgments) for path in run_paths}


def _score_file(path: str | Path, specs: tuple[_Spec, ...], judgments: _Judgments) -> RunScores:
    """Stream the run when each query's rows are together (as tools write runs), else read
    it whole; when the bulk reader declines the file, read it with the line parser."""
    with contextlib.suppress(NotSplit, _DuplicateDocument):
        try:
            stats = _Stats.empty(specs, judgments)
            _score_stream(iter_run_pieces(path), stats)
            return _finish(stats)
        except _Ungrouped:
            table = concat_tables(list(iter_run_pieces(path)))
            return _score_table(table, _Stats.empty(specs, judgments))
    # The line parser raises FormatError at the first bad line; when it finds none, its
    # rows are right (the bulk reader only declined an unusual layout).
    return _score_table(RunTable.from_mapping(read_run(path)), _Stats.empty(specs, judgments))


def _score_table(table: RunTable, stats: _Stats) -> RunScores:
    qmap = _qmap(table.qids, stats.judgments, np.zeros(0, dtype=np.int64))
    _score_rows(table, qmap, stats)
    return _finish(stats)


@dataclass(frozen=True)
class RankedRows:
    """Rows of a run whose ranks are final (trec_eval order, as a project stores its runs),
    typically only the rows whose document the qrels judge, and how many documents the run
    retrieved for each of its queries. ``qid_codes`` index ``qids``; ``retrieved`` is indexed
    like ``qids``. A run's unjudged rows add nothing to any measure but their number (nDCG,
    recall, precision, MRR and MAP look at judged ranks; judged@k at the count retrieved), so
    scoring these is scoring the whole run."""

    qids: tuple[str, ...]
    qid_codes: I32
    doc_keys: U64
    ranks: I64
    retrieved: I64


def evaluate_ranked(
    qrels: QrelsTable,
    runs: Mapping[str, RankedRows],
    measures: Sequence[str],
    contract: Contract = Contract(),
) -> dict[str, RunScores]:
    """Score runs given as :class:`RankedRows` against ``qrels`` (read once): the same values
    as :func:`evaluate` on the whole runs, without reading their unjudged rows. Raises
    ValueError for unknown measures or a document listed twice for one query."""
    scorer = RankedScorer(qrels, measures, contract)
    return {name: scorer.score(rows) for name, rows in runs.items()}


class RankedScorer:
    """Scores :class:`RankedRows` one run at a time against qrels read once (what
    :func:`evaluate_ranked` does for a mapping of runs)."""

    def __init__(
        self, qrels: QrelsTable, measures: Sequence[str], contract: Contract = Contract()
    ) -> None:
        self._specs = tuple(_parse_one(name) for name in parse_measures(measures))
        self._judgments = _Judgments.build(qrels, contract)

    def score(self, rows: RankedRows) -> RunScores:
        return _score_ranked(rows, _Stats.empty(self._specs, self._judgments))


def _score_ranked(rows: RankedRows, stats: _Stats) -> RunScores:
    qmap = _qmap(rows.qids, stats.judgments, np.zeros(0, dtype=np.int64))
    known = qmap >= 0
    stats.not_in_qrels = int((~known & (rows.retrieved > 0)).sum())
    stats.n_ret[qmap[known]] += rows.retrieved[known]
    if len(rows.qid_codes) and has_duplicates(rows.qid_codes, rows.doc_keys):
        raise _DuplicateDocument
    queries = qmap[rows.qid_codes]
    judged, grades = stats.judgments.index.grades_of(queries, rows.doc_keys)
    kept = np.flatnonzero(judged)
    queries, ranks, grades = queries[kept], rows.ranks[kept], grades[kept]
    order = np.lexsort((ranks, queries))
    stats.add(queries[order], ranks[order], grades[order])
    return _finish(stats)
