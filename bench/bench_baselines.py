"""Time the built-in baselines over a 100,000-passage corpus and 300 queries, beside bm25s alone.

Usage: python bench/bench_baselines.py [--docs 100000] [--queries 300] [--repeat 2]
                                       [--database-url URL] [--output bench/results/baselines.md]

Corpus: the real MS MARCO passages of ../shared/data (the judged passages of TREC DL 2019, 2020
and 2021, about 33,000), filled up to --docs with passages recombined from their sentences
(seeded); queries: the TREC DL 2019 and 2020 test queries. Without that data, synthetic text.

Each row is a whole child process, run --repeat times in turn with the others; wall time is
the step alone (the child times it, after loading its input), peak RSS the child's maximum
resident set size (input included):

- bm25s alone: `pooling.baselines.tokenize` over the corpus, `bm25s.BM25(method="lucene")`
  `.index`, `.retrieve` top 100 for every query (its distinct terms, as the baseline asks) —
  the same tokens as the baseline, so the rows compare what is done with them;
- bm25s with its own tokenizer (`bm25s.tokenize`, English stopwords), for reference;
- `bm25_run`: the BM25 part of `run_baselines` (tokenize, index, score, top 100 in trec_eval
  order);
- `run_baselines`, pure: BM25, TF-IDF and titles-only BM25 (MS MARCO passages have no title, so
  the last retrieves nothing);
- `manage.py run_baselines --only bm25` and `manage.py run_baselines`: the command through the
  service, reading the corpus from the database and storing the runs (wall time of the whole
  process, start-up included).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
DATA = REPO.parent / "shared" / "data"
PASSAGES = [
    (DATA / "trec-dl-2019-passage" / "dl2019_passages.jsonl", "jsonl"),
    (DATA / "trec-dl-2020-passage" / "qrels_text.dl20.tsv", "tsv"),
    (DATA / "trec-dl-2021-passage" / "qrels_text.dl21.tsv", "tsv"),
]
QUERIES = [
    DATA / "trec-dl-2019-passage" / "msmarco-test2019-queries.tsv",
    DATA / "trec-dl-2020-passage" / "topics.dl20.txt",
]
SEED = 2026
K = 100
SENTENCE = re.compile(r"(?<=[.!?])\s+")

# --------------------------------------------------------------------------- input


def real_passages() -> dict[str, str]:
    passages: dict[str, str] = {}
    for path, kind in PASSAGES:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if kind == "jsonl":
                    record = json.loads(line)
                    docid, text = str(record["docid"]), record["doc"]
                else:
                    docid, _, text = line.rstrip("\n").partition("\t")
                passages.setdefault(docid, " ".join(text.split()))
    return passages


def corpus(n: int) -> tuple[list[tuple[str, str]], str]:
    """(docid, text) pairs and a line saying where they came from."""
    rng = random.Random(SEED)
    if all(path.exists() for path, _ in PASSAGES):
        real = list(real_passages().items())[:n]
        sentences = [s for _, text in real for s in SENTENCE.split(text) if s]
        made = [(f"mix{i}", " ".join(rng.choices(sentences, k=rng.randint(2, 5))))
                for i in range(n - len(real))]  # fmt: skip
        source = (f"{len(real):,} real MS MARCO passages (TREC DL 2019-2021 judged passages) "
                  f"and {len(made):,} recombined from their sentences (seed {SEED})")  # fmt: skip
        return real + made, source
    words = [f"w{i}" for i in range(50_000)]
    weights = [1 / (i + 1) for i in range(len(words))]  # Zipf-like
    docs = [(f"syn{i}", " ".join(rng.choices(words, weights, k=rng.randint(20, 90))))
            for i in range(n)]  # fmt: skip
    return docs, f"{n:,} synthetic passages (Zipfian words; the real data was not found)"


def queries(n: int) -> tuple[list[tuple[str, str]], str]:
    if all(path.exists() for path in QUERIES):
        rows: dict[str, str] = {}
        for path in QUERIES:
            for line in path.read_text("utf-8").splitlines():
                qid, _, text = line.partition("\t")
                rows.setdefault(qid, text)
        picked = list(rows.items())[:n]
        return picked, f"{len(picked)} real TREC DL 2019/2020 test queries"
    rng = random.Random(SEED + 1)
    made = [(f"q{i}", " ".join(f"w{rng.randint(0, 2000)}" for _ in range(3))) for i in range(n)]
    return made, f"{n} synthetic queries"


def write_input(folder: Path, n_docs: int, n_queries: int) -> dict[str, str]:
    docs, doc_source = corpus(n_docs)
    picked, query_source = queries(n_queries)
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as out:
        for docid, text in docs:
            out.write(json.dumps({"_id": docid, "title": "", "text": text}) + "\n")
    with open(folder / "queries.tsv", "w", encoding="utf-8") as out:
        for qid, text in picked:
            out.write(f"{qid}\t{text}\n")
    return {"corpus": doc_source, "queries": query_source}


# --------------------------------------------------------------------------- steps (children)


def load(folder: Path) -> tuple[list[Any], list[Any]]:
    from formats.beir import iter_corpus, iter_queries

    return list(iter_corpus(folder / "corpus.jsonl")), list(iter_queries(folder / "queries.tsv"))


def step_bm25s(docs: list[Any], qs: list[Any], own_tokenizer: bool) -> int:
    import bm25s

    from pooling.baselines import BM25_B, BM25_K1, tokenize

    texts = [f"{d.title}\n{d.text}" for d in docs]
    model = bm25s.BM25(method="lucene", k1=BM25_K1, b=BM25_B)
    if own_tokenizer:
        model.index(bm25s.tokenize(texts, stopwords="en", show_progress=False),
                    show_progress=False)  # fmt: skip
        asked = bm25s.tokenize([q.text for q in qs], stopwords="en", show_progress=False)
    else:
        model.index([tokenize(text) for text in texts], show_progress=False)
        asked = [sorted(set(tokenize(q.text))) for q in qs]
    found, _ = model.retrieve(asked, k=K, show_progress=False)
    return int(found.size)


def step_bm25_run(docs: list[Any], qs: list[Any]) -> int:
    from pooling.baselines import bm25_run

    full = [(d.docid, f"{d.title}\n{d.text}") for d in docs]
    return len(bm25_run(full, [(q.qid, q.text) for q in qs], k=K))


def step_all(docs: list[Any], qs: list[Any]) -> int:
    from pooling.baselines import run_baselines

    return sum(len(rows) for rows in run_baselines(docs, qs, k=K).values())


STEPS = {
    "bm25s": lambda d, q: step_bm25s(d, q, own_tokenizer=False),
    "bm25s-own-tokenizer": lambda d, q: step_bm25s(d, q, own_tokenizer=True),
    "bm25_run": step_bm25_run,
    "run_baselines": step_all,
}


def child(step: str, folder: Path) -> None:
    docs, qs = load(folder)
    start = time.perf_counter()
    rows = STEPS[step](docs, qs)
    print(json.dumps({"seconds": time.perf_counter() - start, "rows": rows}))


# --------------------------------------------------------------------------- the parent


def measure(args: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """(wall seconds, peak RSS MB, stdout) of a child process."""
    start = time.perf_counter()
    proc = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        sys.exit(f"{' '.join(args)} failed")
    return wall, usage.ru_maxrss / 1024, out


def setup_database(folder: Path, env: dict[str, str]) -> None:
    manage = [sys.executable, "manage.py"]
    quiet = {"cwd": REPO, "env": env, "check": True, "stdout": subprocess.DEVNULL}
    subprocess.run([*manage, "migrate", "-v0"], **quiet)  # type: ignore[call-overload]
    subprocess.run([*manage, "create_project", "bench"], **quiet)  # type: ignore[call-overload]
    for command, name in (("import_corpus", "corpus.jsonl"), ("import_queries", "queries.tsv")):
        subprocess.run([*manage, command, "bench", str(folder / name)], **quiet)  # type: ignore[call-overload]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--database-url")
    parser.add_argument("--output", type=Path, default=REPO / "bench" / "results" / "baselines.md")
    parser.add_argument("--step", choices=sorted(STEPS), help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.step:
        child(args.step, args.dir)
        return

    from bench.machine import describe

    folder = Path(tempfile.mkdtemp(prefix="bench-baselines-"))
    sources = write_input(folder, args.docs, args.queries)
    url = args.database_url or f"sqlite:///{folder}/bench.sqlite3"
    env = dict(os.environ, DATABASE_URL=url, SECRET_KEY="bench", DEBUG="0",
               DJANGO_SETTINGS_MODULE="assay.settings.base")  # fmt: skip
    setup_database(folder, env)
    rows: dict[str, list[tuple[float, float]]] = {}
    commands = {
        "manage.py run_baselines --only bm25": ["--only", "bm25"],
        "manage.py run_baselines (all three)": [],
        "manage.py run_baselines --help (start-up alone)": ["--help"],
    }
    load_before = os.getloadavg()[0]
    for _ in range(args.repeat):
        for step in STEPS:
            cmd = [sys.executable, __file__, "--step", step, "--dir", str(folder)]
            _, rss, out = measure(cmd, env)
            rows.setdefault(step, []).append((json.loads(out)["seconds"], rss))
        for label, extra in commands.items():
            cmd = [sys.executable, "manage.py", "run_baselines", "bench", *extra]
            wall, rss, _ = measure(cmd, env)
            rows.setdefault(label, []).append((wall, rss))
    load_after = os.getloadavg()[0]
    report = render(rows, sources, args, url, (load_before, load_after), describe)
    args.output.write_text(report, encoding="utf-8")
    print(report)


def render(
    rows: dict[str, list[tuple[float, float]]],
    sources: dict[str, str],
    args: argparse.Namespace,
    url: str,
    load: tuple[float, float],
    describe: Any,
) -> str:
    import bm25s
    import django
    import numpy
    import sklearn

    versions = (
        ("Django", django.__version__),
        ("numpy", numpy.__version__),
        ("bm25s", bm25s.__version__),
        ("scikit-learn", sklearn.__version__),
    )
    best = {name: min(t for t, _ in runs) for name, runs in rows.items()}
    peak = {name: max(m for _, m in runs) for name, runs in rows.items()}
    labels = {
        "bm25s": "bm25s alone (index + retrieve top 100; the baseline's tokens)",
        "bm25s-own-tokenizer": "bm25s alone with `bm25s.tokenize` (reference)",
        "bm25_run": "`bm25_run`: the BM25 part of `run_baselines`",
        "run_baselines": "`run_baselines`, pure: bm25 + tfidf + bm25-title",
    }
    lines = [
        "# Built-in baselines benchmark",
        "",
        f"{args.docs:,} passages and {args.queries} queries, top {K}. Written by "
        "`python bench/bench_baselines.py`. Each row is a child process, run in turn with "
        f"the others {args.repeat} times; wall is the best run (for the first four, the step "
        "alone, after loading its input; for the commands, the whole process), peak RSS the "
        "child's maximum resident set size.",
        "",
        f"- corpus: {sources['corpus']}",
        f"- queries: {sources['queries']}",
        f"- database: {url.split(':', 1)[0]}",
        "- machine: " + describe(*versions),
        f"- date: {time.strftime('%Y-%m-%d')}; load average {load[0]:.1f} before, "
        f"{load[1]:.1f} after",
        "",
        "| what | wall (s) | peak RSS (MB) |",
        "|---|---:|---:|",
    ]
    for name in rows:
        lines.append(
            f"| {labels.get(name, '`' + name + '`')} | {best[name]:.2f} | {peak[name]:.0f} |"
        )
    ratio = best["bm25_run"] / best["bm25s"]
    command = best["manage.py run_baselines --only bm25"] / best["bm25s"]
    startup = best["manage.py run_baselines --help (start-up alone)"]
    lines += [
        "",
        f"`bm25_run` / bm25s alone: **{ratio:.2f}×** (target ≤ 1.5×). The command with "
        f"`--only bm25` (start-up, reading the corpus from the database, storing the run) / "
        f"bm25s alone: {command:.2f}×; without its start-up ({startup:.2f} s): "
        f"{(best['manage.py run_baselines --only bm25'] - startup) / best['bm25s']:.2f}×.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
