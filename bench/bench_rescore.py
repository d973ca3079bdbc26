"""Re-scoring every run of a project under a new release (PostgreSQL), against pytrec_eval
scoring the same runs from files.

Usage: python bench/bench_rescore.py [--runs 50] [--queries 1000] [--depth 1000]
                                     [--judged 100] [--database NAME] [--out DIR]
                                     [--output FILE] [--no-peer]

Set-up, not timed (a fresh database, created and migrated; the run lines loaded with COPY,
the table's indexes built after the load, as a restore would): a project of `--queries`
queries and `--runs` runs, each ranking `--depth` documents per query (50 runs x 1,000
queries x 1,000 = 50 million run lines), and a release of `--judged` labels per query (the
documents the runs rank highest, as a pool would select; grades 0-3). The same runs and
qrels are written as TREC files for the peers.

Timed, each in a child process of its own, from Django's start to the end:

- ours: the re-scoring job of the release (`release_rescore_start` + the job run as a worker
  runs it): for each run, its judged rows and its documents per query read by PostgreSQL,
  the eight stored measures (`evaluation.measures.evaluate_ranked`), 95 % bootstrap
  intervals (10,000 resamples), the rows stored;
- peer: pytrec_eval on the files (parse each run file, evaluate ndcg_cut.10, recall.100,
  recip_rank, map, P.10; no intervals), and our own file scorer (`evaluate_files`) on them.

The means of map, recall@100, MRR and P@10 are compared with pytrec_eval's (nDCG differs by
the gain: the stored contract's is exponential, trec_eval's linear).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.database import fresh_database, psql
from bench.machine import describe

REPO = Path(__file__).resolve().parents[1]
DATABASE = "assay_release"
CANDIDATES = 2  # documents per query the runs draw from, as a multiple of the depth

PEER = textwrap.dedent(
    """
    import json, sys, time
    import pytrec_eval
    start = time.perf_counter()
    with open(sys.argv[1]) as fh:
        qrels = pytrec_eval.parse_qrel(fh)
    names = {"recall@100": "recall_100", "mrr": "recip_rank", "map": "map", "p@10": "P_10"}
    evaluator = pytrec_eval.RelevanceEvaluator(
        qrels, {"ndcg_cut.10", "recall.100", "recip_rank", "map", "P.10"})
    means = {}
    for path in sys.argv[2:]:
        with open(path) as fh:
            run = pytrec_eval.parse_run(fh)
        result = evaluator.evaluate(run)
        means[path] = {ours: sum(v[theirs] for v in result.values()) / len(result)
                       for ours, theirs in names.items()}
    print(json.dumps({"seconds": time.perf_counter() - start, "means": means}))
    """
)


def setup(runs: int, queries: int, depth: int, judged: int, out: Path) -> None:
    """Runs in a child: the project, its runs (COPY, indexes built after), the release; and
    the same runs and qrels as files."""
    import django

    django.setup()
    import numpy as np
    from django.db import connection, transaction

    from annotation.services import project_create
    from assay.db import bulk_insert
    from evaluation.models import Release, ReleaseLabel
    from pooling.models import Run

    rng = np.random.default_rng(0)
    width = CANDIDATES * depth
    out.mkdir(parents=True, exist_ok=True)
    with transaction.atomic():
        project = project_create(slug="rescore", name="Re-scoring")
        table = "pooling_runresult"
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s"
                " AND indexname <> %s",
                [table, f"{table}_pkey"],
            )
            indexes = cursor.fetchall()
            cursor.execute(
                "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint"
                " WHERE conrelid = %s::regclass AND contype = 'u'",
                [table],
            )
            uniques = cursor.fetchall()
            for name, _ in uniques:
                cursor.execute(f"ALTER TABLE {table} DROP CONSTRAINT {name}")
            for name, _ in indexes:
                if name not in {n for n, _ in uniques}:
                    cursor.execute(f"DROP INDEX {name}")
            # The load's rows are valid by construction: skip the per-row key triggers.
            cursor.execute("SET session_replication_role = replica")
        qids = [f"Q{q}" for q in range(queries)]
        for r in range(runs):
            run = Run.objects.create(project=project, name=f"sys{r:02d}")
            keys = rng.random((queries, width))
            keys[:, :judged] -= 0.6  # the pooled documents: ranked high by most runs
            order = np.argsort(keys, axis=1)[:, :depth]
            docs = (np.arange(queries)[:, None] * width + order).tolist()
            lines = [
                f"{qids[q]} Q0 D{d} {k + 1} {depth - k}.0 {run.name}\n"
                for q, row in enumerate(docs)
                for k, d in enumerate(row)
            ]
            (out / f"{run.name}.run").write_text("".join(lines))
            with (
                connection.cursor() as cursor,
                cursor.cursor.copy(
                    f"COPY {table} (run_id, qid, docid, rank, score) FROM STDIN"
                ) as copy,
            ):
                for q, row in enumerate(docs):
                    copy.write(
                        "".join(
                            f"{run.pk}\t{qids[q]}\tD{d}\t{k + 1}\t{depth - k}.0\n"
                            for k, d in enumerate(row)
                        )
                    )
            print(f"run {r + 1} of {runs} loaded", file=sys.stderr, flush=True)
        with connection.cursor() as cursor:
            cursor.execute("SET session_replication_role = origin")
            for name, definition in uniques:
                cursor.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} {definition}")
            for name, definition in indexes:
                if name not in {n for n, _ in uniques}:
                    cursor.execute(definition)
        grades = rng.choice(4, size=(queries, judged), p=[0.5, 0.25, 0.15, 0.1])
        labels = sorted(
            (qids[q], f"D{q * width + k}", int(grades[q, k]))
            for q in range(queries)
            for k in range(judged)
        )
        release = Release.objects.create(
            project=project, number=1, policy="humans", content_hash="", pairs=len(labels)
        )
        rows = ((release.pk, q, d, "", g, "single", "[]") for q, d, g in labels)
        columns = ["release_id", "qid", "docid", "stratum", "grade", "source", "by"]
        bulk_insert(ReleaseLabel, columns, rows)
        (out / "release.qrels").write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in labels))
    print(json.dumps({"labels": len(labels), "lines": runs * queries * depth}))


def child() -> None:
    """Runs in the measured process: the re-scoring job, as a worker runs it."""
    started = time.perf_counter()
    import django

    django.setup()
    from evaluation.models import Release, RunEvaluation
    from evaluation.services_release import release_rescore_start
    from jobs.run import job_run_inline

    steps: dict[str, float] = {"Django start-up": time.perf_counter() - started}
    release = Release.objects.get(project__slug="rescore", number=1)
    start = time.perf_counter()
    job = release_rescore_start(release=release)
    job_run_inline(job.pk)
    steps["re-scoring job (every run)"] = time.perf_counter() - start
    job.refresh_from_db()
    if job.state != "done":
        sys.exit(f"the job failed: {job.error}")
    steps["total"] = time.perf_counter() - started
    means = {e.run.name: e.means for e in RunEvaluation.objects.select_related("run")}
    written = (job.result or {}).get("written")
    print(json.dumps({"steps": steps, "means": means, "written": written}))


def ours_from_files(out: Path) -> None:
    """Runs in a child: our file scorer on the same files (no intervals)."""
    started = time.perf_counter()
    from evaluation.measures import evaluate_files
    from evaluation.rescore import STORED_CONTRACT, STORED_MEASURES

    paths = sorted(out.glob("*.run"))
    evaluate_files(out / "release.qrels", paths, STORED_MEASURES, STORED_CONTRACT)
    print(json.dumps({"seconds": time.perf_counter() - started}))


def run_child(args: list[str], env: dict[str, str]) -> tuple[dict, float, float]:
    start = time.perf_counter()
    process = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
    out = process.stdout.read() if process.stdout else ""
    _, status, usage = os.wait4(process.pid, 0)
    if status != 0:
        sys.exit(f"{args[1:3]} failed")
    return json.loads(out.strip().splitlines()[-1]), time.perf_counter() - start, usage.ru_maxrss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--depth", type=int, default=1_000)
    parser.add_argument("--judged", type=int, default=100, help="labels per query")
    parser.add_argument("--database", default=DATABASE, help="dropped and created afresh")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "rescore")
    parser.add_argument("--output", type=Path)
    parser.add_argument("--no-peer", action="store_true")
    parser.add_argument("--setup", nargs=4, type=int, help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--files", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.setup:
        runs, queries, depth, judged = args.setup
        setup(runs, queries, depth, judged, args.out)
        return
    if args.child:
        child()
        return
    if args.files:
        ours_from_files(args.out)
        return
    env = fresh_database(args.database)
    me = [sys.executable, __file__]
    sizes = [str(n) for n in (args.runs, args.queries, args.depth, args.judged)]
    made, setup_wall, _ = run_child([*me, "--setup", *sizes, "--out", str(args.out)], env)
    psql("VACUUM ANALYZE", args.database)  # a database in use has its statistics
    result, wall, peak_kib = run_child([*me, "--child"], env)
    peers: dict[str, tuple[dict, float, float]] = {}
    if not args.no_peer:
        files = sorted(str(p) for p in args.out.glob("*.run"))
        qrels = str(args.out / "release.qrels")
        peers["pytrec_eval"] = run_child([sys.executable, "-c", PEER, qrels, *files], env)
        peers["ours from files"] = run_child([*me, "--files", "--out", str(args.out)], env)
    text = report(args, made, setup_wall, result, wall, peak_kib / 1024, peers)
    print(text)
    if args.output:
        args.output.write_text(text)


def agreement(result: dict, peer: dict, out: Path) -> float:
    """The largest difference between our stored means and pytrec_eval's (map, recall@100,
    MRR, P@10)."""
    worst = 0.0
    for name, means in result["means"].items():
        theirs = peer["means"][str(out / f"{name}.run")]
        worst = max(worst, *(abs(means[m] - theirs[m]) for m in theirs))
    return worst


def report(
    args: argparse.Namespace,
    made: dict,
    setup_wall: float,
    result: dict,
    wall: float,
    peak_mb: float,
    peers: dict[str, tuple[dict, float, float]],
) -> str:
    import numpy

    lines = [
        f"Run on {datetime.date.today().isoformat()}, PostgreSQL on 127.0.0.1; "
        f"{describe(('numpy', numpy.__version__))}.",
        f"{args.runs} runs x {args.queries:,} queries x depth {args.depth:,} = "
        f"{made['lines']:,} run lines in the database; a release of {made['labels']:,} labels "
        f"({args.judged} per query). Set up in {setup_wall:.0f} s (not timed).",
        "",
        "| what | wall (s) | peak RSS (MB) |",
        "|---|---:|---:|",
        *[f"| ours: {name} | {seconds:.2f} | |" for name, seconds in result["steps"].items()],
        f"| ours: the whole child process, as seen from outside | {wall:.2f} | {peak_mb:.0f} |",
    ]
    for name, (_, peer_wall, peer_kib) in peers.items():
        lines.append(
            f"| peer: {name}, every run file (process) | {peer_wall:.2f} | {peer_kib / 1024:.0f} |"
        )
    lines += [
        "",
        f"Runs scored and stored: {result['written']} (eight measures, 95 % bootstrap intervals "
        "of 10,000 resamples each, every query's values).",
    ]
    if "pytrec_eval" in peers:
        worst = agreement(result, peers["pytrec_eval"][0], args.out)
        lines.append(
            "Largest difference from pytrec_eval's means (map, recall@100, MRR, P@10): "
            f"{worst:.1e}."
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
