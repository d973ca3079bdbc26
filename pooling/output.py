"""The pool written out: as a TREC run, or as JSON lines with provenance.

Both writers assemble the text with numpy object arrays (one C loop per piece, not a Python
loop per line) from the pool's columns (:class:`pooling.pooling.PoolTable`). Pure core: no
Django import.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from json.encoder import encode_basestring_ascii as _json_string

import numpy as np
import numpy.typing as npt

from pooling.pooling import PoolTable

__all__ = ["format_pool_jsonl", "format_pool_trec"]

Ints = npt.NDArray[np.int64]


def format_pool_jsonl(table: PoolTable, batch: int = 1 << 16) -> Iterator[str]:
    """The pool as JSON lines, in blocks of up to ``batch`` lines.

    One line per entry, ``{"qid": "...", "docid": "...", "runs": {"<run name>": position}}``,
    exactly as ``json.dumps`` writes it (runs in name order), in the pool's order.
    """
    # Strings are assembled with numpy object arrays (one C loop per piece, not a Python
    # loop per line), then joined once per batch.
    heads = _objects('{"qid": ' + _json_string(qid) + ', "docid": ' for qid in table.qids)
    for low in range(0, len(table), batch):
        entries = slice(low, min(low + batch, len(table)))
        start = table.hit_start[entries.start : entries.stop + 1]
        docids = _objects(map(_json_string, table.docids[entries]))
        head = heads[table.entry_qid[entries]] + docids + ', "runs": {'
        runs = _provenance(table, slice(start[0], start[-1]), start - start[0])
        # Each entry's head, then its runs: entry i's head goes after the runs of the
        # entries before it, and each run after the heads so far.
        sizes = np.diff(start)
        pieces = np.empty(len(head) + len(runs), dtype=object)
        pieces[start[:-1] - start[0] + np.arange(len(head))] = head
        pieces[np.arange(len(runs)) + np.repeat(np.arange(len(head)), sizes) + 1] = runs
        yield "".join(pieces.tolist())


def _provenance(table: PoolTable, hits: slice, bounds: Ints) -> npt.NDArray[np.object_]:
    """``"<run name>": position`` for each hit, with the ", " before all but an entry's first
    and, after its last, the braces and the line end that close the line."""
    run, position = table.hit_run[hits], table.hit_position[hits]
    first = np.zeros(len(run), dtype=bool)
    first[bounds[:-1]] = True
    last = np.zeros(len(run), dtype=bool)
    last[bounds[1:] - 1] = True
    names = [_json_string(name) + ": " for name in table.run_names]
    variant = (~first).astype(np.intp) * 2 + last
    n_runs, depth = len(names), table.depth
    if 4 * n_runs * depth <= len(run):  # a table of every possible piece is the smaller
        pieces = _objects(
            ("" if lead else ", ") + name + str(rank) + ("}}\n" if end else "")
            for lead in (True, False)
            for end in (False, True)
            for name in names
            for rank in range(1, depth + 1)
        )
        return pieces[(variant * n_runs + run) * depth + position - 1]
    leads, ends = ("", "", ", ", ", "), ("", "}}\n", "", "}}\n")
    return _objects(
        leads[v] + names[r] + str(p) + ends[v]
        for v, r, p in zip(variant.tolist(), run.tolist(), position.tolist(), strict=True)
    )


def format_pool_trec(table: PoolTable, batch: int = 1 << 16) -> Iterator[str]:
    """The pool as a TREC run file, ``qid Q0 docid rank score pool@<depth>``, in blocks.

    One line per pooled pair, in the pool's order: ``rank`` counts 1, 2, ... within each
    query and ``score`` counts down to 1, so that every TREC tool (which orders by score)
    and ``read_run`` see the pool's order. Provenance needs the JSON lines format.
    """
    # Entries are grouped by query (the pool's order): a query's block starts after the
    # blocks of the queries before it.
    sizes = np.bincount(table.entry_qid, minlength=len(table.qids))
    firsts = np.cumsum(sizes) - sizes
    rank = np.arange(len(table)) - np.repeat(firsts, sizes) + 1
    score = np.repeat(sizes, sizes) - rank + 1
    numbers = _objects(map(str, range(int(sizes.max(initial=0)) + 1)))
    heads = _objects(f"{qid} Q0 " for qid in table.qids)
    tail = f" pool@{table.depth}\n"
    for low in range(0, len(table), batch):
        entries = slice(low, min(low + batch, len(table)))
        line = heads[table.entry_qid[entries]] + _objects(table.docids[entries]) + " "
        line += numbers[rank[entries]] + " " + numbers[score[entries]] + tail
        yield "".join(line.tolist())


def _objects(items: Iterable[str]) -> npt.NDArray[np.object_]:
    """A numpy array of Python strings, on which ``+`` concatenates element by element."""
    strings = list(items)
    array = np.empty(len(strings), dtype=object)
    array[:] = strings
    return array
