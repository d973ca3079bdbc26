"""The LLM judge's labelling throughput against a local endpoint answering in 300 ms (PostgreSQL).

Usage: python bench/bench_llm_judge.py [--pairs 2000] [--concurrency 32] [--delay 0.3]
                                       [--peer 100] [--database NAME] [--output FILE]

Set-up, not timed: a fresh database (created and migrated), a project of `pairs` pairs (100
queries with descriptions, passages of ~70 words), a published protocol with four grade
definitions, an anchor and a ruling; a judge pointed at the local OpenAI-compatible server of
the tests (`tests/llm_server.py`, its own process, a keep-alive HTTP/1.1 thread per connection)
that answers every request a JSON grade after `delay` seconds. Its version is marked calibrated
so that it may label at scale.

Measured, in one child process (the embedded default: Celery eager, so the job runs there):

- ours: `llm_label_start(mode="label")`, the whole job: scope (human-only slice synced), the
  prompt rendered per pair, `concurrency` calls at once through the `openai` client, rows stored
  every 4 x concurrency answers; judgments/s over the job's wall time, per-call latency from the
  stored rows, tokens and cost per 1,000 judgments by `cost_of` at example prices;
- the peer, in the same child: what a hand-written script does, a plain loop calling the same
  endpoint with the `openai` client one pair after another and parsing each answer, on the
  first `peer` pairs (rendered by the same template).

Tokens are the test server's count (characters / 4 of the prompt and the answer), a stand-in
for a real tokenizer: the figure to read is the ratio, not the absolute count.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.database import fresh_database
from bench.machine import describe

REPO = Path(__file__).resolve().parents[1]
DATABASE = "assay_llm"
QUERIES = 100
PRICE_IN, PRICE_OUT = 2.50, 10.00  # example prices per million tokens
WORDS = [
    "the",
    "of",
    "a",
    "relevance",
    "passage",
    "query",
    "search",
    "answer",
    "system",
    "engine",
    "document",
    "users",
    "results",
    "ranking",
    "retrieval",
    "model",
    "index",
    "term",
    "evaluation",
    "judge",
    "grade",
    "protocol",
    "team",
    "set",
    "golden",
]


def passage(n: int) -> str:
    return " ".join(WORDS[(n * 7 + i * 3) % len(WORDS)] for i in range(70)) + "."


def setup(pairs: int, url: str, concurrency: int) -> dict[str, Any]:
    """A project of `pairs` pairs and a calibrated judge; returns their ids."""
    from annotation.models import Document, Query
    from annotation.protocol import Anchor, GradeDef, Protocol, Ruling, to_content
    from annotation.services import project_create, protocol_publish
    from judging.models import Calibration, JudgeSettings
    from judging.services_llm import judge_add, judge_update, judge_version_current
    from pooling.models import Pair

    project = project_create(slug="bench-llm", name="LLM judge benchmark")
    per_query = max(1, pairs // QUERIES)
    Query.objects.bulk_create(
        Query(project=project, qid=f"q{q}", text=f"how do I evaluate search question {q}",
              description=f"the searcher wants a method for case {q}", stratum="head")
        for q in range(QUERIES)
    )  # fmt: skip
    Document.objects.bulk_create(
        Document(project=project, docid=f"d{d}", title=f"Passage {d}", text=passage(d))
        for d in range(per_query * 2)
    )
    queries = list(Query.objects.filter(project=project).order_by("pk"))
    documents = list(Document.objects.filter(project=project).order_by("pk"))
    Pair.objects.bulk_create(
        Pair(query=q, document=documents[(i + j) % len(documents)])
        for i, q in enumerate(queries)
        for j in range(per_query)
    )
    protocol = Protocol(
        intro="Grade how well the passage answers the query.",
        grades=(
            GradeDef(3, "Perfectly relevant", "the passage answers the query on its own."),
            GradeDef(2, "Highly relevant", "it answers the query with extra steps."),
            GradeDef(1, "Related", "on the topic but no answer."),
            GradeDef(0, "Irrelevant", "nothing useful for this query."),
        ),
        anchors=(Anchor("evaluate search", "d1", 2, "a method, among other things."),),
        rulings=(Ruling("A passage in another language?", "Grade it as if translated."),),
    )
    protocol_publish(project=project, text="Grades 0-3.", content=to_content(protocol))
    JudgeSettings.objects.create(project=project, human_only_share=0.0)  # label every pair
    judge = judge_add(project=project, name="bench", base_url=url, model="bench-model",
                      concurrency=concurrency, timeout=10.0, max_retries=2)  # fmt: skip
    judge_update(judge=judge, price_input=PRICE_IN, price_output=PRICE_OUT)
    version = judge_version_current(judge=judge)
    Calibration.objects.create(version=version, n=200, passed=True)
    return {"judge": judge.pk, "version": version.pk, "pairs": Pair.objects.count()}


def child(pairs: int, url: str, concurrency: int, peer: int) -> dict[str, Any]:
    import django

    django.setup()
    from jobs.models import JobState
    from judging.models import JudgeVersion, LLMJudge, LLMJudgment

    made = setup(pairs, url, concurrency)
    judge = LLMJudge.objects.get(pk=made["judge"])
    version = JudgeVersion.objects.get(pk=made["version"])
    ours = measure_ours(judge, version)
    stored = LLMJudgment.objects.filter(version=version)
    checks = {
        "rows": stored.count(),
        "distinct pairs": stored.values("pair_id").distinct().count(),
        "graded": stored.filter(status="ok").count(),
        "job state": ours.pop("state"),
    }
    assert checks["job state"] == JobState.DONE, checks
    return {"made": made, "ours": ours, "checks": checks, "peer": measure_peer(version, url, peer)}


def measure_ours(judge: Any, version: Any) -> dict[str, Any]:
    from judging.models import LLMJudgment
    from judging.services_llm import cost_of, llm_label_start

    started = time.perf_counter()
    job = llm_label_start(judge=judge, mode="label")
    wall = time.perf_counter() - started
    job.refresh_from_db()
    stored = LLMJudgment.objects.filter(version=version, latency_ms__isnull=False)
    latencies = sorted(ms for ms in stored.values_list("latency_ms", flat=True) if ms is not None)
    cost = cost_of(version=version)
    labelled = job.result["labelled"] if job.result else 0
    return {
        "state": job.state,
        "wall_s": wall,
        "labelled": labelled,
        "per_s": labelled / wall,
        "p50_ms": statistics.median(latencies),
        "p95_ms": latencies[int(len(latencies) * 0.95)],
        "cost": cost,
    }


def measure_peer(version: Any, url: str, sample: int) -> dict[str, Any]:
    """A hand-written script: one call after another with the `openai` client."""
    import openai

    from annotation.protocol import from_content
    from judging.llm_prompt import GRADE_SCHEMA, document_text, parse_answer, render_messages
    from pooling.models import Pair

    protocol = from_content(version.protocol.content, version.protocol.text)
    pairs = list(Pair.objects.select_related("query", "document").order_by("pk")[:sample])
    client = openai.OpenAI(base_url=url, api_key="none", timeout=10.0)
    graded = 0
    started = time.perf_counter()
    for pair in pairs:
        messages = render_messages(
            template=version.config["template"], protocol=protocol, query=pair.query.text,
            description=pair.query.description, reasoning=False,
            document=document_text(pair.document.title, pair.document.text),
        )  # fmt: skip
        response = client.chat.completions.create(
            model="bench-model", messages=messages, temperature=0.0, response_format=GRADE_SCHEMA
        )  # type: ignore[call-overload]
        graded += parse_answer(response.choices[0].message.content).grade is not None
    wall = time.perf_counter() - started
    return {"pairs": len(pairs), "graded": graded, "wall_s": wall, "per_s": len(pairs) / wall}


def start_server(delay: float) -> tuple[subprocess.Popen[str], str]:
    server = subprocess.Popen(
        [sys.executable, str(REPO / "tests" / "llm_server.py"), "--delay", str(delay)],
        cwd=REPO, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert server.stdout is not None
    return server, server.stdout.readline().strip()


def report(args: argparse.Namespace, result: dict[str, Any]) -> str:
    import openai

    ours, peer, checks = result["ours"], result["peer"], result["checks"]
    per_1000 = ours["cost"]["per_1000"]
    target = 90.0
    return "\n".join([
        "# LLM judge benchmark (`bench/bench_llm_judge.py`)",
        "",
        f"Run on {datetime.date.today().isoformat()}, PostgreSQL on 127.0.0.1; "
        f"{describe(('openai', openai.__version__))}.",
        f"{result['made']['pairs']:,} pairs; a local OpenAI-compatible server (its own process) "
        f"answering every call after {args.delay * 1000:.0f} ms; the judge at concurrency "
        f"{args.concurrency}, Celery eager (the job runs in the measuring process).",
        "",
        "| labelling | pairs | wall (s) | judgments/s | p50 call ms | p95 call ms |",
        "|---|---:|---:|---:|---:|---:|",
        f"| ours: `llm_label_start` (the whole job, concurrency {args.concurrency}) "
        f"| {ours['labelled']:,} | {ours['wall_s']:.1f} | {ours['per_s']:.1f} "
        f"| {ours['p50_ms']:.0f} | {ours['p95_ms']:.0f} |",
        f"| peer: a plain loop with the `openai` client, one call at a time "
        f"| {peer['pairs']:,} | {peer['wall_s']:.1f} | {peer['per_s']:.2f} | | |",
        "",
        f"Ceiling at this latency: {args.concurrency} / {args.delay:g} s = "
        f"{args.concurrency / args.delay:.1f} calls/s; ours reaches "
        f"{ours['per_s'] / (args.concurrency / args.delay):.0%} of it, "
        f"{ours['per_s'] / peer['per_s']:.0f}x the plain loop.",
        "",
        "| per 1,000 judgments | value |",
        "|---|---:|",
        f"| input tokens | {per_1000['tokens_in']:,.0f} |",
        f"| output tokens | {per_1000['tokens_out']:,.0f} |",
        f"| cost at ${PRICE_IN:.2f} / ${PRICE_OUT:.2f} per million tokens in / out "
        f"| ${per_1000['cost']:.2f} |",
        "",
        "| check after the run | value |",
        "|---|---:|",
        *[f"| {name} | {value} |" for name, value in checks.items()],
        "",
        "| target | measured | |",
        "|---|---:|---|",
        f"| concurrency {args.concurrency}, {args.delay * 1000:.0f} ms endpoint: "
        f">= {target:.0f} judgments/s | {ours['per_s']:.1f}/s "
        f"| {'met' if ours['per_s'] >= target else 'missed'} |",
        "",
    ])  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--delay", type=float, default=0.3, help="the endpoint's seconds per reply")
    parser.add_argument("--peer", type=int, default=100, help="pairs the plain loop labels")
    parser.add_argument("--database", default=DATABASE, help="dropped and created afresh")
    parser.add_argument("--output", type=Path)
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        pairs, url, concurrency, peer = args.child
        print(json.dumps(child(int(pairs), url, int(concurrency), int(peer))))
        return
    env = fresh_database(args.database)
    env.pop("CELERY_BROKER_URL", None)  # the embedded default: eager
    server, url = start_server(args.delay)
    try:
        command = [sys.executable, __file__, "--child", str(args.pairs), url,
                   str(args.concurrency), str(args.peer)]  # fmt: skip
        done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
        if done.returncode:
            sys.exit(done.stderr)
        result = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        server.terminate()
        server.wait(timeout=10)
    text = report(args, result)
    print(text)
    if args.output:
        args.output.write_text(text)


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "assay.settings.base")
    main()
