"""Time the project imports on real TREC data: corpus, runs and a depth-10 pool.

Usage: python bench/bench_import.py [--database-url URL]   (default: a fresh SQLite file)

Each step runs as a whole `manage.py` process, so start-up is included, as a user sees it.
Peak memory is the maximum resident set size of the child process.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "trec-dl-2019-passage"
RUNS = ["bm25base_p", "idst_bert_p1", "TUW19-p3-f"]


def timed(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    start = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "manage.py", *args], cwd=REPO, env=env, stdout=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - start
    if status != 0:
        sys.exit(f"{args[0]} failed")
    return elapsed, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--database-url")
    args = parser.parse_args()
    if not DATA.exists():
        sys.exit(f"real TREC data not found at {DATA}")
    tmp = tempfile.mkdtemp()
    url = args.database_url or f"sqlite:///{tmp}/bench.sqlite3"
    env = dict(
        os.environ,
        DATABASE_URL=url,
        SECRET_KEY="bench",
        DEBUG="0",
        DJANGO_SETTINGS_MODULE="assay.settings.base",
    )
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=REPO, env=env, check=True)
    subprocess.run(
        [sys.executable, "manage.py", "create_project", "bench"],
        cwd=REPO,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    runs = [str(DATA / "runs" / f"{name}.judged-topics.run.gz") for name in RUNS]
    steps = [
        (
            "import_corpus (10,818 passages)",
            ["import_corpus", "bench", str(DATA / "dl2019_passages.jsonl")],
        ),
        (
            "import_queries (43 topics)",
            ["import_queries", "bench", str(DATA / "topics.dl19-passage.txt")],
        ),
        ("import_runs (3 runs, ~126k lines)", ["import_runs", "bench", *runs]),
        ("build_pool depth 10", ["build_pool", "bench", "--depth", "10", "--skip-missing"]),
    ]
    print(f"database: {url.split('@')[-1]}; python {platform.python_version()}")
    print("| step | wall (s) | peak RSS of the process (MB) |\n|---|---:|---:|")
    for label, command in steps:
        seconds, peak = timed(command, env)
        print(f"| {label} | {seconds:.2f} | {peak:.0f} |")


if __name__ == "__main__":
    main()
