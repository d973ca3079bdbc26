"""A synthetic project on disk for the judging benchmarks: corpus, queries and one run.

`queries` × `per_query` documents, each query's documents retrieved by the run in order, so a
depth-`per_query` pool holds exactly queries × per_query items.
"""

from __future__ import annotations

from pathlib import Path

WORDS = ("sync", "export", "invoice", "password", "webhook", "offline", "backup", "editor",
         "sharing", "calendar")  # fmt: skip


def write_project_files(folder: Path, queries: int, per_query: int, words_per_doc: int) -> None:
    """Write `corpus.tsv`, `queries.tsv` and `system.run` (tag `system`) into `folder`."""
    n = len(WORDS)
    with open(folder / "corpus.tsv", "w") as corpus, open(folder / "system.run", "w") as run:
        for q in range(queries):
            for d in range(per_query):
                docid = f"doc{q:05d}-{d:02d}"
                text = " ".join(WORDS[(q * 3 + d + i) % n] for i in range(words_per_doc))
                corpus.write(f"{docid}\tHow to {WORDS[d % n]} ({q})\t{text}\n")
                run.write(f"q{q:05d} Q0 {docid} {d + 1} {100 - d} system\n")
    with open(folder / "queries.tsv", "w") as out:
        for q in range(queries):
            out.write(f"q{q:05d}\t{WORDS[q % n]} {WORDS[(q * 7) % n]} help\n")
