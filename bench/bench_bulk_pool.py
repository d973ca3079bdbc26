"""Bulk-load 100,000 pool items, with their documents, into PostgreSQL through the services.

Usage: python bench/bench_bulk_pool.py [--queries 5000] [--docs-per-query 20] [--database NAME]
                                       [--output FILE]

A fresh database is created and migrated first (not timed). The files a team would bring are
written to a temporary folder (not timed): a TSV corpus with one document per pool item, a
queries file and one TREC run. Then a single child process, timed from its start to its end,
imports them with the project's own services, as `manage.py` would:

    corpus_import -> queries_import -> run_import -> pool_open (pool items + work units)

Wall time is reported per step and in total (Django start-up included in the total); peak
memory is the child's maximum resident set size, measured by the kernel.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.database import fresh_database
from bench.synthetic import write_project_files

REPO = Path(__file__).resolve().parents[1]
DATABASE = "assay_bench_pool"


def child(folder: Path) -> None:
    """Runs in the measured process: import everything, print the step timings as JSON."""
    started = time.perf_counter()
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from annotation.services import corpus_import, project_create, queries_import
    from judging.services import pool_open
    from pooling.services import run_import

    steps: dict[str, float] = {"Django start-up": time.perf_counter() - started}
    project = project_create(slug="bulk", name="Bulk")

    def step[T](name: str, work: Callable[[], T]) -> T:
        start = time.perf_counter()
        result = work()
        steps[name] = time.perf_counter() - start
        return result

    step(
        "documents (corpus_import)",
        lambda: corpus_import(project=project, path=folder / "corpus.tsv"),
    )
    step(
        "queries (queries_import)",
        lambda: queries_import(project=project, path=folder / "queries.tsv"),
    )
    run = step(
        "run lines (run_import)", lambda: run_import(project=project, path=folder / "system.run")
    )
    pool = step(
        "pool items + work units (pool_open)",
        lambda: pool_open(project=project, runs=[run], depth=DEPTH, seed=1),
    )
    steps["total"] = time.perf_counter() - started
    counts = {
        "documents": project.documents.count(),
        "pool items": pool.items.count(),
        "work units": pool.units.count(),
    }
    print(json.dumps({"steps": steps, "counts": counts}))


DEPTH = 20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--queries", type=int, default=5000)
    parser.add_argument("--docs-per-query", type=int, default=20)
    parser.add_argument("--database", default=DATABASE, help="dropped and created afresh")
    parser.add_argument("--output", type=Path)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    global DEPTH
    DEPTH = args.docs_per_query
    if args.child:
        child(args.child)
        return
    folder = Path(tempfile.mkdtemp())
    write_project_files(folder, args.queries, args.docs_per_query, words_per_doc=90)
    env = fresh_database(args.database)
    command = [sys.executable, __file__, "--child", str(folder)]
    command += ["--docs-per-query", str(args.docs_per_query)]
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
    out = process.stdout.read() if process.stdout else ""
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        sys.exit("the import failed")
    result = json.loads(out.strip().splitlines()[-1])
    text = report(result, wall, usage.ru_maxrss / 1024)
    print(text)
    if args.output:
        args.output.write_text(text)


def report(result: dict, wall: float, peak_mb: float) -> str:
    counts = result["counts"]
    lines = [
        f"Run on {datetime.date.today().isoformat()}, PostgreSQL on 127.0.0.1, Python "
        f"{platform.python_version()}: {counts['pool items']:,} pool items, "
        f"{counts['documents']:,} documents, {counts['work units']:,} work units.",
        "",
        "| step | wall (s) |",
        "|---|---:|",
        *[f"| {name} | {seconds:.2f} |" for name, seconds in result["steps"].items()],
        f"| whole child process, as seen from outside | {wall:.2f} |",
        "",
        f"Peak resident memory of the process: **{peak_mb:.0f} MB**.",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
