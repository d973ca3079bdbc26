"""The agreement dashboard over 50,000 double-judged pairs by 20 annotators (PostgreSQL).

Usage: python bench/bench_agreement_dashboard.py [--queries 500] [--per-query 100]
                                                 [--database NAME] [--output FILE]

Set-up, not timed (a fresh database, created and migrated, loaded with COPY through
`assay.db.bulk_insert`): a project of 500 queries (head / torso / tail) x 100 documents, one
pool whose every query is judged blind by two of 20 annotators (50,000 double-judged pairs,
100,000 current grades), queried in turn over twelve weeks, protocol v1 for the first half and
v2 (less noise) for the second. Around them, as a real project has: 1,000 pairs a third
annotator graded too, 2,000 answers later changed (the earlier row superseded), 500 unsure or
skipped answers, a gold check per annotator (left out of agreement), and 10 runs of the
queries' top 20 for the noise floor.

Measured in one child process, through the real URLs with Django's test Client, signed in as
the lead (nothing cached: a fresh process and an empty cache):

- the first render of ``/p/<slug>/agreement/`` (every number on the page: 10,000 resamples for
  the headline, 1,000 for each breakdown row), then the same page again (cached);
- the noise-floor partial, a filtered view (two annotators), the API with pair intervals;
- the pieces of the first render: reading the current answers, and the statistics.

Peak memory: the child's maximum resident set size (kernel), its growth over the first render,
and, in a second child, tracemalloc's peak of Python allocations during the first render.

The peer, in the same child: the same statistics by scikit-learn's ``cohen_kappa_score`` in
Python loops (four kappas of the headline, every breakdown row, every cell of the matrix of
people and every person against the others; the bootstrap resamples timed on 100 of them per
row and scaled to the counts the page uses).
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
import uuid
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.database import fresh_database, psql
from bench.machine import describe

REPO = Path(__file__).resolve().parents[1]
DATABASE = "assay_dash"
ANNOTATORS = 20
WEEKS = 12
STRATA = ("head", "torso", "tail")
RUNS = 10
RUN_DEPTH = 20
PEER_SAMPLE = 100  # resamples the scikit-learn loop is timed on, per row


def _grade(truth: int, bias: float, noise: float, rng: object) -> int:
    import numpy as np

    assert isinstance(rng, np.random.Generator)
    value = truth + bias + rng.normal(0, noise)
    return int(min(3, max(0, round(value))))


def setup(queries: int, per_query: int) -> None:
    """Runs in a child: the judged project, through COPY."""
    import django

    django.setup()
    import numpy as np
    from django.contrib.auth.models import User
    from django.db import transaction

    from annotation.models import Document, ProtocolVersion, Query, Role
    from annotation.services import membership_set, project_create
    from assay.db import bulk_insert
    from judging.models import Claim, Judgment, WorkItem, WorkUnit
    from pooling.models import Pair, Pool, PoolItem, Run, RunResult

    rng = np.random.default_rng(16)
    start = datetime.datetime(2026, 9, 7, 9, tzinfo=datetime.UTC)
    span = datetime.timedelta(weeks=WEEKS)
    with transaction.atomic():
        project = project_create(slug="agree", name="Agreement bench")
        lead = User.objects.create(username="lead")
        membership_set(project=project, user=lead, role=Role.LEAD)
        people = [User.objects.create(username=f"judge{i:02d}") for i in range(ANNOTATORS)]
        for person in people:
            membership_set(project=project, user=person, role=Role.ANNOTATOR)
        versions = [
            ProtocolVersion.objects.create(project=project, number=n, text=f"protocol v{n}")
            for n in (1, 2)
        ]
        pairs_total = queries * per_query
        docs = ((project.pk, f"D{d}", "", f"text of document {d}") for d in range(pairs_total))
        bulk_insert(Document, ["project_id", "docid", "title", "text"], docs)
        rows = ((project.pk, f"Q{q:04d}", f"query {q}", "", STRATA[q % 3]) for q in range(queries))
        bulk_insert(Query, ["project_id", "qid", "text", "description", "stratum"], rows)
        doc_ids = list(project.documents.order_by("pk").values_list("pk", flat=True))
        query_ids = list(project.queries.order_by("pk").values_list("pk", flat=True))
        keys = [(query_ids[i // per_query], doc_ids[i]) for i in range(pairs_total)]
        bulk_insert(Pair, ["query_id", "document_id"], keys)
        pair_of = {
            (q, d): pk for q, d, pk in Pair.objects.values_list("query_id", "document_id", "pk")
        }
        pair_ids = [pair_of[key] for key in keys]
        pool = Pool.objects.create(project=project, depth=100, seed=1, selected=pairs_total)
        items = ((pool.pk, pk, '{"r0": 1}', 1, n) for n, pk in enumerate(pair_ids))
        bulk_insert(PoolItem, ["pool_id", "pair_id", "provenance", "best_rank", "position"], items)
        units = ((pool.pk, query_ids[q], q, STRATA[q % 3], 2, 2) for q in range(queries))
        columns = ["pool_id", "query_id", "position", "stratum", "judges_needed", "claims_taken"]
        bulk_insert(WorkUnit, columns, units)
        unit_of = dict(WorkUnit.objects.filter(pool=pool).values_list("query_id", "pk"))
        work = ((unit_of[keys[n][0]], pk, n) for n, pk in enumerate(pair_ids))
        bulk_insert(WorkItem, ["unit_id", "pair_id", "position"], work)

        # Who judges what, and what they say: a per-pair truth, per-person bias and noise.
        truth = rng.choice(4, size=pairs_total, p=[0.55, 0.22, 0.14, 0.09])
        bias = rng.normal(0, 0.25, size=ANNOTATORS)
        noise = rng.uniform(0.35, 0.8, size=ANNOTATORS)
        noise[3] = 1.6  # one careless annotator, to be flagged
        judges = [tuple(rng.choice(ANNOTATORS, size=3, replace=False)) for _ in range(queries)]
        claims: list[tuple[Any, ...]] = []
        judgments: list[tuple[Any, ...]] = []
        now = start + span
        for q in range(queries):
            began = start + span * q / queries
            version = versions[0] if q < queries // 2 else versions[1]
            calmer = 1.0 if version.number == 1 else 0.7
            holders = judges[q][:2] if q % 50 else judges[q]  # every 50th query: a third grader
            for k, person in enumerate(holders):
                claims.append(
                    (pool.pk, unit_of[query_ids[q]], people[person].pk, "done", began, now, now)
                )
                for j in range(per_query):
                    i = q * per_query + j
                    at = began + datetime.timedelta(hours=6 * k, seconds=12 * j)
                    grade = _grade(truth[i], bias[person], noise[person] * calmer, rng)
                    seconds = float(rng.gamma(3.0, 4.0))
                    if rng.random() < 0.02:  # changed mind: an earlier answer, superseded
                        early = at - datetime.timedelta(seconds=5)
                        judgments.append(
                            (
                                pair_ids[i],
                                people[person].pk,
                                "grade",
                                (grade + 1) % 4,
                                version.pk,
                                3.0,
                                early,
                            )
                        )
                    judgments.append(
                        (pair_ids[i], people[person].pk, "grade", grade, version.pk, seconds, at)
                    )
        for n in range(500):  # unsure or skipped answers of a person who holds no place
            i = int(rng.integers(pairs_total))
            outsider = next(p for p in range(ANNOTATORS) if p not in judges[i // per_query])
            kind = "unsure" if n % 2 else "skip"
            at = start + span * (i // per_query) / queries + datetime.timedelta(hours=12)
            judgments.append(
                (pair_ids[i], people[outsider].pk, kind, None, versions[0].pk, 20.0, at)
            )
        bulk_insert(
            Claim,
            ["pool_id", "unit_id", "user_id", "state", "claimed_at", "touched_at", "finished_at"],
            claims,
        )
        # A gold check per annotator: a unit made for them on a query they never judged.
        for p, person in enumerate(people):
            q = next(q for q in range(p, queries) if p not in judges[q])
            unit = WorkUnit.objects.create(
                pool=pool,
                query_id=query_ids[q],
                position=queries + p,
                stratum=STRATA[q % 3],
                judges_needed=1,
                claims_taken=1,
                gold_for=person,
            )
            for j in range(3):
                i = q * per_query + j
                WorkItem.objects.create(unit=unit, pair_id=pair_ids[i], position=j)
                judgments.append(
                    (pair_ids[i], person.pk, "grade", int(truth[i]), versions[1].pk, 9.0, now)
                )
        judgments.sort(key=lambda row: row[-1])  # stored in the order they were given
        columns = [
            "pair_id",
            "user_id",
            "kind",
            "grade",
            "note",
            "protocol_id",
            "seconds_spent",
            "idempotency_key",
            "created_at",
        ]
        bulk_insert(
            Judgment,
            columns,
            ((p, u, k, g, "", v, s, uuid.uuid4(), at) for p, u, k, g, v, s, at in judgments),
        )

        # Runs of the queries' top 20, better and worse, for the noise floor.
        for r in range(RUNS):
            run = Run.objects.create(project=project, name=f"system{r}")
            skill = 0.3 + 0.06 * r
            lines = []
            for q in range(queries):
                scores = truth[q * per_query : (q + 1) * per_query] * skill + rng.normal(
                    0, 1, per_query
                )
                top = np.argsort(-scores, kind="stable")[:RUN_DEPTH]
                for rank, j in enumerate(top.tolist(), start=1):
                    lines.append(
                        (run.pk, f"Q{q:04d}", f"D{q * per_query + j}", rank, float(scores[j]))
                    )
            bulk_insert(RunResult, ["run_id", "qid", "docid", "rank", "score"], lines)
        _warm_up_project(lead, people[:2])
    print(json.dumps({"judgment rows": Judgment.objects.count(), "pairs": pairs_total}))


def _warm_up_project(lead: Any, people: list[Any]) -> None:
    """A small project the measured process renders first, as a running server has rendered
    the page before: templates compiled, code paths warm. Judged through the service."""
    from annotation.models import Role
    from annotation.services import membership_set, project_create, protocol_publish
    from formats.trec import RunRow
    from judging.models import Judgment, Kind
    from judging.pools import pool_open
    from judging.services import judging_policy_set
    from pooling.models import Pair
    from pooling.services import run_create

    project = project_create(slug="warm", name="Warm-up")
    membership_set(project=project, user=lead, role=Role.LEAD)
    for d in range(5):
        project.documents.create(docid=f"w{d}", text=f"text {d}")
    ranked = {}
    for q in range(3):
        project.queries.create(qid=f"w{q}", text=f"query {q}", stratum=STRATA[q])
        ranked[f"w{q}"] = [RunRow(f"w{q}", f"w{d}", d + 1, 9.0 - d, "w") for d in range(5)]
    protocol_publish(project=project, text="grades 0-3")
    runs = [run_create(project=project, name=f"w{r}", ranked=ranked) for r in range(2)]
    judging_policy_set(project=project, claim_idle_minutes=30, double_share=1.0)
    pool_open(project=project, runs=runs, depth=5, seed=1)
    for n, pair in enumerate(Pair.objects.filter(query__project=project)):
        for k, person in enumerate(people):
            Judgment.objects.create(
                pair=pair,
                user=person,
                kind=Kind.GRADE,
                grade=(n + k * (n % 2)) % 4,
                seconds_spent=5,
            )


def _get(client: object, url: str) -> tuple[float, int, int]:
    from django.test import Client

    assert isinstance(client, Client)
    start = time.perf_counter()
    response = client.get(url)
    return time.perf_counter() - start, response.status_code, len(response.content)


def child(trace: bool) -> None:
    """Runs in the measured process: the lead's requests, first of all the page."""
    import resource
    import tracemalloc

    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.test import Client
    from django.urls import reverse

    lead = User.objects.get(username="lead")
    client = Client()
    client.force_login(lead)
    for name in ("agreement_dashboard", "agreement_noise", "api_agreement"):
        assert client.get(reverse(name, args=["warm"])).status_code == 200, name
    page = reverse("agreement_dashboard", args=["agree"])
    base_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if trace:
        tracemalloc.start()
        seconds, status, size = _get(client, page)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(json.dumps({"traced_peak_mb": peak / 2**20, "status": status}))
        return
    steps: dict[str, float] = {}
    seconds, status, size = _get(client, page)
    if status != 200:
        sys.exit(f"the page answered {status}")
    steps["page, first render (uncached)"] = seconds
    after_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    steps["page again (cached)"] = _get(client, page)[0]
    noise = reverse("agreement_noise", args=["agree"])
    steps["noise-floor partial, right after the page (labels from the cache)"] = _get(
        client, noise
    )[0]
    steps["noise-floor partial again (cached)"] = _get(client, noise)[0]
    steps["filtered view, two annotators (first)"] = _get(client, page + "?a=judge00&b=judge01")[0]
    steps["API, with 1,000-resample pair intervals (first)"] = _get(
        client, reverse("api_agreement", args=["agree"])
    )[0]
    pieces, peer = _pieces_and_peer()
    print(
        json.dumps(
            {
                "steps": steps,
                "pieces": pieces,
                "peer": peer,
                "page_bytes": size,
                "rss_mb": {
                    "before the first render": base_kib / 1024,
                    "after it": after_kib / 1024,
                    "end": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                },
            }
        )
    )


def _pieces_and_peer() -> tuple[dict[str, float], dict[str, object]]:
    """The first render's pieces, measured apart, and scikit-learn's loops on the same data."""
    from agreement import dashboard
    from agreement.double import Answers, Filters, collect, headline, people, person_pairs
    from annotation.models import Project
    from judging.answers import current_answers

    project = Project.objects.get(slug="agree")
    read = _read_pieces(project.pk)
    start = time.perf_counter()
    answers = current_answers(project_id=project.pk)
    read["current_answers, whole"] = time.perf_counter() - start
    start = time.perf_counter()
    columns = Answers.of(answers)
    to_columns = time.perf_counter() - start
    settings = dashboard.settings_of(project)

    # The build on the answers already read: what the page computes after the read.
    def already_read(
        *, project_id: int, pair_id: int | None = None, gold: bool = False
    ) -> list[Any]:
        return answers

    dashboard.current_answers = already_read
    start = time.perf_counter()
    built = dashboard._build(project, Filters(), settings, 0, None)
    statistics = time.perf_counter() - start - to_columns
    pieces = {
        **read,
        "answers to columns (Answers.of)": to_columns,
        "statistics: everything after the columns": statistics,
    }
    judged = collect(columns, Filters())
    shown = headline(judged, Filters())
    groups = [part for _, part in shown.by_stratum()] + [part for _, part in shown.by_week()]
    for version in columns.versions:
        narrowed = Filters(protocol=version)
        groups.append(headline(collect(columns, narrowed), narrowed))
    both, keys = person_pairs(judged)
    cells = [part for _, part in both.split(keys)]
    persons = [person.versus for person in people(judged, dashboard.LABELS)]
    return pieces, _peer(shown, groups, cells + persons, built)


def _read_pieces(project_id: int) -> dict[str, float]:
    """Where `current_answers` spends its time: PostgreSQL running its statement (counted
    on the server), then the rows fetched into Python tuples."""
    from django.db import connection

    from judging.answers import current_sql
    from judging.models import Kind

    params: list[Any] = [project_id, Kind.UNDO.value]
    sql = current_sql()  # every pair of the project
    with connection.cursor() as cursor:
        start = time.perf_counter()
        cursor.execute(f"SELECT count(*) FROM ({sql}) AS answers", params)
        cursor.fetchall()
        server = time.perf_counter() - start
        start = time.perf_counter()
        cursor.execute(sql, params)
        cursor.fetchall()
        fetched = time.perf_counter() - start
    return {
        "current_answers: its statement in PostgreSQL": server,
        "current_answers: the statement and its rows fetched": fetched,
    }


def _peer(shown: object, groups: list, plain: list, built: object) -> dict[str, object]:
    import numpy as np
    from sklearn.metrics import cohen_kappa_score

    def kappas(a: np.ndarray, b: np.ndarray, weighted: bool) -> None:
        cohen_kappa_score(a, b, labels=[0, 1, 2, 3])
        if weighted:
            cohen_kappa_score(a, b, labels=[0, 1, 2, 3], weights="linear")
            cohen_kappa_score(a, b, labels=[0, 1, 2, 3], weights="quadratic")
            cohen_kappa_score(a >= 1, b >= 1)

    def arrays(part: object) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        paired = part.paired()  # type: ignore[attr-defined]
        return paired.qids, paired.a, paired.b

    def resampled(part: object, resamples: int, weighted: bool) -> float:
        """Seconds for ``resamples`` query resamples, timed on PEER_SAMPLE and scaled."""
        qids, a, b = arrays(part)
        _, group = np.unique(qids, return_inverse=True)
        members = [np.flatnonzero(group == g) for g in range(group.max() + 1)]
        rng = np.random.default_rng(0)
        start = time.perf_counter()
        for _ in range(PEER_SAMPLE):
            drawn = np.concatenate(
                [members[g] for g in rng.integers(0, len(members), len(members))]
            )
            kappas(a[drawn], b[drawn], weighted)
        return (time.perf_counter() - start) * resamples / PEER_SAMPLE

    start = time.perf_counter()
    _, a, b = arrays(shown)
    kappas(a, b, True)
    for part in groups + plain:
        _, a, b = arrays(part)
        kappas(a, b, False)
    point = time.perf_counter() - start
    headline_boot = resampled(shown, 10_000, True)
    breakdown_boot = sum(resampled(part, 1_000, False) for part in groups)
    check = float(cohen_kappa_score(*arrays(shown)[1:], labels=[0, 1, 2, 3]))
    return {
        "point estimates (every row, cell and person)": point,
        "headline bootstrap, 10,000 resamples (scaled)": headline_boot,
        "breakdown bootstraps, 1,000 resamples per row (scaled)": breakdown_boot,
        "total": point + headline_boot + breakdown_boot,
        "rows": len(groups),
        "cells and people": len(plain),
        "kappa equal": abs(check - built.report.unweighted.kappa) < 1e-12,  # type: ignore[attr-defined]
    }


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
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--per-query", type=int, default=100)
    parser.add_argument("--database", default=DATABASE, help="dropped and created afresh")
    parser.add_argument("--output", type=Path)
    parser.add_argument("--keep", action="store_true", help="reuse the loaded database")
    parser.add_argument("--repeat", type=int, default=3, help="measured processes (default 3)")
    parser.add_argument("--setup", nargs=2, type=int, help=argparse.SUPPRESS)
    parser.add_argument("--child", choices=("time", "trace"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.setup:
        setup(*args.setup)
        return
    if args.child:
        child(trace=args.child == "trace")
        return
    if args.keep:
        env = dict(
            os.environ,
            DATABASE_URL=f"postgres://postgres@127.0.0.1:5432/{args.database}",
            SECRET_KEY="bench",
            DEBUG="0",
            DJANGO_SETTINGS_MODULE="assay.settings.base",
            LOG_LEVEL="WARNING",
        )
        made, setup_wall = {"pairs": args.queries * args.per_query, "judgment rows": None}, 0.0
    else:
        env = fresh_database(args.database)
        made, setup_wall, _ = run_child(["--setup", str(args.queries), str(args.per_query)], env)
        # A database in use is vacuumed and has its statistics; a fresh load has neither, and
        # autovacuum would otherwise run during the measurements.
        psql("VACUUM ANALYZE", args.database)
    env["ALLOWED_HOSTS"] = "testserver"  # Django's test Client
    # The production static storage (hashed names) needs its manifest: collect into a scratch
    # folder, as a deployment does.
    env["STATIC_ROOT"] = tempfile.mkdtemp(prefix="assay-static-")
    manage = [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"]
    subprocess.run(manage, cwd=REPO, env=env, check=True)
    results, peaks = [], []
    for _ in range(args.repeat):  # each a fresh process: an empty cache, nothing warm but Django
        result, _, peak_kib = run_child(["--child", "time"], env)
        results.append(result)
        peaks.append(peak_kib / 1024)
    traced, _, _ = run_child(["--child", "trace"], env)
    text = report(made, setup_wall, results, max(peaks), traced)
    print(text)
    if args.output:
        args.output.write_text(text)


def _table(title: str, runs: list[dict[str, float]]) -> list[str]:
    """Best and median of the runs, step by step."""
    lines = [f"| {title} | best (s) | median of {len(runs)} (s) |", "|---|---:|---:|"]
    for name in runs[0]:
        values = sorted(run[name] for run in runs)
        lines.append(f"| {name} | {values[0]:.3f} | {values[len(values) // 2]:.3f} |")
    return lines


def report(made: dict, setup_wall: float, results: list[dict], peak_mb: float, traced: dict) -> str:
    import numpy
    import sklearn

    rss = results[0]["rss_mb"]
    peer = results[0]["peer"]
    rows = made["judgment rows"]
    lines = [
        "# Agreement dashboard benchmark (`bench/bench_agreement_dashboard.py`)",
        "",
        f"Run on {datetime.date.today().isoformat()}, PostgreSQL on 127.0.0.1; "
        f"{describe(('numpy', numpy.__version__), ('scikit-learn', sklearn.__version__))}.",
        f"Project: {made['pairs']:,} double-judged pairs by {ANNOTATORS} annotators, "
        f"{f'{rows:,}' if rows else 'the loaded'} judgment rows (set up in {setup_wall:.0f} s, "
        f"not timed). {len(results)} measured processes, each new (an empty cache) and warmed "
        "on a small project's agreement page first, as a running server is.",
        "",
        *_table(
            "request (Django test Client, signed in as the lead)", [r["steps"] for r in results]
        ),
        "",
        *_table("the first render's work, measured apart after it", [r["pieces"] for r in results]),
        "",
        f"Memory (first process): maximum resident set size {rss['before the first render']:.0f} "
        f"MB before the first render, {rss['after it']:.0f} MB after it; the processes' peak "
        f"at their end (after the other requests and the peer): {peak_mb:.0f} MB. tracemalloc's "
        f"peak of Python allocations during the first render (another process): "
        f"{traced['traced_peak_mb']:.0f} MB.",
        "",
        "| the same statistics by scikit-learn `cohen_kappa_score` loops (first process) "
        "| wall (s) |",
        "|---|---:|",
        *[f"| {name} | {value:.2f} |" for name, value in peer.items() if isinstance(value, float)],
        "",
        f"({peer['rows']} breakdown rows, {peer['cells and people']} matrix cells and people; "
        f"headline kappa equal to ours: {peer['kappa equal']}.)",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
