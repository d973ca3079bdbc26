"""Write a synthetic but realistic search log as CSV, for the query-sampling benchmark.

    python bench/gen_log.py                       # 10,000,000 lines to bench/out/log_10000000.csv
    python bench/gen_log.py --lines 100000 --seed 3 --out bench/out/small.csv

What makes it realistic enough to exercise every phase of the ingestion:

- query popularity follows a Zipf law over a universe of distinct queries (exponent 1.0 by
  default, the usual fit of web query logs), so there is a head, a torso and a long tail of
  queries asked once;
- queries come in *families* that share their first term, and a follow-up query in a session is
  often a sibling from the same family (a reformulation), more often after a bad result;
- a few percent of queries are "broken": they return zero results and rarely get a click;
- raw text varies in case and spacing, a slice of the vocabulary is non-ASCII (accents,
  ligatures and full-width forms that NFKC folds), and a handful of queries carry an e-mail
  address or a phone number;
- events are grouped into sessions (geometric length, exponential think time, occasionally a
  long pause that falls outside any reformulation window), sessions belong to users, and the
  file is ordered by timestamp so that sessions interleave, as in a real log.

Columns: ``query,timestamp,session_id,user_id,result_count,clicked`` (ISO 8601 UTC timestamps,
string ids, ``clicked`` is 0/1). The output depends only on the arguments.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

OUT = Path(__file__).resolve().parent / "out"
START = np.datetime64("2025-01-01T00:00:00", "s")
DAYS = 30
CHUNK = 1_000_000

_SYLLABLES = [
    "ka", "lo", "mi", "ne", "ru", "ta", "po", "si", "ve", "da", "qu", "zo", "fi", "ba", "tre",
    "gra", "pli", "sto", "bre", "cha", "an", "el", "on", "ur", "is",
]  # fmt: skip
# Forms that NFKC and case folding change, so that normalisation has real work to do.
_UNICODE_WORDS = [
    "café", "naïve", "straße", "ﬁlter", "ｆｕｌｌ", "Ωmega", "crème", "façade", "Ärger",
    "ｗｉｄｅ", "résumé", "ǅemal", "½price", "kilo㎏", "№5", "Σίσυφος", "москва", "東京",
]  # fmt: skip


def vocabulary(rng: np.random.Generator, size: int) -> list[str]:
    """Pseudo-words of two to four syllables, with ~3% non-ASCII forms mixed in."""
    syllables = np.array(_SYLLABLES)
    lengths = rng.integers(2, 5, size=size)
    picks = rng.integers(0, len(syllables), size=(size, 4))
    words = ["".join(syllables[picks[i, : lengths[i]]]) for i in range(size)]
    for i in np.flatnonzero(rng.random(size) < 0.03):
        words[i] = _UNICODE_WORDS[i % len(_UNICODE_WORDS)] + words[i][:3]
    return words


def query_universe(rng: np.random.Generator, distinct: int) -> tuple[list[str], np.ndarray]:
    """Distinct query strings and, for each, the family it belongs to.

    A family shares its first term; members differ by one to three further terms.
    """
    words = vocabulary(rng, max(1000, distinct // 3))
    families = max(1, distinct // 4)
    family = rng.integers(0, families, size=distinct)
    heads = rng.integers(0, len(words), size=families)
    extra = rng.integers(0, len(words), size=(distinct, 3))
    n_extra = rng.choice([0, 1, 1, 2, 2, 3], size=distinct)
    queries = []
    seen: set[str] = set()
    for i in range(distinct):
        terms = [words[heads[family[i]]], *(words[j] for j in extra[i, : n_extra[i]])]
        text = " ".join(terms)
        step = 0
        while text in seen:  # keep the universe distinct, or Zipf ranks would merge
            step += 1
            text = f"{text} {words[(i * 31 + step) % len(words)]}"
        seen.add(text)
        queries.append(text)
    return queries, family


def pii_queries(rng: np.random.Generator, count: int) -> list[str]:
    """Queries that a privacy filter must catch: e-mail addresses and phone numbers."""
    out = []
    for i in range(count):
        if i % 2:
            out.append(f"reset password user{rng.integers(10**5)}@example.com")
        else:
            out.append(f"call back +1 555 {rng.integers(100, 999)} {rng.integers(1000, 9999)}")
    return out


def zipf_ranks(rng: np.random.Generator, n: int, distinct: int, exponent: float) -> np.ndarray:
    """Draw ``n`` query ids from a Zipf law truncated to ``distinct`` ranks (inverse CDF)."""
    weights = 1.0 / np.arange(1, distinct + 1, dtype=np.float64) ** exponent
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    return np.searchsorted(cdf, rng.random(n), side="right").clip(max=distinct - 1)


def sessions(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Session id, user id and position-in-session of each of ``n`` events."""
    lengths = rng.geometric(0.4, size=n // 2 + 10)  # mean 2.5 queries per session
    ends = np.cumsum(lengths)
    count = int(np.searchsorted(ends, n, side="left")) + 1
    lengths = lengths[:count]
    session = np.repeat(np.arange(count), lengths)[:n]
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    position = np.arange(n) - np.repeat(starts, lengths)[:n]
    users = max(1, count // 3)
    user_of_session = zipf_ranks(rng, count, users, 0.6)  # some users search a lot
    return session, user_of_session[session], position


def events(rng: np.random.Generator, n: int, distinct: int, exponent: float) -> dict:
    """All columns of the log as arrays (query as an index into the universe)."""
    session, user, position = sessions(rng, n)
    popular = zipf_ranks(rng, n, distinct, exponent)
    # Popularity rank -> universe id; a permutation so that families spread over the ranks.
    query = rng.permutation(distinct)[popular]
    broken = rng.random(distinct) < 0.04
    return {
        "session": session,
        "user": user,
        "position": position,
        "query": query,
        "broken": broken,
    }


def follow_ups(rng: np.random.Generator, cols: dict, family: np.ndarray) -> None:
    """Turn some follow-up queries into reformulations: a sibling from the same family."""
    order = np.argsort(family, kind="stable")
    fam_sorted = family[order]
    first = np.searchsorted(fam_sorted, fam_sorted, side="left")
    size = np.searchsorted(fam_sorted, fam_sorted, side="right") - first
    start_of = np.empty_like(first)
    size_of = np.empty_like(size)
    start_of[order], size_of[order] = first, size
    query, position, broken = cols["query"], cols["position"], cols["broken"]
    prev = np.roll(query, 1)
    p_reform = np.where(broken[prev], 0.6, 0.2)
    reform = (position > 0) & (rng.random(len(query)) < p_reform) & (size_of[prev] > 1)
    pick = start_of[prev] + rng.integers(0, 1 << 30, size=len(query)) % size_of[prev]
    query[reform] = order[pick[reform]]


def timestamps(rng: np.random.Generator, cols: dict) -> np.ndarray:
    """Session start uniform over the period; think time exponential, sometimes a long pause."""
    session, position = cols["session"], cols["position"]
    n_sessions = int(session[-1]) + 1
    start = rng.integers(0, DAYS * 86400, size=n_sessions)
    gap = rng.exponential(40.0, size=len(session))
    gap[rng.random(len(session)) < 0.05] += 1800.0
    gap[position == 0] = 0.0
    # Cumulative think time within each session: global cumsum minus the session's offset.
    total = np.cumsum(gap)
    offset = total[np.flatnonzero(position == 0)][session]
    return start[session] + (total - offset).astype(np.int64)


def outcomes(rng: np.random.Generator, cols: dict) -> tuple[np.ndarray, np.ndarray]:
    """Result count (zero for broken queries, rarely otherwise) and click (0/1)."""
    n = len(cols["query"])
    broken = cols["broken"][cols["query"]]
    count = np.round(rng.lognormal(3.0, 1.5, size=n)).astype(np.int64)
    zero = broken | (rng.random(n) < 0.02)
    count[zero] = 0
    clicked = (rng.random(n) < np.where(broken, 0.05, 0.55)) & ~zero
    return count, clicked.astype(np.int8)


def surface_forms(rng: np.random.Generator, queries: pa.Array, ids: np.ndarray) -> pa.Array:
    """The raw text users typed: mostly as is, sometimes capitalised, upper-cased or spaced."""
    base = queries.take(pa.array(ids))
    roll = rng.random(len(ids))
    out = pc.if_else(pa.array(roll < 0.05), pc.utf8_title(base), base)
    out = pc.if_else(pa.array((roll >= 0.05) & (roll < 0.07)), pc.utf8_upper(base), out)
    spaced = pc.binary_join_element_wise(" ", pc.replace_substring(base, " ", "  "), "")
    return pc.if_else(pa.array((roll >= 0.07) & (roll < 0.09)), spaced, out)


def write_log(path: Path, n: int, seed: int, distinct: int, exponent: float) -> None:
    rng = np.random.default_rng(seed)
    queries, family = query_universe(rng, distinct)
    pii = pii_queries(rng, 200)
    queries += pii
    family = np.concatenate([family, -1 - np.arange(len(pii))])
    cols = events(rng, n, distinct, exponent)
    cols["broken"] = np.concatenate([cols["broken"], np.zeros(len(pii), dtype=bool)])
    follow_ups(rng, cols, family)
    pii_events = np.flatnonzero(rng.random(n) < 0.0005)
    cols["query"][pii_events] = distinct + rng.integers(0, len(pii), size=len(pii_events))
    ts = timestamps(rng, cols)
    count, clicked = outcomes(rng, cols)
    order = np.argsort(ts, kind="stable")  # a log is written in time order
    universe = pa.array(queries, type=pa.string())
    path.parent.mkdir(parents=True, exist_ok=True)
    with pa_csv.CSVWriter(path, _schema()) as writer:
        for lo in range(0, n, CHUNK):
            rows = order[lo : lo + CHUNK]
            writer.write_table(_chunk(rng, universe, cols, ts, count, clicked, rows))


def _schema() -> pa.Schema:
    return pa.schema(
        [
            ("query", pa.string()),
            ("timestamp", pa.string()),
            ("session_id", pa.string()),
            ("user_id", pa.string()),
            ("result_count", pa.int64()),
            ("clicked", pa.int8()),
        ]
    )


def _chunk(rng, universe, cols, ts, count, clicked, rows) -> pa.Table:
    stamp = (START + ts[rows].astype("timedelta64[s]")).astype(str)
    iso = pc.binary_join_element_wise(pa.array(stamp), "Z", "")
    return pa.Table.from_arrays(
        [
            surface_forms(rng, universe, cols["query"][rows]),
            iso,
            _ids("s", cols["session"][rows] * 7919 + 13),
            _ids("u", cols["user"][rows] * 104729 + 7),
            pa.array(count[rows]),
            pa.array(clicked[rows]),
        ],
        schema=_schema(),
    )


def _ids(prefix: str, values: np.ndarray) -> pa.Array:
    """Opaque string ids such as ``s1a2b3``, as logs carry them (hex of a scrambled number)."""
    hexed = [format(int(v), "x") for v in values]
    return pc.binary_join_element_wise(prefix, pa.array(hexed), "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=10_000_000, help="number of log lines")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--distinct", type=int, help="distinct queries (default: lines / 4)")
    parser.add_argument("--zipf", type=float, default=1.0, help="Zipf exponent of popularity")
    parser.add_argument("--out", type=Path, help="output CSV (default: bench/out/log_N.csv)")
    args = parser.parse_args()
    distinct = args.distinct or max(10, args.lines // 4)
    out = args.out or OUT / f"log_{args.lines}.csv"
    began = time.perf_counter()
    write_log(out, args.lines, args.seed, distinct, args.zipf)
    took = time.perf_counter() - began
    print(f"wrote {args.lines:,} lines to {out} in {took:.1f} s")


if __name__ == "__main__":
    main()
