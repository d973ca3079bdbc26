"""Time `manage.py pool` against trectools on 10 synthetic runs × 300 queries × 1,000 docs.

Usage: python bench/bench_pool.py [--depth 100] [--repeat 3] [--output bench/results/pool.md]

The runs are written under bench/out/ (git-ignored) on first use and reused afterwards. Every
contender runs as a whole process, start-up and parsing included, as a user would run it:

* ``manage.py pool --run ... --depth 100 --format jsonl > /dev/null``;
* a Python script that imports trectools, reads the runs with ``TrecRun`` and makes the
  ``topX`` pool with ``TrecPoolMaker``.

Wall time is the best of ``--repeat`` runs, taken in turn; peak memory is the child's maximum
resident set size. ``manage.py pool --help`` measures the start-up alone, and the pooling
core (``pool_table``, its statistics and the JSON lines, in this process with numpy already
imported) the work alone.
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
sys.path.insert(0, str(REPO))  # time_core imports this checkout, not an installed copy
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


# --------------------------------------------------------------------------- timing


def run_child(command: list[str], env: dict[str, str]) -> tuple[float, float, float, str]:
    """Run one process to the end: wall seconds, CPU seconds, peak RSS (MB), its stderr."""
    start = time.perf_counter()
    child = subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    assert child.stderr is not None
    errors = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        sys.exit(f"{' '.join(command[:3])} ... failed:\n{errors}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, errors


def best_of(runs: list[tuple[float, float, float, str]]) -> tuple[float, float, float]:
    """Fastest wall time of the runs, with that run's CPU time, and the largest peak RSS."""
    wall, cpu, _, _ = min(runs)
    return wall, cpu, max(run[2] for run in runs)


def time_core(paths: list[Path], depth: int, repeat: int) -> float:
    """The pooling core alone, in this process: pool, statistics and the JSON lines."""
    from pooling.output import format_pool_jsonl
    from pooling.pooling import pool_table

    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        table = pool_table([str(path) for path in paths], depth)
        table.stats()
        for _block in format_pool_jsonl(table):
            pass
        times.append(time.perf_counter() - start)
    return min(times)


def machine() -> str:
    cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    model = next(
        (line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if "model name" in line),
        platform.processor() or "unknown CPU",
    )
    meminfo = Path("/proc/meminfo").read_text(encoding="utf-8")
    kib = int(next(line.split()[1] for line in meminfo.splitlines() if line.startswith("MemTotal")))
    return f"{model}, {os.cpu_count()} cores, {kib / 1024**2:.0f} GiB RAM"


def versions() -> str:
    from importlib.metadata import version

    found = [f"Python {platform.python_version()}"]
    found += [f"{name} {version(name)}" for name in ("Django", "numpy", "pandas", "trectools")]
    return ", ".join(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--output", type=Path, default=REPO / "bench" / "results" / "pool.md")
    args = parser.parse_args()
    paths = generate(OUT)
    relative = [str(path.relative_to(REPO)) for path in paths]
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="assay.settings.test", PYTHONWARNINGS="ignore")
    # Bytecode caching on, as in a normal installation: each contender then pays for
    # compiling its modules in the first of its runs only.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    python = sys.executable
    pool = [python, "manage.py", "pool", *(f"--run={path}" for path in relative)]
    pool += ["--depth", str(args.depth), "--format", "jsonl"]
    trectools = [python, "-c", TRECTOOLS_SCRIPT, str(args.depth), *relative]
    startup = [python, "manage.py", "pool", "--help"]
    load_before = os.getloadavg()[0]
    runs: dict[str, list[tuple[float, float, float, str]]] = {
        "pool": [],
        "trectools": [],
        "startup": [],
    }
    for _ in range(args.repeat):  # interleaved, so that both see the same machine
        runs["pool"].append(run_child(pool, env))
        runs["trectools"].append(run_child(trectools, env))
        runs["startup"].append(run_child(startup, env))
    core = time_core(paths, args.depth, args.repeat)
    load_after = os.getloadavg()[0]
    report = render(args, runs, core, (load_before, load_after))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(report, encoding="utf-8")
    print(report)


def render(
    args: argparse.Namespace,
    runs: dict[str, list[tuple[float, float, float, str]]],
    core: float,
    load: tuple[float, float],
) -> str:
    pool_wall, pool_cpu, pool_rss = best_of(runs["pool"])
    tt_wall, tt_cpu, tt_rss = best_of(runs["trectools"])
    start_wall, start_cpu, start_rss = best_of(runs["startup"])
    summary = next(line for line in runs["pool"][0][3].splitlines() if line.startswith("pool:"))
    ours = summary.rsplit(", ", 1)[-1]
    theirs = int(runs["trectools"][0][3].strip().splitlines()[-1])
    n = args.depth
    rows = [
        (f"`manage.py pool --depth {n} --format jsonl`", pool_wall, pool_cpu, f"{pool_rss:.0f}"),
        (f"trectools `TrecRun` + `TrecPoolMaker` topX={n}", tt_wall, tt_cpu, f"{tt_rss:.0f}"),
        ("`manage.py pool --help` (start-up alone)", start_wall, start_cpu, f"{start_rss:.0f}"),
        ("pooling core, in this process (pool, stats, JSON lines)", core, None, "—"),
    ]
    table = [
        f"| what | wall (s, best of {args.repeat}) | CPU (s) | peak RSS (MB) |",
        "|---|---:|---:|---:|",
    ]
    for label, wall, cpu, rss in rows:
        table.append(f"| {label} | {wall:.2f} | {'—' if cpu is None else f'{cpu:.2f}'} | {rss} |")
    return "\n".join(
        [
            "# Pooling benchmark",
            "",
            f"{N_RUNS} synthetic runs × {N_QUERIES} queries × {N_DOCS:,} documents "
            f"({N_RUNS * N_QUERIES * N_DOCS:,} lines, plain text), depth {n}. "
            "Written by `python bench/bench_pool.py`. Every command is a whole process "
            "(interpreter start-up, imports, parsing and output included), run in turn with "
            f"the others {args.repeat} times; CPU is the child's user + system time, peak RSS "
            "its maximum resident set size.",
            "",
            f"- machine: {machine()}",
            f"- software: {versions()}",
            f"- date: {datetime.date.today().isoformat()}; load average "
            f"{load[0]:.1f} before, {load[1]:.1f} after (a shared machine: compare the rows "
            "of one run with each other, not across runs)",
            "",
            *table,
            "",
            f"Speed-up of the command over trectools: **{tt_wall / pool_wall:.1f}×** wall, "
            f"{tt_cpu / pool_cpu:.1f}× CPU. Start-up (the interpreter, `manage.py`, numpy and "
            f"the command's imports) is {start_wall:.2f} s of the command's "
            f"{pool_wall:.2f} s. The in-process row is warm (numpy loaded, memory already "
            "mapped), hence below the command minus its start-up.",
            "",
            f"Pool sizes: ours {ours}, trectools {theirs:,} pairs. They differ only where "
            "scores tie at the cut-off: trectools compares double-precision scores and breaks "
            "ties by docid ascending; trec_eval (and this project) compares single-precision "
            "scores and breaks ties by docid descending.",
            "",
        ]
    )


if __name__ == "__main__":
    main()
