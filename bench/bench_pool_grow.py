"""A pool that adds 100,000 new pairs to a project holding 1,000,000 judged pairs (PostgreSQL).

Usage: python bench/bench_pool_grow.py [--old-queries 10000] [--new-queries 1000]
                                       [--database NAME] [--output FILE]

Set-up, not timed (a fresh database, created and migrated): a project of 100,000 documents and
10,000 queries (head / torso / tail) whose first pool holds 100 pairs per query, every one of
them graded (1,000,000 judged pairs, a fifth of the queries judged twice: 1.2 million judgment
rows), its work units finished. Then 1,000 newly sampled queries and four runs for them, each
ranking 50 documents per query, overlapping so that the four together pool 100 documents per
query: 100,000 new pairs.

Timed, in one child process from its start to its end: what the lead's two clicks run.

- the preview (`judging.pools.pool_plan`, scope "new": the queries no pool holds), and
- the pool build job (`pool_build_create` + the job run as a worker runs it): select, create
  the pairs and the pool items, work units and work items, double draw across pools, claims.

Wall time per step and in total (Django start-up included in the total); peak memory is the
child's maximum resident set size, measured by the kernel.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.database import fresh_database, psql
from bench.machine import describe

REPO = Path(__file__).resolve().parents[1]
DATABASE = "assay_bench_grow"
DOCUMENTS = 100_000
PER_QUERY = 100  # pairs per query, old and new
DEPTH = 50  # each new run's depth; four runs offset by 0, 17, 33, 50 pool 100 documents
OFFSETS = (0, 17, 33, 50)
STRATA = ("head", "torso", "tail")


def setup(old: int, new: int) -> None:
    """Runs in a child: the judged project and the new queries' runs, through COPY."""
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.db import transaction
    from django.db.models import F
    from django.utils import timezone

    from annotation.models import Document, Query
    from annotation.services import project_create
    from assay.db import bulk_insert
    from judging.models import Claim, Judgment, WorkItem, WorkUnit
    from pooling.models import Pair, Pool, PoolItem, Run, RunResult

    with transaction.atomic():
        project = project_create(slug="grow", name="Grow")
        first, second = User.objects.create(username="ann"), User.objects.create(username="bo")
        docs = ((project.pk, f"D{d}", "", f"text of document {d}") for d in range(DOCUMENTS))
        bulk_insert(Document, ["project_id", "docid", "title", "text"], docs)
        queries = ((project.pk, f"Q{q}", f"query {q}", "", STRATA[q % 3]) for q in range(old + new))
        bulk_insert(Query, ["project_id", "qid", "text", "description", "stratum"], queries)
        doc_ids = list(project.documents.order_by("pk").values_list("pk", flat=True))
        query_ids = list(project.queries.order_by("pk").values_list("pk", flat=True))
        # The first pool: 100 pairs per old query, all graded, its units finished.
        keys = [
            (query_ids[q], doc_ids[(q * 131 + j) % DOCUMENTS])
            for q in range(old)
            for j in range(PER_QUERY)
        ]
        bulk_insert(Pair, ["query_id", "document_id"], keys)
        pair_ids = dict(
            (((q, d), pk) for q, d, pk in Pair.objects.values_list("query_id", "document_id", "pk"))
        )
        pool = Pool.objects.create(project=project, depth=100, seed=1, selected=len(keys))
        items = ((pool.pk, pair_ids[key], '{"old": 1}', 1, n) for n, key in enumerate(keys))
        bulk_insert(PoolItem, ["pool_id", "pair_id", "provenance", "best_rank", "position"], items)
        doubles = {q for q in range(old) if q % 5 == 0}
        units = (
            (pool.pk, query_ids[q], q, STRATA[q % 3], 2 if q in doubles else 1, 0)
            for q in range(old)
        )
        columns = ["pool_id", "query_id", "position", "stratum", "judges_needed", "claims_taken"]
        bulk_insert(WorkUnit, columns, units)
        unit_ids = dict(WorkUnit.objects.filter(pool=pool).values_list("query_id", "pk"))
        work = ((unit_ids[key[0]], pair_ids[key], n) for n, key in enumerate(keys))
        bulk_insert(WorkItem, ["unit_id", "pair_id", "position"], work)
        now = timezone.now()
        claims = [
            (pool.pk, unit_ids[query_ids[q]], user.pk, "done", now, now, now)
            for q in range(old)
            for user in ((first, second) if q in doubles else (first,))
        ]
        columns = ["pool_id", "unit_id", "user_id", "state", "claimed_at", "touched_at"]
        bulk_insert(Claim, [*columns, "finished_at"], claims)
        WorkUnit.objects.filter(pool=pool).update(claims_taken=F("judges_needed"))
        judgments = (
            (pair_ids[key], user.pk, "grade", (n * 7) % 4, "", 12.0, uuid.uuid4(), now)
            for n, key in enumerate(keys)
            for user in ((first, second) if (n // PER_QUERY) in doubles else (first,))
        )
        columns = ["pair_id", "user_id", "kind", "grade", "note", "seconds_spent"]
        bulk_insert(Judgment, [*columns, "idempotency_key", "created_at"], judgments)
        # The new queries' runs.
        for k, offset in enumerate(OFFSETS):
            run = Run.objects.create(project=project, name=f"sys{k}")
            rows = (
                (run.pk, f"Q{q}", f"D{(q * 131 + offset + j) % DOCUMENTS}", j + 1, 100.0 - j)
                for q in range(old, old + new)
                for j in range(DEPTH)
            )
            bulk_insert(RunResult, ["run_id", "qid", "docid", "rank", "score"], rows)
    print(json.dumps({"judgments": Judgment.objects.count(), "pairs": Pair.objects.count()}))


def child() -> None:
    """Runs in the measured process: the preview, then the build job, as a lead's clicks."""
    started = time.perf_counter()
    import django

    django.setup()
    from annotation.models import Project
    from jobs.run import job_run_inline
    from judging.pools import pool_build_create, pool_plan
    from pooling.models import PoolScope
    from pooling.services import current_pool

    steps: dict[str, float] = {"Django start-up": time.perf_counter() - started}
    project = Project.objects.get(slug="grow")
    runs = list(project.runs.order_by("name"))
    start = time.perf_counter()
    plan = pool_plan(project=project, runs=runs, depth=DEPTH, seed=5, scope=PoolScope.NEW)
    steps["preview (pool_plan)"] = time.perf_counter() - start
    before = current_pool(project)
    start = time.perf_counter()
    job = pool_build_create(
        project=project,
        run_ids=[run.pk for run in runs],
        depth=DEPTH,
        seed=5,
        scope=PoolScope.NEW,
        after=before.pk if before else None,
        check_after=True,
    )
    job_run_inline(job.pk)
    steps["build (the pool-build job)"] = time.perf_counter() - start
    job.refresh_from_db()
    if job.state != "done":
        sys.exit(f"the build failed: {job.error}")
    pool = current_pool(project)
    assert pool is not None
    steps["total"] = time.perf_counter() - started
    counts = {
        "previewed new pairs": plan.added,
        "selected": pool.selected,
        "added": pool.added,
        "to judge": pool.to_judge,
        "work units": pool.units.count(),
        "double units": pool.units.filter(judges_needed=2).count(),
    }
    print(json.dumps({"steps": steps, "counts": counts}))


def run_child(args: list[str], env: dict[str, str]) -> tuple[dict, float, float]:
    start = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, __file__, *args], cwd=REPO, env=env, stdout=subprocess.PIPE, text=True
    )
    out = process.stdout.read() if process.stdout else ""
    _, status, usage = os.wait4(process.pid, 0)
    if status != 0:
        sys.exit(f"{args[0]} failed")
    return json.loads(out.strip().splitlines()[-1]), time.perf_counter() - start, usage.ru_maxrss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--old-queries", type=int, default=10_000)
    parser.add_argument("--new-queries", type=int, default=1_000)
    parser.add_argument("--database", default=DATABASE, help="dropped and created afresh")
    parser.add_argument("--output", type=Path)
    parser.add_argument("--setup", nargs=2, type=int, help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.setup:
        setup(*args.setup)
        return
    if args.child:
        child()
        return
    env = fresh_database(args.database)
    made, setup_wall, _ = run_child(["--setup", str(args.old_queries), str(args.new_queries)], env)
    psql("ANALYZE", args.database)  # a database in use has its statistics; a fresh load not
    result, wall, peak_kib = run_child(["--child"], env)
    text = report(made, setup_wall, result, wall, peak_kib / 1024)
    print(text)
    if args.output:
        args.output.write_text(text)


def report(made: dict, setup_wall: float, result: dict, wall: float, peak_mb: float) -> str:
    counts = result["counts"]
    lines = [
        f"Run on {datetime.date.today().isoformat()}, PostgreSQL on 127.0.0.1; {describe()}.",
        f"Project before: {made['pairs']:,} pairs, all graded, {made['judgments']:,} judgment "
        f"rows (set up in {setup_wall:.0f} s, not timed). The new pool: "
        f"{counts['selected']:,} pairs selected, {counts['added']:,} new, "
        f"{counts['to judge']:,} to judge in {counts['work units']:,} units "
        f"({counts['double units']:,} judged twice).",
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
