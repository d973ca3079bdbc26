"""Query sampling from search logs: ingestion, signals, strata, privacy, draws.

Worked examples state their arithmetic in the test; random logs are checked against a
plain-Python reference implementation of the documented definitions.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sampling.core import (
    ColumnMap,
    DefinitionError,
    EngineSettings,
    FailureRule,
    LogError,
    LogStats,
    Normalisation,
    QueryStats,
    StrataDefinition,
    StratumName,
    inclusion_probabilities,
    ingest_log,
    load_stats,
    normalise_query,
    parse_quotas,
    pii_screen,
    rank_frequency_points,
    sample_queries,
    stratify,
    systematic_pps,
)
from sampling.sql import SCREEN_UDF, register_screen
from tests.sampling_reference import similar

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
AQL = DATA / "aql-examples" / "serps.jsonl"
HEADER = ("query", "timestamp", "session_id", "user_id", "result_count", "clicked")
Row = Mapping[str, Any]


# --------------------------------------------------------------------------- helpers


def row(
    query: str | None,
    timestamp: Any = None,
    session: str | None = None,
    user: str | None = None,
    results: Any = None,
    clicked: Any = None,
) -> dict[str, Any]:
    return dict(zip(HEADER, (query, timestamp, session, user, results, clicked), strict=True))


def csv_text(rows: Iterable[Row], delimiter: str = ",", header: Sequence[str] = HEADER) -> str:
    out = io.StringIO()
    writer = csv.writer(out, delimiter=delimiter, lineterminator="\n")
    writer.writerow(header)
    for r in rows:
        writer.writerow(["" if r.get(name) is None else r[name] for name in header])
    return out.getvalue()


def write_log(tmp_path: Path, rows: Iterable[Row], name: str = "log.csv", **kwargs: Any) -> Path:
    path = tmp_path / name
    path.write_text(csv_text(rows, **kwargs), encoding="utf-8")
    return path


def by_query(stats: LogStats) -> dict[str, QueryStats]:
    return {record.query: record for record in stats.records()}


def ingest(path: Path, **kwargs: Any) -> LogStats:
    kwargs.setdefault("engine", EngineSettings(memory_limit="200MB", threads=2))
    return ingest_log(path, **kwargs)


def stats_of(records: Sequence[tuple[str, int]], **rates: Sequence[float]) -> LogStats:
    """Statistics built by hand: (query, frequency) pairs and optional rate columns."""
    n = len(records)

    def column(name: str) -> list[float | None]:
        return list(rates.get(name, [math.nan] * n))

    built = [
        QueryStats(
            query=q,
            frequency=f,
            sessions=None,
            users=None,
            zero_result_rate=_none(column("zero_result_rate")[i]),
            reformulation_rate=_none(column("reformulation_rate")[i]),
            abandonment_rate=_none(column("abandonment_rate")[i]),
        )
        for i, (q, f) in enumerate(records)
    ]
    return LogStats.from_records(built)


def _none(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else value


# --------------------------------------------------------------------------- reference


def reference(rows: Sequence[Row], window: float = 300.0, pii: str = "exclude") -> dict[str, dict]:
    """The documented definitions, implemented directly on Python rows."""
    events = []
    for r in rows:
        if r["query"] is None or not normalise_query(r["query"]):
            continue
        norm = normalise_query(r["query"])
        kind, masked = pii_screen(norm)
        events.append({**r, "key": masked if kind else norm, "kind": kind})
    flags = _sequence_flags(events, window)
    out: dict[str, dict] = {}
    for index, e in enumerate(events):
        s = out.setdefault(e["key"], defaultdict(int, sessions=set(), users=set(), kinds=set()))
        s["n"] += 1
        s["kinds"].add(e["kind"])
        if e["result_count"] is not None:
            s["rc_n"] += 1
            s["zero"] += e["result_count"] == 0
        if e["session_id"]:
            s["sessions"].add(e["session_id"])
        if e["user_id"]:
            s["users"].add(e["user_id"])
        if index in flags:
            s["seq"] += 1
            s["reform"] += flags[index][0]
            s["aband"] += flags[index][1]
    return {
        key: _reference_row(s)
        for key, s in out.items()
        if not (pii == "exclude" and s["kinds"] - {None})
    }


def _sequence_flags(events: list[dict], window: float) -> dict[int, tuple[bool, bool]]:
    sessions: dict[str, list[int]] = defaultdict(list)
    for index, e in enumerate(events):
        if e["session_id"] and e["timestamp"] is not None:
            sessions[e["session_id"]].append(index)
    flags = {}
    for members in sessions.values():
        members.sort(key=lambda i: (events[i]["timestamp"], events[i]["key"]))
        clicks = [events[i]["timestamp"] for i in members if events[i]["clicked"]]
        last_click = max(clicks) if clicks else None
        for position, i in enumerate(members):
            reform = False
            if position + 1 < len(members):
                nxt = events[members[position + 1]]
                gap = nxt["timestamp"] - events[i]["timestamp"]
                reform = (
                    0 < gap <= window
                    and nxt["key"] != events[i]["key"]
                    and similar(events[i]["key"], nxt["key"])
                )
            abandoned = last_click is None or last_click < events[i]["timestamp"]
            flags[i] = (reform, abandoned)
    return flags


def _reference_row(s: dict) -> dict:
    return {
        "frequency": s["n"],
        "sessions": len(s["sessions"]),
        "users": len(s["users"]),
        "zero_result_rate": s["zero"] / s["rc_n"] if s["rc_n"] else None,
        "reformulation_rate": s["reform"] / s["seq"] if s["seq"] else None,
        "abandonment_rate": s["aband"] / s["seq"] if s["seq"] else None,
    }


def as_dicts(stats: LogStats) -> dict[str, dict]:
    return {
        r.query: {
            "frequency": r.frequency,
            "sessions": r.sessions,
            "users": r.users,
            "zero_result_rate": r.zero_result_rate,
            "reformulation_rate": r.reformulation_rate,
            "abandonment_rate": r.abandonment_rate,
        }
        for r in stats.records()
    }


def assert_same_stats(got: dict[str, dict], expected: dict[str, dict]) -> None:
    assert got.keys() == expected.keys()
    for key in expected:
        for name, value in expected[key].items():
            if isinstance(value, float):
                assert got[key][name] == pytest.approx(value), (key, name)
            else:
                assert got[key][name] == value, (key, name)


# --------------------------------------------------------------------------- normalisation


def test_it_normalises_with_nfkc_case_folding_and_whitespace() -> None:
    assert normalise_query("  Straße\u00a0\tＣＡＦＥ  ﬁlter ") == "strasse cafe filter"
    assert normalise_query("Foo  Bar", Normalisation(casefold=False)) == "Foo Bar"
    assert normalise_query("ＦＯＯ", Normalisation(nfkc=False)) == "ｆｏｏ"
    assert normalise_query(" a  b ", Normalisation(collapse_whitespace=False)) == " a  b "


def screener(rule: Normalisation | None = None) -> duckdb.DuckDBPyConnection:
    """A connection with the screening function ingestion registers (normalise, then screen)."""
    con = duckdb.connect()
    register_screen(con, rule or Normalisation())
    return con


def in_duckdb(con: duckdb.DuckDBPyConnection, texts: list[str]) -> list[tuple[Any, ...]]:
    """(norm, pii, query) of each text, as DuckDB gets them from the registered function."""
    con.execute(
        "CREATE OR REPLACE TEMP TABLE t AS SELECT unnest(?) AS x, generate_subscripts(?, 1) AS i",
        [texts, texts],
    )
    return [
        tuple(r)
        for r in con.execute(
            f"SELECT s.norm, s.pii, s.query FROM (SELECT i, {SCREEN_UDF}(x) AS s FROM t) ORDER BY i"
        ).fetchall()
    ]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(codec="utf-8"), max_size=30), max_size=8))
def test_it_normalises_a_vector_in_duckdb_as_each_text_alone(texts: list[str]) -> None:
    got = [norm for norm, _, _ in in_duckdb(screener(), texts)]
    assert got == [normalise_query(text) for text in texts]


# Mostly ASCII (every control character and all of ASCII's whitespace included), with some
# characters that NFKC or case folding change and some Unicode whitespace, and strings
# mixing them.
_MIXED_TEXT = st.text(
    alphabet=st.one_of(
        st.characters(max_codepoint=0x7F),
        st.sampled_from(["\u00a0", "\u2003", "\u0085", "\u3000", "ß", "ﬁ", "Ａ", "É", "İ", "ǅ"]),
    ),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(
    text=_MIXED_TEXT,
    rule=st.builds(Normalisation, st.booleans(), st.booleans(), st.booleans()),
)
def test_it_normalises_mixed_ascii_and_unicode_alike_in_duckdb_and_alone(
    text: str, rule: Normalisation
) -> None:
    ((got, _, _),) = in_duckdb(screener(rule), [text])
    assert got == normalise_query(text, rule)


_PII_TEXT = st.lists(
    st.sampled_from([*"0123456789 -.()/+@=:?&;abcmoptwx[]", "://", "token=", "1234 "]),
    max_size=30,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=_PII_TEXT)
def test_it_screens_random_text_alike_in_duckdb_and_alone(text: str) -> None:
    ((_, got_kind, got_masked),) = in_duckdb(screener(Normalisation(False, False, False)), [text])
    kind, masked = pii_screen(text)
    assert got_kind == kind
    assert got_masked == masked


@pytest.mark.parametrize(
    ("text", "kind", "masked"),
    [
        ("reset password john.doe@example.com", "email", "reset password [email]"),
        ("call +1 555 123 4567 now", "phone", "call [phone] now"),
        ("support 555-123-4567", "phone", "support [phone]"),
        ("(030) 1234 5678", "phone", "[phone]"),
        ("card 4111 1111 1111 1111", "card", "card [card]"),
        ("amex 3782 822463 10005", "card", "amex [card]"),
        ("order 123456789012", "digits", "order [number]"),
        ("https://bob:hunter2@example.com/x", "url_credentials", "[url]"),
        ("login?token=abc123", "url_credentials", "login[url]"),
        ("nba 2019 2020 season", None, "nba 2019 2020 season"),
        ("iphone 15 pro 256gb", None, "iphone 15 pro 256gb"),
        ("2024-01-15 schedule", None, "2024-01-15 schedule"),
        ("zip 10115 berlin", None, "zip 10115 berlin"),
    ],
)
def test_it_screens_personal_data_alike_in_duckdb_and_alone(
    text: str, kind: str | None, masked: str
) -> None:
    assert pii_screen(text) == (kind, masked)
    ((_, got_kind, got_masked),) = in_duckdb(screener(Normalisation(False, False, False)), [text])
    assert (got_kind, got_masked) == (kind, masked)


# --------------------------------------------------------------------------- strata


def test_it_cuts_strata_by_share_of_traffic_keeping_ties_together() -> None:
    # Frequencies a10 b6 c6 d3 e2 f1 g1 h1: 30 searches. Cuts at 50% and 80% of traffic are
    # 15 and 24 searches. Cumulative traffic at the end of each tie group: a 10 (<= 15:
    # head), {b, c} 22 (b alone would end at 16 > 15, but ties move together; 22 <= 24:
    # torso), d 25 (> 24: tail), e 27, {f, g, h} 30: tail.
    stats = stats_of(
        [("a", 10), ("b", 6), ("c", 6), ("d", 3), ("e", 2), ("f", 1), ("g", 1), ("h", 1)]
    )
    strata = stratify(stats, StrataDefinition(head_share=0.5, torso_share=0.8))
    labels = dict(zip(stats.query, strata.labels, strict=True))
    assert labels == {
        "a": "head",
        "b": "torso",
        "c": "torso",
        **dict.fromkeys("defgh", "tail"),
    }
    table = {row.name: (row.queries, row.traffic, row.share) for row in strata.summary}
    assert table == {
        "head": (1, 10, pytest.approx(10 / 30)),
        "torso": (2, 12, pytest.approx(12 / 30)),
        "tail": (5, 8, pytest.approx(8 / 30)),
        "failures": (0, 0, 0.0),
    }
    assert strata.cut_ranks == (1, 3)
    assert strata.warnings == ()


def test_it_defaults_to_thirds_of_traffic() -> None:
    # 60 searches: thirds end at 20 and 40. a 20 -> head; b 12 ends at 32 -> torso; c 8
    # ends at 40 -> torso; the 20 singletons end at 60 -> tail.
    singles = [(f"q{i:02d}", 1) for i in range(20)]
    stats = stats_of([("a", 20), ("b", 12), ("c", 8), *singles])
    strata = stratify(stats, StrataDefinition())
    assert [row.queries for row in strata.summary] == [1, 2, 20, 0]


def test_it_takes_known_failures_out_of_their_traffic_stratum() -> None:
    # Same log as the cut example. b (torso) has half its searches reformulated, d (tail)
    # a 0.6 zero-result rate: both are known failures. f fails on every signal but was
    # searched once, below the minimum support of 2; e's abandonment 0.7 is under 0.8.
    records = [("a", 10), ("b", 6), ("c", 6), ("d", 3), ("e", 2), ("f", 1), ("g", 1), ("h", 1)]
    nan = math.nan
    stats = stats_of(
        records,
        zero_result_rate=[0.1, 0.0, 0.0, 0.6, 0.0, 1.0, nan, 0.0],
        reformulation_rate=[0.0, 0.5, 0.1, 0.0, 0.0, 1.0, nan, 0.0],
        abandonment_rate=[0.2, 0.3, 0.3, 0.3, 0.7, 1.0, nan, 0.0],
    )
    definition = StrataDefinition(head_share=0.5, torso_share=0.8)
    strata = stratify(stats, definition)
    labels = dict(zip(stats.query, strata.labels, strict=True))
    assert [q for q, label in labels.items() if label == "failures"] == ["b", "d"]
    assert labels["f"] == "tail" and labels["e"] == "tail"
    assert dict(zip(stats.query, strata.traffic_labels, strict=True))["b"] == "torso"
    failures = strata.stratum("failures")
    assert (failures.queries, failures.traffic) == (2, 9)
    # Thresholds are configurable: with abandonment >= 0.7 and support 1, e and f fail too.
    looser = StrataDefinition(
        head_share=0.5,
        torso_share=0.8,
        failures=FailureRule(abandonment_rate=0.7, min_frequency=1),
    )
    assert stratify(stats, looser).stratum("failures").queries == 4
    off = StrataDefinition(failures=FailureRule(None, None, None))
    assert stratify(stats, off).stratum("failures").queries == 0


def test_it_puts_the_most_frequent_query_in_the_head_whatever_its_share() -> None:
    # a6 b1 c1: 8 searches, thirds end at 8/3 = 2.67 and 16/3 = 5.33. a alone ends at 6,
    # past both cuts; by the end of its tie group it would be tail, leaving the head empty.
    # The most frequent tie group is always head. {b, c} ends at 8 > 5.33: tail. No group
    # ends between the cuts: the torso is empty, and a warning says so.
    stats = stats_of([("a", 6), ("b", 1), ("c", 1)])
    strata = stratify(stats, StrataDefinition())
    labels = dict(zip(stats.query, strata.labels, strict=True))
    assert labels == {"a": "head", "b": "tail", "c": "tail"}
    assert strata.cut_ranks == (1, 1)
    assert [row.queries for row in strata.summary] == [1, 0, 2, 0]
    assert strata.warnings == (
        "the torso stratum is empty with cut points at 33.3% and 66.7% of traffic "
        "(queries of equal frequency are never split across a cut): its quota draws nothing",
    )


def test_it_still_keeps_the_tail_share_when_the_top_query_is_large() -> None:
    # a6 b5 c1: 12 searches, cuts at 4 and 8. a: head (the most frequent). b ends at 11 > 8:
    # tail, so that the tail keeps at least a third of traffic (b and c: 6 of 12; c alone
    # would be 1 of 12).
    stats = stats_of([("a", 6), ("b", 5), ("c", 1)])
    labels = dict(zip(stats.query, stratify(stats, StrataDefinition()).labels, strict=True))
    assert labels == {"a": "head", "b": "tail", "c": "tail"}
    # With no head asked for (head_share 0) there is none: cuts at 0 and 6, a ends at 6 <= 6
    # and is torso.
    none = stratify(stats, StrataDefinition(head_share=0.0, torso_share=0.5))
    assert dict(zip(stats.query, none.labels, strict=True))["a"] == "torso"
    assert "the head stratum is empty" in none.warnings[0]


def test_it_puts_every_query_in_the_tail_when_all_are_unique() -> None:
    stats = stats_of([(f"q{i}", 1) for i in range(50)])
    strata = stratify(stats, StrataDefinition())
    assert set(strata.labels) == {"tail"}
    assert strata.cut_ranks == (0, 0)
    assert "flat" in strata.warnings[0]


def test_it_gives_rank_frequency_points_on_a_log_grid() -> None:
    ranked = np.arange(100_000, 0, -1)
    points = rank_frequency_points(ranked, max_points=50)
    ranks = [rank for rank, _ in points]
    assert ranks[0] == 1 and ranks[-1] == 100_000 and len(points) <= 50
    assert all(freq == ranked[rank - 1] for rank, freq in points)
    ratios = np.diff(np.log(ranks))
    assert ratios.max() < 3 * ratios[ratios > 0].min() + 0.5  # roughly even in log space
    assert rank_frequency_points(np.array([], dtype=np.int64)) == ()


def test_it_round_trips_the_strata_definition_through_json() -> None:
    definition = StrataDefinition(
        head_share=0.4,
        torso_share=0.75,
        failures=FailureRule(zero_result_rate=None, min_frequency=3),
        normalisation=Normalisation(casefold=False),
        reformulation_window=120.0,
        pii="mask",
    )
    text = definition.to_json()
    assert json.loads(text)["version"] == 1
    assert StrataDefinition.from_json(text) == definition
    assert StrataDefinition.from_dict({}) == StrataDefinition()


@pytest.mark.parametrize(
    "text",
    [
        '{"head_share": 0.9, "torso_share": 0.5}',
        '{"version": 2}',
        '{"colour": "blue"}',
        '{"failures": {"zero_result_rate": 2}}',
        '{"reformulation_window": 0}',
        '{"pii": "keep"}',
        "[1, 2]",
        "not json",
    ],
)
def test_it_rejects_an_invalid_strata_definition(text: str) -> None:
    with pytest.raises(DefinitionError):
        StrataDefinition.from_json(text)


# --------------------------------------------------------------------------- sampling


def population(**sizes: int) -> LogStats:
    """Head, torso and tail queries with clearly separated frequencies (cuts 0.5/0.8)."""
    records = [(f"h{i:04d}", 1000) for i in range(sizes.get("head", 0))]
    records += [(f"t{i:04d}", 100) for i in range(sizes.get("torso", 0))]
    records += [(f"z{i:04d}", 1) for i in range(sizes.get("tail", 0))]
    return stats_of(records)


def test_it_samples_the_quota_of_each_stratum_reproducibly() -> None:
    stats = population(head=100, torso=400, tail=5000)
    strata = stratify(stats, StrataDefinition(head_share=0.7, torso_share=0.97))
    assert [row.queries for row in strata.summary[:3]] == [100, 400, 5000]
    quotas: dict[StratumName, int] = {"head": 60, "torso": 90, "tail": 120, "failures": 30}
    first = sample_queries(stats, strata, quotas=quotas, seed=7)
    again = sample_queries(stats, strata, quotas=quotas, seed=7)
    other = sample_queries(stats, strata, quotas=quotas, seed=8)
    assert first == again
    assert [q.query for q in first.queries] != [q.query for q in other.queries]
    counts = {name: sum(q.stratum == name for q in first.queries) for name in quotas}
    assert counts == {"head": 60, "torso": 90, "tail": 120, "failures": 0}
    assert len({q.query for q in first.queries}) == 270  # without replacement
    probability = {q.stratum: q.inclusion_probability for q in first.queries}
    assert probability == {"head": 60 / 100, "torso": 90 / 400, "tail": 120 / 5000}
    assert first.draws[3].shortfall == 30
    with pytest.raises(ValueError, match="seed"):
        sample_queries(stats, strata, quotas=quotas, seed=-1)


def test_it_leaves_other_strata_alone_when_one_quota_changes() -> None:
    stats = population(head=100, torso=400, tail=5000)
    strata = stratify(stats, StrataDefinition(head_share=0.7, torso_share=0.97))
    base = sample_queries(stats, strata, quotas=parse_quotas("head=10,tail=20"), seed=1)
    more = sample_queries(stats, strata, quotas=parse_quotas("head=30,tail=20"), seed=1)
    tail = {q.query for q in base.queries if q.stratum == "tail"}
    assert tail == {q.query for q in more.queries if q.stratum == "tail"}


def test_it_excludes_queries_already_in_the_project() -> None:
    stats = population(head=10, torso=0, tail=30)  # head: 10000 of 10030 searches
    strata = stratify(stats, StrataDefinition(head_share=0.999, torso_share=0.999))
    already = {f"z{i:04d}" for i in range(25)} | {"h0000", "not in the log"}
    sample = sample_queries(stats, strata, quotas={"head": 3, "tail": 10}, seed=3, exclude=already)
    drawn = {q.query for q in sample.queries}
    assert not drawn & already
    tail = next(d for d in sample.draws if d.stratum == "tail")
    # 5 tail queries remain: all are taken, with certainty, and 5 of the quota is short.
    assert (tail.population, tail.excluded, tail.drawn, tail.shortfall) == (5, 25, 5, 5)
    assert {q.inclusion_probability for q in sample.queries if q.stratum == "tail"} == {1.0}
    head = next(q for q in sample.queries if q.stratum == "head")
    assert head.inclusion_probability == 3 / 9


def test_it_parses_quotas() -> None:
    assert parse_quotas("head=60, tail=120") == {"head": 60, "torso": 0, "tail": 120, "failures": 0}
    for bad in ("body=3", "head=x", "head=-1", "head=1,head=2"):
        with pytest.raises(ValueError):
            parse_quotas(bad)


def test_it_caps_inclusion_probabilities_at_one_and_spreads_the_rest() -> None:
    # n = 3 over sizes 100, 10, 10, 10, 10: 100 would get 3 * 100 / 140 > 1, so it is taken
    # with certainty and the other 2 draws are spread evenly over the four 10s.
    pi = inclusion_probabilities(np.array([100, 10, 10, 10, 10]), 3)
    assert pi.tolist() == pytest.approx([1.0, 0.5, 0.5, 0.5, 0.5])
    # A cascade: once 1000 is certain, 100 is certain too.
    pi = inclusion_probabilities(np.array([1000, 100, 5, 5, 5, 5]), 3)
    assert pi.tolist() == pytest.approx([1, 1, 0.25, 0.25, 0.25, 0.25])
    assert inclusion_probabilities(np.array([3, 2]), 5).tolist() == [1.0, 1.0]


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.integers(1, 1000), min_size=2, max_size=60),
    st.integers(1, 60),
    st.integers(0, 2**32 - 1),
)
def test_it_draws_exactly_n_distinct_units_by_systematic_pps(
    sizes: list[int], n: int, seed: int
) -> None:
    n = min(n, len(sizes))
    pi = inclusion_probabilities(np.array(sizes), n)
    assert pi.sum() == pytest.approx(n)
    assert ((pi > 0) & (pi <= 1)).all()
    picks = systematic_pps(np.random.default_rng(seed), pi)
    assert len(picks) == n == len(set(picks.tolist()))
    assert (pi[pi >= 1 - 1e-12] == 1).all()
    assert set(np.flatnonzero(pi >= 1 - 1e-12)) <= set(picks.tolist())


@pytest.mark.parametrize("weighted", [False, True])
def test_it_reports_inclusion_probabilities_that_match_observed_frequencies(
    weighted: bool,
) -> None:
    # One stratum (cuts at 0 put everything in the tail) of 40 queries with skewed
    # frequencies; 8 are drawn per sample. Over 4000 seeds each query's share of samples
    # must match its reported probability within 4.5 standard errors (a false alarm for
    # any of the 40 queries has probability < 1e-3).
    sizes = [400, 150, 90, 60, 40, 30, 20, 15, 10, 10, 8, 6, 5, 4, 3, 3, 2, 2] + [1] * 22
    stats = stats_of([(f"q{i:02d}", f) for i, f in enumerate(sizes)])
    strata = stratify(stats, StrataDefinition(head_share=0.0, torso_share=0.0))
    runs = 4000
    taken: dict[str, int] = defaultdict(int)
    reported: dict[str, float] = {}
    for seed in range(runs):
        sample = sample_queries(stats, strata, quotas={"tail": 8}, seed=seed, weighted=weighted)
        assert len(sample.queries) == 8
        for q in sample.queries:
            taken[q.query] += 1
            assert reported.setdefault(q.query, q.inclusion_probability) == q.inclusion_probability
    expected = inclusion_probabilities(np.array(sizes), 8) if weighted else np.full(40, 8 / 40)
    assert len(reported) == 40 and sum(reported.values()) == pytest.approx(8)
    for i, pi in enumerate(expected):
        name = f"q{i:02d}"
        if name in reported:
            assert reported[name] == pytest.approx(pi)
        bound = 4.5 * math.sqrt(pi * (1 - pi) / runs) + 1e-9
        assert abs(taken[name] / runs - pi) <= bound, (name, taken[name] / runs, pi)
    if weighted:
        assert reported["q00"] == 1.0 and taken["q00"] == runs  # take-all


def test_it_serialises_a_sampled_query_in_the_public_shape() -> None:
    stats = stats_of([("a", 5), ("b", 1)], zero_result_rate=[0.5, math.nan])
    strata = stratify(stats, StrataDefinition(head_share=0.0, torso_share=0.0))
    sample = sample_queries(stats, strata, quotas={"tail": 1}, seed=0)
    record = sample.queries[0].to_json()
    assert set(record) >= {"query", "stratum", "frequency", "inclusion_probability", "signals"}
    assert set(record["signals"]) == {"zero_result_rate", "reformulation_rate", "abandonment_rate"}
    assert record["weight"] == pytest.approx(1 / record["inclusion_probability"])
    json.dumps(record)


# --------------------------------------------------------------------------- signals

SESSIONS = [
    # s1: reformulations inside and outside the 300 s window
    row("cheap flights", 0, "s1", "u1", 12, 0),
    row("Cheap  Flights Paris", 30, "s1", "u1", 8, 0),  # shares "cheap": event 1 reformulated
    row("hotels paris", 400, "s1", "u1", 0, 0),  # 370 s later: outside, not reformulated
    row("hotel paris", 410, "s1", "u1", 5, 1),  # shares "paris" after 10 s: reformulated
    row("hotel paris", 410, "s1", "u1", 5, 0),  # same query again: not a reformulation
    # s2: a typo fixed (no shared term, edit distance 2), then an unrelated query
    row("recieve", 0, "s2", "u2", 0, 0),
    row("receive", 20, "s2", "u2", 9, 1),
    row("tv", 40, "s2", "u2", 3, 0),
    row("pc", 50, "s2", "u2", 3, 0),  # "tv" -> "pc": distance 2 > min(2, ceil(0.6))
    # s3: abandonment, and a click at the very same second on another query
    row("tv", 0, "s3", "u1", 3, 0),
    row("cheap flights", 5, "s3", "u1", 7, 0),
    row("pc", 5, "s3", "u1", 3, 1),
    row("hotels paris", 60, "s3", "u1", 0, 0),  # nothing clicked after: abandoned
]


def test_it_computes_the_failure_signals_of_crafted_sessions(tmp_path: Path) -> None:
    stats = by_query(ingest(write_log(tmp_path, SESSIONS)))
    # cheap flights: s1 t0 -> "cheap flights paris" (reformulated); s3 t5 -> tie with "pc"
    # at t5 is ordered by text ("cheap flights" < "pc"), gap 0: not reformulated.
    # Abandonment: s1 has a click at t410 >= 0; s3 has a click at t5 >= 5 (the tie counts).
    assert stats["cheap flights"].reformulation_rate == 0.5
    assert stats["cheap flights"].abandonment_rate == 0.0
    assert stats["cheap flights paris"].reformulation_rate == 0.0  # 370 s to the next
    assert stats["hotels paris"].reformulation_rate == 0.5  # s1 yes, s3 last of session
    assert stats["hotels paris"].abandonment_rate == 0.5  # s3 t60: no click at or after
    assert stats["hotels paris"].zero_result_rate == 1.0
    assert stats["hotel paris"].reformulation_rate == 0.0
    assert stats["hotel paris"].frequency == 2 and stats["hotel paris"].sessions == 1
    assert stats["recieve"].reformulation_rate == 1.0  # typo fixed
    assert stats["receive"].reformulation_rate == 0.0  # "receive" -> "tv": unrelated
    assert stats["tv"].reformulation_rate == 0.0  # "tv" -> "pc" is no reformulation
    assert stats["tv"].abandonment_rate == pytest.approx(0.5)  # s2: no click after t40
    assert stats["pc"].abandonment_rate == 0.5  # s2 abandoned, s3 clicked itself
    assert (stats["tv"].sessions, stats["tv"].users) == (2, 2)
    assert (stats["cheap flights"].sessions, stats["cheap flights"].users) == (2, 1)


def test_it_applies_the_reformulation_window(tmp_path: Path) -> None:
    path = write_log(tmp_path, SESSIONS)
    wide = by_query(ingest(path, definition=StrataDefinition(reformulation_window=400)))
    narrow = by_query(ingest(path, definition=StrataDefinition(reformulation_window=10)))
    assert wide["cheap flights paris"].reformulation_rate == 1.0  # 370 s now inside
    assert narrow["cheap flights"].reformulation_rate == 0.0  # 30 s now outside
    assert narrow["hotels paris"].reformulation_rate == 0.5  # 10 s still inside


def test_it_leaves_signals_null_when_the_log_lacks_their_columns(tmp_path: Path) -> None:
    header = ("query", "result_count")
    path = write_log(tmp_path, [row("a", results=0), row("a", results=3)], header=header)
    stats = ingest(path)
    (record,) = stats.records()
    assert record.zero_result_rate == 0.5
    assert record.reformulation_rate is None and record.abandonment_rate is None
    assert record.sessions is None and record.users is None
    assert stats.sessions is None
    assert any("reformulation" in w for w in stats.report.warnings)  # type: ignore[union-attr]
    only_query = by_query(ingest(write_log(tmp_path, [row("b")], header=("query",))))
    assert only_query["b"].zero_result_rate is None


def test_it_reads_clicks_as_flags_counts_positions_or_urls(tmp_path: Path) -> None:
    variants = {
        "count": ["0", "3", ""],
        "position": ["", "2", ""],
        "url": ["", "https://example.com/a", "no"],
        "flag": ["false", "true", "f"],
    }
    for name, clicks in variants.items():
        rows = [
            {"query": "a", "timestamp": 0, "session_id": "s", "clicked": clicks[0]},
            {"query": "b", "timestamp": 10, "session_id": "s", "clicked": clicks[1]},
            {"query": "c", "timestamp": 20, "session_id": "s", "clicked": clicks[2]},
        ]
        header = ("query", "timestamp", "session_id", "clicked")
        stats = by_query(ingest(write_log(tmp_path, rows, name=f"{name}.csv", header=header)))
        rates = [stats[q].abandonment_rate for q in "abc"]
        assert rates == [0.0, 0.0, 1.0], name


def test_it_reads_iso_and_epoch_timestamps_alike(tmp_path: Path) -> None:
    epoch = [row("a b", 1_700_000_000, "s", clicked=0), row("a c", 1_700_000_060, "s", clicked=0)]
    iso = [
        row("a b", "2023-11-14T22:13:20Z", "s", clicked=0),
        row("a c", "2023-11-14 22:14:20", "s", clicked=0),
    ]
    for rows in (epoch, iso):
        stats = by_query(ingest(write_log(tmp_path, rows)))
        assert stats["a b"].reformulation_rate == 1.0


def test_it_counts_unparsable_timestamps_and_warns_about_milliseconds(tmp_path: Path) -> None:
    rows = [row("a", "yesterday", "s"), row("a", "2024-01-01T00:00:00Z", "s")]
    report = ingest(write_log(tmp_path, rows)).report
    assert report is not None and report.unparsed_timestamps == 1
    millis = [row("a", 1_700_000_000_000, "s"), row("b", 1_700_000_030_000, "s")]
    report = ingest(write_log(tmp_path, millis, name="ms.csv")).report
    assert report is not None and any("milliseconds" in w for w in report.warnings)


# Logs of a few sessions over a small vocabulary, so that repeats, ties, variants of the
# same normalised query, similar and dissimilar successors all occur.
_QUERIES = [
    "foo", "Foo", "foo ", "FOO  bar", "foo bar", "bar", "baz", "bax", "qux quux", "café",
    "cafe", "ｃａｆｅ", "mail a@b.co", "mail c@d.co", "x", "ab", "cd", "", None,
]  # fmt: skip
_rows = st.builds(
    row,
    st.sampled_from(_QUERIES),
    st.one_of(st.none(), st.integers(0, 400)),
    st.sampled_from([None, "s1", "s2", "s3", "s4"]),
    st.sampled_from([None, "u1", "u2", "u3"]),
    st.sampled_from([None, 0, 1, 7]),
    st.sampled_from([None, 0, 1, 2]),
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(rows=st.lists(_rows, min_size=1, max_size=40), window=st.sampled_from([30.0, 300.0]))
def test_it_matches_the_reference_implementation_on_random_logs(
    tmp_path: Path, rows: list[dict[str, Any]], window: float
) -> None:
    expected = reference(rows, window)
    path = write_log(tmp_path, rows, name="random.csv")
    definition = StrataDefinition(reformulation_window=window)
    if not expected:
        with pytest.raises(LogError):
            ingest(path, definition=definition)
        return
    stats = ingest(path, definition=definition)
    assert_same_stats(as_dicts(stats), expected)
    assert list(stats.query) == sorted(stats.query)


# --------------------------------------------------------------------------- privacy

PRIVATE = [
    row("Reset password JOHN@EXAMPLE.COM", 0, "s1"),
    row("reset password mary@example.org", 10, "s1"),
    row("call 555-123-4567", 0, "s2"),
    row("https://bob:secret@intranet.local/report", 0, "s3"),
    row("weather berlin", 0, "s4"),
    row("weather berlin", 5, "s5"),
]


def test_it_excludes_queries_with_personal_data_and_counts_them(tmp_path: Path) -> None:
    stats = ingest(write_log(tmp_path, PRIVATE))
    assert list(stats.query) == ["weather berlin"]
    report = stats.report
    assert report is not None
    counts = {c.kind: (c.queries, c.events) for c in report.pii}
    assert counts == {"email": (2, 2), "phone": (1, 1), "url_credentials": (1, 1)}
    assert report.pii_excluded_events == 4 and report.events == 2


def test_it_masks_personal_data_on_request(tmp_path: Path) -> None:
    stats = by_query(ingest(write_log(tmp_path, PRIVATE), definition=StrataDefinition(pii="mask")))
    assert set(stats) == {"reset password [email]", "call [phone]", "[url]", "weather berlin"}
    assert stats["reset password [email]"].frequency == 2
    assert stats["reset password [email]"].pii == "email"
    assert stats["weather berlin"].pii is None
    assert not any("@" in q or "555" in q for q in stats)


# --------------------------------------------------------------------------- formats

FORMAT_ROWS = [
    row("Weather Berlin", "2024-03-01T10:00:00Z", "s1", "u1", 10, 1),
    row("weather berlin tomorrow", "2024-03-01T10:00:40Z", "s1", "u1", 0, 0),
    row('say "hi", then tab', "2024-03-01T11:00:00Z", "s2", "u2", 3, 0),
    row("naïve café", "2024-03-01T11:00:10Z", "s2", "u2", 1, 1),
    row("weather berlin", "2024-03-02T09:00:00Z", "s3", "u1", 4, 0),
]


def _jsonl(rows: Iterable[Row]) -> str:
    return "".join(json.dumps(dict(r), ensure_ascii=False) + "\n" for r in rows)


def _tsv(rows: Iterable[Row]) -> str:
    lines = ["\t".join(HEADER)]
    lines += ["\t".join("" if r[name] is None else str(r[name]) for name in HEADER) for r in rows]
    return "\n".join(lines) + "\n"


def _write_format(tmp_path: Path, kind: str) -> Path:
    if kind == "parquet":
        path = tmp_path / "log.parquet"
        source = write_log(tmp_path, FORMAT_ROWS, name="for-parquet.csv")
        typed = f"read_csv('{source}', header=true, timestampformat='%Y-%m-%dT%H:%M:%SZ')"
        duckdb.execute(f"COPY (SELECT * FROM {typed}) TO '{path}' (FORMAT parquet)")
        return path
    text = {
        "csv": csv_text(FORMAT_ROWS),
        "tsv": _tsv(FORMAT_ROWS),  # unquoted, as TSV logs are
        "jsonl": _jsonl(FORMAT_ROWS),
    }[kind.removesuffix(".gz")]
    path = tmp_path / f"log.{kind}"
    data = text.encode("utf-8")
    path.write_bytes(gzip.compress(data) if kind.endswith(".gz") else data)
    return path


@pytest.mark.parametrize("kind", ["csv", "tsv", "jsonl", "parquet", "csv.gz", "tsv.gz", "jsonl.gz"])
def test_it_reads_every_format_alike(tmp_path: Path, kind: str) -> None:
    expected = as_dicts(ingest(_write_format(tmp_path, "csv")))
    got = ingest(_write_format(tmp_path, kind))
    assert as_dicts(got) == expected
    assert got.report is not None and got.report.log_format == kind.removesuffix(".gz")
    assert 'say "hi", then tab' in expected
    assert expected["weather berlin"]["frequency"] == 2
    assert expected["weather berlin"]["reformulation_rate"] == 0.5


def test_it_detects_gzip_by_content_and_the_format_on_request(tmp_path: Path) -> None:
    path = tmp_path / "export.dat"
    path.write_bytes(gzip.compress(csv_text(FORMAT_ROWS).encode()))
    with pytest.raises(LogError, match="cannot tell the format"):
        ingest(path)
    assert len(ingest(path, log_format="csv")) == 4


def test_it_renames_columns_with_a_mapping(tmp_path: Path) -> None:
    header = ("q", "ts", "sid", "uid", "hits", "click_url")
    rows = [dict(zip(header, r.values(), strict=True)) for r in FORMAT_ROWS]
    path = write_log(tmp_path, rows, header=header)
    mapping = ColumnMap.parse(
        "query=q,timestamp=ts,session_id=sid,user_id=uid,result_count=hits,clicked=click_url"
    )
    assert as_dicts(ingest(path, columns=mapping)) == as_dicts(
        ingest(_write_format(tmp_path, "csv"))
    )
    with pytest.raises(LogError, match="not field=column"):
        ColumnMap.parse("query")
    with pytest.raises(LogError, match="unknown field"):
        ColumnMap.parse("colour=q")


# --------------------------------------------------------------------------- bad input


def test_it_names_the_columns_found_when_the_query_column_is_missing(tmp_path: Path) -> None:
    path = write_log(tmp_path, [{"q": "a", "sid": "s"}], header=("q", "sid"))
    with pytest.raises(
        LogError, match=r"missing query \(column 'query'\). Columns found: 'q', 'sid'"
    ):
        ingest(path)


def test_it_requires_an_optional_column_that_was_mapped_explicitly(tmp_path: Path) -> None:
    path = write_log(tmp_path, [row("a")], header=("query",))
    with pytest.raises(LogError, match=r"session_id \(column 'sid'\)"):
        ingest(path, columns=ColumnMap.parse("session_id=sid"))


def test_it_explains_a_wrong_delimiter(tmp_path: Path) -> None:
    path = write_log(tmp_path, FORMAT_ROWS, name="log.tsv")  # comma-separated content
    with pytest.raises(LogError, match="looks ','-separated, not TSV; read it as csv"):
        ingest(path)


def test_it_finds_the_delimiter_of_a_csv_from_its_header(tmp_path: Path) -> None:
    expected = as_dicts(ingest(_write_format(tmp_path, "csv")))
    for delimiter, name in ((";", "semicolon.csv"), ("\t", "tabs.csv"), ("|", "pipes.csv")):
        path = write_log(tmp_path, FORMAT_ROWS, name=name, delimiter=delimiter)
        assert as_dicts(ingest(path)) == expected, name


def test_it_reads_a_one_column_log_whose_queries_hold_commas(tmp_path: Path) -> None:
    path = tmp_path / "queries.csv"
    path.write_text("query\ncheap flights, paris\nhotels\n", encoding="utf-8")
    assert set(ingest(path).query) == {"cheap flights, paris", "hotels"}


@pytest.mark.parametrize("kind", ["csv", "jsonl", "csv.gz"])
def test_it_replaces_invalid_utf8_and_counts_the_lines(tmp_path: Path, kind: str) -> None:
    good = _write_format(tmp_path, kind.removesuffix(".gz")).read_bytes()
    broken = good.replace("naïve".encode(), b"na\xefve").replace(b"Berlin", b"Berl\xff\xfen", 1)
    path = tmp_path / f"broken.{kind}"
    path.write_bytes(gzip.compress(broken) if kind.endswith(".gz") else broken)
    stats = ingest(path)
    assert stats.report is not None and stats.report.invalid_utf8_lines == 2
    assert "na\ufffdve café" in by_query(stats)
    assert any("U+FFFD" in w for w in stats.report.warnings)


def test_it_refuses_an_empty_file_and_a_header_without_rows(tmp_path: Path) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    with pytest.raises(LogError, match="empty"):
        ingest(empty)
    blank = tmp_path / "blank.jsonl"
    blank.write_text("\n  \n", encoding="utf-8")
    with pytest.raises(LogError, match="empty"):
        ingest(blank)
    header = tmp_path / "header.csv"
    header.write_text("query,session_id\n", encoding="utf-8")
    with pytest.raises(LogError, match="no rows"):
        ingest(header)
    with pytest.raises(LogError, match="no such file"):
        ingest(tmp_path / "missing.csv")


def test_it_refuses_a_log_of_blank_queries(tmp_path: Path) -> None:
    path = write_log(tmp_path, [row(""), row("   "), row(None, 5)])
    with pytest.raises(LogError, match="every query is blank"):
        ingest(path)


def test_it_skips_malformed_lines_and_counts_them(tmp_path: Path) -> None:
    path = tmp_path / "ragged.csv"
    path.write_text('query,session_id\na,s1\nb,s2,extra\nc,s3\n"unterminated,s4\n', "utf-8")
    stats = ingest(path)
    assert stats.report is not None and stats.report.malformed_rows >= 1
    assert {"a", "c"} <= set(stats.query) and "b" not in set(stats.query)


def test_it_counts_blank_queries(tmp_path: Path) -> None:
    stats = ingest(write_log(tmp_path, [row("a"), row(""), row("  \t ")]))
    assert stats.report is not None and stats.report.blank_queries == 2
    assert stats.report.rows == 3 and stats.report.events == 1


def test_it_handles_a_log_where_every_query_is_unique(tmp_path: Path) -> None:
    rows = [row(f"query number {i}", i, f"s{i}") for i in range(200)]
    stats = ingest(write_log(tmp_path, rows))
    strata = stratify(stats, StrataDefinition())
    assert set(strata.labels) == {"tail"} and strata.warnings
    sample = sample_queries(stats, strata, seed=1)
    assert [d.drawn for d in sample.draws] == [0, 0, 120, 0]
    assert {q.inclusion_probability for q in sample.queries} == {120 / 200}


# --------------------------------------------------------------------------- results


def test_it_writes_statistics_to_a_duckdb_file_and_reads_them_back(tmp_path: Path) -> None:
    database = tmp_path / "stats.duckdb"
    stats = ingest(write_log(tmp_path, SESSIONS), database=database)
    again = load_stats(database)
    assert as_dicts(again) == as_dicts(stats)
    assert again.report == stats.report
    tables = {r[0] for r in duckdb.connect(str(database)).execute("SHOW TABLES").fetchall()}
    assert tables == {"query_stats", "ingest_report"}  # no raw rows are kept


def test_it_rebuilds_statistics_from_persisted_records(tmp_path: Path) -> None:
    stats = ingest(write_log(tmp_path, SESSIONS))
    rebuilt = LogStats.from_records(list(reversed(list(stats.records()))))
    assert as_dicts(rebuilt) == as_dicts(stats)
    assert list(rebuilt.query) == sorted(stats.query)


def test_it_reports_progress_and_stops_when_the_callback_raises(tmp_path: Path) -> None:
    seen: list[tuple[float, str]] = []
    ingest(write_log(tmp_path, SESSIONS), on_progress=lambda f, m: seen.append((f, m)))
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[0] == 0.0 and fractions[-1] == 1.0
    assert {m for _, m in seen} >= {"counting distinct queries", "following sessions"}

    class Cancelled(Exception):
        pass

    def cancel(fraction: float, message: str) -> None:
        if fraction > 0.3:
            raise Cancelled

    with pytest.raises(Cancelled):
        ingest(write_log(tmp_path, SESSIONS), on_progress=cancel)


def test_it_stays_within_a_memory_limit_smaller_than_the_log(tmp_path: Path) -> None:
    # 400,000 events: the compact event table alone (~13 MB) and the sort of the sessions
    # exceed a 40 MB limit with their hash tables, so DuckDB has to spill to disk.
    rng = np.random.default_rng(5)
    n = 400_000
    queries = rng.zipf(1.3, n) % 50_000
    sessions = rng.integers(0, 150_000, n)
    path = tmp_path / "big.csv"
    with path.open("w", encoding="utf-8") as out:
        out.write("query,timestamp,session_id,result_count,clicked\n")
        for i in range(n):
            out.write(f"q{queries[i]},{i},s{sessions[i]},{i % 7},{i % 3 == 0:d}\n")
    small = ingest(path, engine=EngineSettings(memory_limit="40MB", threads=2))
    large = ingest(path, engine=EngineSettings(memory_limit="1GB", threads=2))
    assert as_dicts(small) == as_dicts(large)
    assert int(small.frequency.sum()) == n


@pytest.mark.data
@pytest.mark.skipif(not AQL.exists(), reason="Archive Query Log examples (../shared/data) absent")
def test_it_reads_real_archived_search_queries(tmp_path: Path) -> None:
    # 50 real SERP records from many engines: nested JSON, Cyrillic and CJK text, no-break
    # spaces; no sessions or clicks, so only frequencies are known.
    stats = ingest(AQL, columns=ColumnMap.parse("query=url_query"))
    report = stats.report
    assert report is not None and report.rows == 50
    assert {"url_query", "serp_query", "results", "service"} <= set(report.columns_found)
    assert report.events + report.blank_queries + report.pii_excluded_events == 50
    assert "мистер кот майнкрафт" in set(stats.query)
    assert all(q == normalise_query(q) for q in stats.query)
    typed = [json.loads(line)["url_query"] for line in AQL.read_text("utf-8").splitlines()]
    assert any("\u00a0" in q for q in typed if q)  # no-break spaces as typed ...
    assert all("\u00a0" not in q for q in stats.query)  # ... are spaces once normalised
    assert np.isnan(stats.reformulation_rate).all()
    strata = stratify(stats, StrataDefinition())
    sample = sample_queries(stats, strata, quotas={"tail": 10}, seed=1)
    assert len(sample.queries) == 10
