"""What following an import's progress costs the reader: a generated corpus read by
`formats.beir.iter_corpus` with and without the progress hook (the Data page's import passes
one; the commands do not). Pure core, no database.

Usage: python bench/bench_read_progress.py [--docs 1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.machine import describe
from formats.beir import iter_corpus
from formats.text import ReadProgress


def write_corpus(path: Path, docs: int) -> None:
    words = [
        "retrieval",
        "evaluation",
        "golden",
        "set",
        "judged",
        "pooled",
        "protocol",
        "annotator",
    ]
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=6) as out:
        for i in range(docs):
            text = " ".join(words[(i + k) % len(words)] for k in range(60))
            out.write(json.dumps({"_id": f"d{i}", "title": f"Title {i}", "text": text}) + "\n")


def best_of(repeat: int, *reads: Callable[[], None]) -> list[float]:
    """The best time of each reader, the readers taking turns (so that a busy moment of the
    machine does not fall on one of them only)."""
    best = [float("inf")] * len(reads)
    for _ in range(repeat):
        for i, read in enumerate(reads):
            start = time.perf_counter()
            read()
            best[i] = min(best[i], time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "corpus.jsonl.gz"
        write_corpus(path, args.docs)
        calls: list[ReadProgress] = []

        def plain() -> None:
            for _ in iter_corpus(path):
                pass

        def followed() -> None:
            calls.clear()
            for _ in iter_corpus(path, on_progress=calls.append):
                pass

        without, with_hook = best_of(args.repeat, plain, followed)
        size = path.stat().st_size
    print(describe())
    print(f"{args.docs:,} documents, {size / 2**20:.0f} MiB gzip; best of {args.repeat}")
    print("| reader | wall (s) | documents/s |")
    print("|---|---:|---:|")
    for label, seconds in (("without the hook", without), ("with the hook", with_hook)):
        print(f"| {label} | {seconds:.2f} | {args.docs / seconds:,.0f} |")
    print(f"hook calls: {len(calls)}; last: {calls[-1]}")


if __name__ == "__main__":
    main()
