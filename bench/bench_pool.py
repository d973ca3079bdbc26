"""Time `manage.py pool` against trectools on 10 synthetic runs × 300 queries × 1,000 docs.

Usage: python bench/bench_pool.py [--depth 100] [--repeat 3] [--output bench/results/pool.md]

The runs are written under bench/out/ (git-ignored) on first use and reused afterwards. Every
contender runs as a whole process, start-up and parsing included, as a user would run it:

* ``manage.py pool --run ... --depth 100 --format jsonl > /dev/null``;
* a Python script that imports trectools, reads the runs with ``TrecRun`` and makes the
  ``topX`` pool with ``TrecPoolMaker``.

Wall time is the best of ``--repeat`` runs; peak memory is the child's maximum resident set
size. The pooling core alone (``pool_files`` in this process, numpy already imported) is
timed too, to show how much of the command is Django start-up.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "out" / "pool"
N_RUNS, N_QUERIES, N_DOCS = 10, 300, 1000
CORPUS_SIZE = 8_841_823  # the MS MARCO passage corpus, so docids look like real ones
NEIGHBOURHOOD = 3000  # candidate documents per query that every system draws from

TRECTOOLS_SCRIPT = """
import sys
from trectools import TrecPoolMaker, TrecRun
depth, paths = int(sys.argv[1]), sys.argv[2:]
pool = TrecPoolMaker().make_pool([TrecRun(p) for p in paths], strategy="topX", topX=depth)
print(pool.get_total_pool_size(), file=sys.stderr)
"""


# --------------------------------------------------------------------------- data


def generate(out: Path, seed: int = 20190) -> list[Path]:
    """Write the synthetic runs (once) and return their paths.

    Every query has a neighbourhood of candidate documents with a latent relevance; each
    system scores them as relevance plus its own noise and returns its top 1,000, so the
    systems agree most near the top, as real ones do. Three systems print scores with two
    decimals (ties, as BM25 produces), one writes its rows shuffled within each query, and
    files break ties by docid ascending, unlike trec_eval, so file order cannot be trusted.
    """
    paths = [out / f"sys{i:02d}.run" for i in range(N_RUNS)]
    if all(path.exists() for path in paths):
        return paths
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    qids = rng.choice(np.arange(100_000, 1_200_000), N_QUERIES, replace=False)
    docids = [rng.choice(CORPUS_SIZE, NEIGHBOURHOOD, replace=False) for _ in qids]
    relevance = [rng.standard_normal(NEIGHBOURHOOD) for _ in qids]
    for i, path in enumerate(paths):
        noise = 0.4 + 0.15 * i
        decimals = 2 if i in (0, 3, 7) else 6
        shuffled = i == 5
        lines: list[str] = []
        for qid, ids, rel in zip(qids, docids, relevance, strict=True):
            scores = np.round(10 + 3 * (rel + noise * rng.standard_normal(NEIGHBOURHOOD)), decimals)
            order = np.lexsort((ids, -scores))[:N_DOCS]
            if shuffled:
                rng.shuffle(order)
            lines.extend(
                f"{qid} Q0 {ids[j]} {rank} {scores[j]:.{decimals}f} sys{i:02d}\n"
                for rank, j in enumerate(order, start=1)
            )
        path.write_text("".join(lines), encoding="ascii")
    return paths
