"""The per-query inspector on a 1,000-query x depth-1,000 run (PostgreSQL).

Usage: python bench/bench_inspector.py [--queries 1000] [--depth 1000] [--judged 100]
                                       [--renders 20] [--database NAME] [--output FILE] [--keep]

Set-up, not timed (a fresh database, created and migrated, loaded with COPY through
`assay.db.bulk_insert`): a project of 1,000 queries and a 100,000-document corpus (titles and
texts); one run of depth 1,000 for every query (1,000,000 result rows); a release of 100
graded labels per query (100,000 labels; about half of each query's judged documents in the
run's top 100, a quarter deeper, a quarter not retrieved); the run scored under the release
(a RunEvaluation with every query's values, which the query picker shows); a second release
of the same labels under which the run is not scored (its picker reads the release's distinct
queries from the labels).

Measured in one new process through the real URL with Django's test Client, signed in as the
lead, DEBUG off and the production static storage: one render of a query first (a running
server has rendered the page before), then ``--renders`` renders under each release, each
of another query (none read before); best and median. Then the pieces of one render,
measured apart: the reads (the picker's stored scores and release queries, the run's rows
of the query, the release's labels of the query, the titles), the pure core, the template.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.database import fresh_database, psql
from bench.machine import describe

REPO = Path(__file__).resolve().parents[1]
DATABASE = "assay_inspect"
CORPUS = 100_000
TARGET = 0.100  # seconds: the figure for one render


def setup(queries: int, depth: int, judged: int) -> None:
    """Runs in a child: the project, the run, the release and its scores, through COPY."""
    import django

    django.setup()
    import numpy as np
    from django.contrib.auth.models import User
    from django.db import transaction

    from annotation.models import Document, Query, Role
    from annotation.services import membership_set, project_create
    from assay.db import bulk_insert
    from evaluation.measures import Contract, evaluate
    from evaluation.models import Release, ReleaseLabel, RunEvaluation
    from formats.trec import RunRow
    from pooling.models import Run, RunResult

    rng = np.random.default_rng(18)
    with transaction.atomic():
        project = project_create(slug="inspect", name="Inspector bench")
        lead = User.objects.create(username="lead")
        membership_set(project=project, user=lead, role=Role.LEAD)
        docs = (
            (project.pk, f"D{d}", f"Title of document {d}", f"Text of document {d}. " * 20)
            for d in range(CORPUS)
        )
        bulk_insert(Document, ["project_id", "docid", "title", "text"], docs)
        rows = ((project.pk, f"Q{q:04d}", f"query {q}", "", "") for q in range(queries))
        bulk_insert(Query, ["project_id", "qid", "text", "description", "stratum"], rows)
        run = Run.objects.create(project=project, name="system")
        release = Release.objects.create(
            project=project, number=1, policy="humans", content_hash="0" * 64, pairs=0
        )
        results, labels = [], []
        ranked: dict[str, list[RunRow]] = {}
        qrels: dict[str, dict[str, int]] = {}
        for q in range(queries):
            qid = f"Q{q:04d}"
            docids = [f"D{d}" for d in rng.choice(CORPUS, size=depth + judged, replace=False)]
            shown = docids[:depth]
            results += [(run.pk, qid, d, r, float(depth - r)) for r, d in enumerate(shown, 1)]
            ranked[qid] = [RunRow(qid, d, r, float(depth - r), "s") for r, d in enumerate(shown, 1)]
            half, quarter = judged // 2, judged // 4
            picked = [*docids[:100][:half], *docids[100:depth][:quarter], *docids[depth:]]
            picked = list(dict.fromkeys(picked))[:judged]
            grades = rng.choice(4, size=len(picked), p=[0.5, 0.25, 0.15, 0.10])
            qrels[qid] = dict(zip(picked, grades.tolist(), strict=True))
            labels += [(release.pk, qid, d, "", g, "single", "[]") for d, g in qrels[qid].items()]
        bulk_insert(RunResult, ["run_id", "qid", "docid", "rank", "score"], results)
        columns = ["release_id", "qid", "docid", "stratum", "grade", "source", "by"]
        bulk_insert(ReleaseLabel, columns, labels)
        Release.objects.filter(pk=release.pk).update(pairs=len(labels))
        # Release 2: the same labels, the run not scored under it (the picker reads the
        # release's distinct queries from its labels).
        second = Release.objects.create(
            project=project, number=2, policy="humans", content_hash="0" * 64, pairs=len(labels)
        )
        bulk_insert(ReleaseLabel, columns, ((second.pk, *row[1:]) for row in labels))
        measures = ["ndcg@10", "recall@100", "mrr", "map", "p@10", "hit@5", "hit@10", "judged@10"]
        scores = evaluate(qrels, ranked, measures, Contract())
        RunEvaluation.objects.create(
            release=release,
            run=run,
            contract=Contract().as_dict(),
            means=scores.mean,
            per_query=scores.per_query,
            queries={
                "scored": scores.scored,
                "skipped_no_relevant": scores.skipped_no_relevant,
                "missing_from_run": scores.missing_from_run,
            },
        )
    print(json.dumps({"results": len(results), "labels": len(labels), "run": run.pk}))


def child(renders: int) -> None:
    """Runs in the measured process."""
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.test import Client
    from django.urls import reverse

    from pooling.models import Run

    client = Client()
    client.force_login(User.objects.get(username="lead"))
    run = Run.objects.get(name="system")
    first = client.get(reverse("inspector", args=["inspect", 1, run.pk]) + "?qid=Q0000")
    assert first.status_code == 200, first.status_code  # a running server has rendered it
    times: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}  # this process's CPU: less at the mercy of a busy machine
    for number in (1, 2):
        page = reverse("inspector", args=["inspect", number, run.pk])
        times[str(number)], cpu[str(number)] = [], []
        for n in range(renders):
            qid = f"Q{(n * 37 + 11 + number) % 1000:04d}"
            start, start_cpu = time.perf_counter(), time.process_time()
            response = client.get(f"{page}?qid={qid}")
            times[str(number)].append(time.perf_counter() - start)
            cpu[str(number)].append(time.process_time() - start_cpu)
            assert response.status_code == 200, (qid, response.status_code)
    pieces = _pieces(run, "Q0500")
    out = {"renders": times, "cpu": cpu, "pieces": pieces, "bytes": len(response.content)}
    print(json.dumps(out))


def _pieces(run: Any, qid: str) -> dict[str, float]:
    """One render's work, piece by piece (best of 5 each)."""
    from django.template.loader import render_to_string
    from django.test import RequestFactory

    from evaluation import services_inspect, views_inspect
    from evaluation.inspect import inspect_query
    from evaluation.models import Release, ReleaseLabel
    from pooling.models import RunResult

    release = Release.objects.get(number=1, project__slug="inspect")

    def best(action: object) -> float:
        spent = []
        for _ in range(5):
            start = time.perf_counter()
            action()  # type: ignore[operator]
            spent.append(time.perf_counter() - start)
        return min(spent)

    def ranking() -> list[str]:
        rows = RunResult.objects.filter(run=run, qid=qid).order_by("rank")
        return list(rows.values_list("docid", flat=True))

    def labels() -> dict[str, int]:
        rows = ReleaseLabel.objects.filter(release=release, qid=qid)
        return dict(rows.values_list("docid", "grade"))

    docids, grades = ranking(), labels()
    seen = inspect_query(docids, grades)
    page = services_inspect.inspection_of(release=release, run=run, qid=qid)
    stored = services_inspect._stored(release, run)
    context = {"project": release.project, "release": release, "run": run, "page": page}
    context |= views_inspect._page_context(page)
    request = RequestFactory().get("/")
    request.user = release.project.memberships.first().user  # type: ignore[union-attr]
    return {
        "picker: the stored scores (the RunEvaluation's JSON)": best(
            lambda: services_inspect._stored(release, run)
        ),
        "picker: its queries from the stored scores (as here: no query skipped)": best(
            lambda: services_inspect._choices(release, *stored)
        ),
        "picker: its queries by DISTINCT over the labels (when one was skipped)": best(
            lambda: services_inspect._choices(release, None, {})
        ),
        "the run's 1,000 rows of the query": best(ranking),
        "the release's labels of the query": best(labels),
        "titles of the shown documents": best(lambda: services_inspect._titles(release, seen)),
        "the pure core (inspect_query)": best(lambda: inspect_query(docids, grades)),
        "the template": best(
            lambda: render_to_string("evaluation/inspect_query.html", context, request)
        ),
    }


def run_child(args: list[str], env: dict[str, str]) -> tuple[dict, float]:
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, __file__, *args], cwd=REPO, env=env, stdout=subprocess.PIPE, text=True
    )
    if out.returncode != 0:
        sys.exit(f"{args[0]} failed")
    return json.loads(out.stdout.strip().splitlines()[-1]), time.perf_counter() - start


def environment(database: str) -> dict[str, str]:
    return dict(
        os.environ,
        DATABASE_URL=f"postgres://postgres@127.0.0.1:5432/{database}",
        SECRET_KEY="bench",
        DEBUG="0",
        DJANGO_SETTINGS_MODULE="assay.settings.base",
        LOG_LEVEL="WARNING",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--depth", type=int, default=1000)
    parser.add_argument("--judged", type=int, default=100, help="labels per query")
    parser.add_argument("--renders", type=int, default=20)
    parser.add_argument("--database", default=DATABASE, help="dropped and created afresh")
    parser.add_argument("--output", type=Path)
    parser.add_argument("--keep", action="store_true", help="reuse the loaded database")
    parser.add_argument("--setup", nargs=3, type=int, help=argparse.SUPPRESS)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.setup:
        setup(*args.setup)
        return
    if args.child:
        child(args.child)
        return
    made: dict[str, object] = {}
    setup_wall = 0.0
    if args.keep:
        env = environment(args.database)
    else:
        env = fresh_database(args.database)
        sizes = [str(args.queries), str(args.depth), str(args.judged)]
        made, setup_wall = run_child(["--setup", *sizes], env)
        psql("VACUUM ANALYZE", args.database)  # as a database in use is
    env["ALLOWED_HOSTS"] = "testserver"
    env["STATIC_ROOT"] = tempfile.mkdtemp(prefix="assay-static-")
    manage = [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"]
    subprocess.run(manage, cwd=REPO, env=env, check=True)
    load = os.getloadavg()[0]  # the machine may be shared: say how busy it was
    result, _ = run_child(["--child", str(args.renders)], env)
    result["load"] = load
    text = report(args, made, setup_wall, result)
    print(text)
    if args.output:
        args.output.write_text(text)


def report(args: argparse.Namespace, made: dict, setup_wall: float, result: dict) -> str:
    import django

    rows = {
        "1": "release 1, the run scored under it (the picker's queries from its stored scores)",
        "2": "release 2, the run not scored under it (the picker's queries by DISTINCT)",
    }
    lines_of = []
    for number, label in rows.items():
        times = sorted(result["renders"][number])
        best, median = times[0], times[len(times) // 2]
        cpu = sorted(result["cpu"][number])[len(times) // 2]
        lines_of.append(
            f"| {label} | {best * 1000:.1f} | {median * 1000:.1f} | {cpu * 1000:.1f} | "
            f"{TARGET * 1000:.0f} |"
        )
    loaded = (
        f"{made['results']:,} run rows and {made['labels']:,} labels a release, set up in "
        f"{setup_wall:.0f} s, not timed"
        if made
        else "loaded earlier into the kept database with `--keep`, not timed"
    )
    lines = [
        "# Inspector benchmark (`bench/bench_inspector.py`)",
        "",
        f"Run on {datetime.date.today().isoformat()}, PostgreSQL on 127.0.0.1; "
        f"{describe(('Django', django.get_version()))}.",
        f"Project: {args.queries:,} queries, one run of depth {args.depth:,}, two releases of "
        f"the same {args.judged} labels per query (the run scored under the first only), a "
        f"{CORPUS:,}-document corpus "
        f"({loaded}). One new process, DEBUG off, the production static storage; one render "
        "first (a running server has rendered the page), then each render another query. "
        f"Load average before the measurement: {result['load']:.1f} (2 cores).",
        "",
        "| request (Django test Client, signed in as the lead) | best (ms) | "
        f"median of {len(times)} (ms) | median CPU of the web process (ms) | target (ms) |",
        "|---|---:|---:|---:|---:|",
        *lines_of,
        "",
        f"Page size: {result['bytes'] / 1024:.0f} KiB (the top 100 rows, the judged rows below "
        "them, the ideal ranking, the picker of every query).",
        "",
        "| one render's pieces, measured apart (best of 5) | ms |",
        "|---|---:|",
        *[f"| {name} | {value * 1000:.2f} |" for name, value in result["pieces"].items()],
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
