"""Write a large synthetic TREC run and its qrels, deterministically, for the evaluate benchmark.

    python bench/gen_run.py [OUT_DIR] [--queries 10000] [--depth 1000] [--seed 13]

writes ``OUT_DIR/run.txt`` (``qid Q0 docid rank score tag``, 10 million lines by default, about
350 MB) and ``OUT_DIR/qrels.txt`` (``qid 0 docid grade``). The default OUT_DIR is
``bench/out/evaluate`` (git ignores ``bench/out``).

What makes it look like a real run rather than noise:

* docids are MS MARCO passage ids (0 to 8,841,822) and qids MS MARCO-like query ids;
* each query has 10 to 40 judged documents with grades 0-3 in the proportions of the TREC DL
  2019 passage qrels (56% 0, 17% 1, 20% 2, 7% 3); about 60% of the judged documents were
  retrieved by the run, placed towards the top, the rest were missed (recall below 1);
* 2% of the queries have no relevant document at all (every judgment is 0), which is what
  ``--empty skip|zero`` is about;
* scores decrease with rank and are printed with 3 decimals, so neighbouring documents often tie
  and the file's order of a tie is not trec_eval's (docid descending): the evaluator must re-sort.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

COLLECTION = 8_841_823  # passages in MS MARCO v1
GRADE_P = (0.56, 0.17, 0.20, 0.07)


def _run_docs(rng: np.random.Generator, n_queries: int, depth: int) -> np.ndarray:
    """(n_queries, depth) distinct docids per row; duplicates are redrawn row by row."""
    docs = rng.integers(0, COLLECTION, size=(n_queries, depth))
    srt = np.sort(docs, axis=1)
    for q in np.flatnonzero((srt[:, 1:] == srt[:, :-1]).any(axis=1)):
        docs[q] = rng.choice(COLLECTION, size=depth, replace=False)
    return docs


def _scores(rng: np.random.Generator, n_queries: int, depth: int) -> np.ndarray:
    """Scores falling with rank, rounded to 3 decimals (ties), rows sorted descending."""
    base = rng.uniform(8.0, 25.0, size=(n_queries, 1))
    decay = 6.0 * np.exp(-np.arange(depth) / 150.0)
    noise = rng.normal(0.0, 0.02, size=(n_queries, depth))
    raw = base + decay + noise
    return np.round(-np.sort(-raw, axis=1), 3)


def _judged(rng: np.random.Generator, docs: np.ndarray, no_rel: bool) -> list[tuple[int, int]]:
    """(docid, grade) pairs for one query: ~60% from the run (biased to the top), ~40% missed."""
    depth = docs.shape[0]
    n = int(rng.integers(10, 41))
    in_run = round(n * 0.6)
    positions = np.unique(np.minimum(rng.geometric(1 / 25, size=in_run) - 1, depth - 1))
    chosen = [int(d) for d in docs[positions]]
    retrieved = set(int(d) for d in docs)
    while len(chosen) < n:
        d = int(rng.integers(0, COLLECTION))
        if d not in retrieved and d not in chosen:
            chosen.append(d)
    grades = np.zeros(len(chosen), dtype=int) if no_rel else rng.choice(4, len(chosen), p=GRADE_P)
    return list(zip(chosen, (int(g) for g in grades), strict=True))


def generate(out: Path, n_queries: int, depth: int, seed: int) -> tuple[Path, Path]:
    rng = np.random.default_rng(seed)
    qids = np.sort(rng.choice(np.arange(100_000, 1_200_000), size=n_queries, replace=False))
    docs = _run_docs(rng, n_queries, depth)
    scores = _scores(rng, n_queries, depth)
    no_rel = rng.random(n_queries) < 0.02
    out.mkdir(parents=True, exist_ok=True)
    run_path, qrels_path = out / "run.txt", out / "qrels.txt"
    with open(run_path, "w", encoding="ascii") as fh:
        for q in range(n_queries):
            qid = int(qids[q])
            lines = [
                f"{qid} Q0 {d} {r} {s:.3f} synth\n"
                for r, (d, s) in enumerate(
                    zip(docs[q].tolist(), scores[q].tolist(), strict=True), start=1
                )
            ]
            fh.write("".join(lines))
    with open(qrels_path, "w", encoding="ascii") as fh:
        for q in range(n_queries):
            pairs = _judged(rng, docs[q], bool(no_rel[q]))
            fh.write("".join(f"{int(qids[q])} 0 {d} {g}\n" for d, g in pairs))
    return run_path, qrels_path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?", default=str(Path(__file__).parent / "out" / "evaluate"))
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--depth", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args()
    run_path, qrels_path = generate(Path(args.out), args.queries, args.depth, args.seed)
    print(f"{run_path} ({run_path.stat().st_size / 1e6:.0f} MB)")
    print(f"{qrels_path} ({qrels_path.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
