"""Run import and pool building for a project."""

from __future__ import annotations

import json
import random
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from django.contrib.auth.models import User
from django.db import connection, transaction
from django.db.models import Exists, OuterRef

from annotation.models import Document, Project
from assay.db import bulk_insert, max_length, placeholders, rows_for_ids
from formats.trec import FormatError, RunRow, read_run

from .models import Pair, Pool, PoolItem, PoolScope, Run, RunResult
from .pooling import PoolEntry, depth_pool

POOL_BUILD = "pool_build"  # the kind of the job that builds a pool (judging.tasks)


class PoolingError(ValueError):
    """A run or pool request that cannot be honoured; the message says what to do."""


@transaction.atomic
def run_import(
    *,
    project: Project,
    path: str | Path,
    name: str | None = None,
    user: User | None = None,
    shown: str | None = None,
) -> Run:
    """Store a TREC run file as one Run (all or nothing). ``shown`` names the file in errors
    and in the run's source when it is not the path (an upload kept under another name)."""
    run_name, ranked = run_read(path=path, name=name, shown=shown)
    source = Path(shown or path).name
    return run_create(project=project, name=run_name, ranked=ranked, source=source, user=user)


def run_read(
    *, path: str | Path, name: str | None = None, shown: str | None = None
) -> tuple[str, dict[str, list[RunRow]]]:
    """Read and check a TREC run file: the run's name (``name``, else the file's single tag)
    and its rows by query, in trec_eval order. Errors name the file as ``shown``."""
    shown = shown or str(path)
    # A longer id would fail on PostgreSQL's varchar (SQLite does not check): say which line.
    longest = min(max_length(RunResult, "qid"), max_length(RunResult, "docid"))
    try:
        ranked = read_run(path, max_id_length=longest)
    except FormatError as error:
        raise FormatError(shown, error.line, error.reason) from None
    if not ranked:
        # Even when named: an empty run is a wrong path or a failed download, never a system.
        raise PoolingError(f"{shown}: the run file is empty")
    return name or _single_tag(ranked, shown), ranked


QIDS_PER_QUERY = 500  # qids per IN list, well under SQLite's limit on bound parameters


def runs_ranked(
    *, runs: Sequence[Run], qids: Sequence[str] | None = None, depth: int | None = None
) -> dict[int, dict[str, list[RunRow]]]:
    """The stored rankings of `runs` (trec_eval order, as stored), by run id and qid: every
    query, or only `qids`; every rank, or the top `depth`."""
    names = {run.pk: run.name for run in runs}
    ranked: dict[int, dict[str, list[RunRow]]] = {pk: defaultdict(list) for pk in names}
    rows = RunResult.objects.filter(run__in=list(names)).order_by("run", "qid", "rank")
    if depth is not None:
        rows = rows.filter(rank__lte=depth)
    chunks = (
        [rows]
        if qids is None
        else [
            rows.filter(qid__in=qids[i : i + QIDS_PER_QUERY])
            for i in range(0, len(qids), QIDS_PER_QUERY)
        ]
    )
    for chunk in chunks:
        fields = chunk.values_list("run_id", "qid", "docid", "rank", "score")
        for run_id, qid, docid, rank, score in fields.iterator(chunk_size=20_000):
            ranked[run_id][qid].append(RunRow(qid, docid, rank, score, names[run_id]))
    return ranked


@transaction.atomic
def run_create(
    *,
    project: Project,
    name: str,
    ranked: dict[str, list[RunRow]],
    source: str = "",
    user: User | None = None,
) -> Run:
    """Store one system's ranked results, each query's rows in trec_eval order.

    The stored rank is the position in trec_eval order (score descending, ties by docid
    descending), not the file's rank column, so that every later measure agrees with trec_eval.
    """
    run_name_check(project=project, name=name, source=source)
    run = Run.objects.create(project=project, name=name, source=source, created_by=user)
    _store_results(run, ranked)
    return run


def run_name_check(*, project: Project, name: str, source: str = "") -> None:
    """Refuse a run name that cannot be stored: too long, or the name of a run the project
    already holds (runs are immutable). ``source`` names the file in the message."""
    longest = max_length(Run, "name")
    if len(name) > longest:
        raise PoolingError(
            f"{source or name[:40]}: the run name is {len(name)} characters long "
            f"(at most {longest}); give a shorter one"
        )
    if project.runs.filter(name=name).exists():
        raise PoolingError(
            f"{source or name}: project {project.slug!r} already has a run named {name!r}; "
            "runs are immutable, so give this one another name"
        )


def _single_tag(ranked: dict[str, list[RunRow]], path: str | Path) -> str:
    tags = {row.tag for rows in ranked.values() for row in rows}
    if len(tags) == 1:
        return tags.pop()
    listed = ", ".join(sorted(tags)[:5])
    raise PoolingError(f"{path}: the file holds several run tags ({listed}); give a name")


def _store_results(run: Run, ranked: dict[str, list[RunRow]]) -> None:
    rows = (
        (run.pk, qid, row.docid, position, row.score)
        for qid, query_rows in ranked.items()
        for position, row in enumerate(query_rows, start=1)
    )
    bulk_insert(RunResult, ["run_id", "qid", "docid", "rank", "score"], rows)


@dataclass(frozen=True)
class Selection:
    """What a pool of `runs` at `depth` selects, before anything is written: its entries (only
    documents of the corpus) and the pooled documents the corpus lacks."""

    entries: list[PoolEntry]
    query_ids: dict[str, int]  # qid -> primary key, for the selected queries
    document_ids: dict[str, int]  # docid -> primary key, for the selected documents
    missing: list[str]  # pooled docids not in the corpus, sorted

    def pair_keys(self) -> list[tuple[int, int]]:
        """(query pk, document pk) of every entry, in the order of `entries`."""
        q, d = self.query_ids, self.document_ids
        return [(q[e.qid], d[e.docid]) for e in self.entries]


def pool_select(
    *,
    project: Project,
    runs: Sequence[Run],
    depth: int,
    scope: str = PoolScope.ALL,
    skip_missing: bool = False,
) -> Selection:
    """The pairs a pool of `runs` at `depth` selects: the union of every run's top `depth`
    documents for the project's queries (with scope "new", only the queries no pool holds yet).

    Queries of the runs that the project does not hold are ignored. A pooled document that is
    not in the corpus is an error (it could not be shown to a judge) unless `skip_missing`.
    """
    if depth < 1:
        raise PoolingError("the pool depth must be at least 1")
    if not runs:
        raise PoolingError(f"project {project.slug!r} has no runs to pool; import runs first")
    queries = _queries_in_scope(project, scope)
    top, documents = _top_rows(project, runs, depth, queries.keys())
    entries = depth_pool(top, depth, qids=queries.keys())
    missing = sorted({entry.docid for entry in entries} - documents.keys())
    _check_documents(project, missing, skip_missing=skip_missing)
    entries = [e for e in entries if e.docid in documents]
    if not entries:
        raise PoolingError(_nothing_to_pool(project, top, queries.keys(), scope))
    used_docs = {e.docid for e in entries}
    used_queries = {e.qid for e in entries}
    return Selection(
        entries=entries,
        query_ids={qid: pk for qid, pk in queries.items() if qid in used_queries},
        document_ids={docid: pk for docid, pk in documents.items() if docid in used_docs},
        missing=missing,
    )


def _queries_in_scope(project: Project, scope: str) -> dict[str, int]:
    queries = project.queries.all()
    if scope == PoolScope.NEW:
        queries = queries.exclude(Exists(PoolItem.objects.filter(pair__query=OuterRef("pk"))))
    elif scope != PoolScope.ALL:
        raise PoolingError(f"the pool's queries must be {' or '.join(PoolScope.values)}")
    return dict(queries.values_list("qid", "pk"))


@transaction.atomic
def pool_create(
    *,
    project: Project,
    runs: Sequence[Run],
    selection: Selection,
    depth: int,
    seed: int,
    scope: str = PoolScope.ALL,
    user: User | None = None,
    known: dict[tuple[int, int], int] | None = None,
) -> tuple[Pool, dict[tuple[int, int], int]]:
    """Store the selection as a pool: a pair for every (query, document) no pool held yet, and
    an item per selected pair in the seeded display order (see `display_order`).

    Returns the pool and (query pk, document pk) -> pair pk for every selected pair. Nothing
    else changes: the judgments of pairs selected again stay theirs. `known`: the pairs of the
    selection's queries, when the caller has just read them (`existing_pairs`).
    """
    pool = Pool.objects.create(
        project=project, depth=depth, seed=seed, scope=scope, created_by=user
    )
    pool.runs.set(runs)
    pairs = pairs_for(selection.pair_keys(), known)
    q, d = selection.query_ids, selection.document_ids
    provenance = _ProvenanceText()
    rows = (
        (
            pool.pk,
            pairs[(q[entry.qid], d[entry.docid])],
            provenance(entry.runs),
            min(entry.runs.values()),
            position,
        )
        for position, entry in enumerate(display_order(selection.entries, seed))
    )
    bulk_insert(PoolItem, ["pool_id", "pair_id", "provenance", "best_rank", "position"], rows)
    return pool, pairs


def pairs_for(
    keys: Sequence[tuple[int, int]], known: dict[tuple[int, int], int] | None = None
) -> dict[tuple[int, int], int]:
    """(query pk, document pk) -> pair pk for every key, creating the pairs that are missing."""
    pairs = existing_pairs({query for query, _ in keys}) if known is None else known
    new = sorted(set(keys) - pairs.keys())
    if new:
        bulk_insert(Pair, ["query_id", "document_id"], new)
        pairs = existing_pairs({query for query, _ in new}) | pairs
    return pairs


def existing_pairs(query_ids: Iterable[int]) -> dict[tuple[int, int], int]:
    """(query pk, document pk) -> pair pk of every pair of the given queries."""
    sql = "SELECT query_id, document_id, id FROM pooling_pair WHERE query_id IN ({ids})"
    return {(q, d): pk for q, d, pk in rows_for_ids(sql, query_ids)}


def new_seed() -> int:
    return random.SystemRandom().randrange(2**31)


def current_pool(project: Project) -> Pool | None:
    """The pool annotators work on: the project's most recent one."""
    return project.pools.order_by("-created_at", "-pk").first()


class _ProvenanceText:
    """Provenance as JSON text, serialised once per distinct value.

    A pool has few distinct provenances (which runs, at which ranks), so a 100,000-item pool
    would otherwise spend most of its Python time in json.dumps.
    """

    def __init__(self) -> None:
        self._seen: dict[tuple[tuple[str, int], ...], str] = {}

    def __call__(self, runs: Mapping[str, int]) -> str:
        key = tuple(runs.items())
        text = self._seen.get(key)
        if text is None:
            text = self._seen[key] = json.dumps(dict(key))
        return text


def _top_rows(
    project: Project, runs: Sequence[Run], depth: int, qids: Iterable[str]
) -> tuple[dict[str, dict[str, list[RunRow]]], dict[str, int]]:
    """The runs' top `depth` lines of the wanted queries, and docid -> primary key of the
    project's documents among them, read together in one statement.

    Stored ranks are trec_eval positions, so `rank <= depth` is exactly each run's top `depth`.
    """
    wanted = set(qids)
    names = {run.pk: run.name for run in runs}
    by_run: dict[str, dict[str, list[RunRow]]] = {run.name: defaultdict(list) for run in runs}
    documents: dict[str, int] = {}
    document = connection.ops.quote_name(Document._meta.db_table)
    result = connection.ops.quote_name(RunResult._meta.db_table)
    sql = (
        f"SELECT r.run_id, r.qid, r.docid, r.rank, r.score, d.id FROM {result} AS r "
        f"LEFT JOIN {document} AS d ON d.project_id = %s AND d.docid = r.docid "
        f"WHERE r.run_id IN ({placeholders(len(runs))}) AND r.rank <= %s "
        "ORDER BY r.run_id, r.qid, r.rank"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [project.pk, *names, depth])
        for run_id, qid, docid, rank, score, document_id in cursor.fetchall():
            if qid in wanted:
                name = names[run_id]
                by_run[name][qid].append(RunRow(qid, docid, rank, score, name))
                if document_id is not None:
                    documents[docid] = document_id
    return {name: dict(per_query) for name, per_query in by_run.items()}, documents


def _check_documents(project: Project, missing: Sequence[str], *, skip_missing: bool) -> None:
    if missing and not skip_missing:
        examples = ", ".join(missing[:5])
        raise PoolingError(
            f"{len(missing)} pooled documents are not in the corpus of {project.slug!r} "
            f"(e.g. {examples}); import the documents first, or leave them out (the pool "
            'form\'s "leave out" option, build_pool --skip-missing)'
        )


def _nothing_to_pool(
    project: Project, top: Mapping[str, Mapping[str, object]], qids: Iterable[str], scope: str
) -> str:
    held = sorted(qids)
    if not held and scope == PoolScope.NEW:
        return f"every query of {project.slug!r} is in a pool already: no new query to pool"
    if not held:
        return f"project {project.slug!r} has no queries to pool; import queries first"
    pooled = sorted({qid for per_query in top.values() for qid in per_query})
    if pooled:
        return "every pooled document is missing from the corpus; nothing is left to judge"
    # Often the same queries under other ids (a prefix, another numbering): show both sides.
    return (
        f"none of the runs' queries is a query of {project.slug!r} "
        f"(project queries: {', '.join(held[:5])}); check the query ids of the runs"
    )


def display_order(entries: Sequence[PoolEntry], seed: int) -> list[PoolEntry]:
    """Queries in a seeded random order, then each query's documents in random order.

    Judges see one query's documents together (reading the query once), but neither the order
    of queries nor of documents reveals which system retrieved what at which rank.
    """
    rng = random.Random(seed)
    by_query: dict[str, list[PoolEntry]] = defaultdict(list)
    for entry in entries:
        by_query[entry.qid].append(entry)
    qids = sorted(by_query)
    rng.shuffle(qids)
    ordered: list[PoolEntry] = []
    for qid in qids:
        docs = sorted(by_query[qid], key=lambda e: e.docid)
        rng.shuffle(docs)
        ordered.extend(docs)
    return ordered


def pool_entries(pool: Pool) -> list[PoolEntry]:
    """The pool's items as pure records, for statistics."""
    rows = pool.items.values_list("pair__query__qid", "pair__document__docid", "provenance")
    return [PoolEntry(qid, docid, prov) for qid, docid, prov in rows.iterator(chunk_size=5000)]
