"""The SQL of ingestion, one builder per phase; :mod:`sampling.ingest` runs them.

Tables, in the order they appear (all TEMP, dropped as soon as no later statement needs
them, so that memory holds one phase's data at a time):

- ``_events``: one row per log line, from the only pass over the file: the raw query text
  and its 64-bit hash ``qh``, hashed session and user, time, outcome flags;
- ``_raw(raw, qh, n, ...)``: distinct raw strings and their counts, grouped from
  ``_events`` (whose text column is dropped right after, unless two strings share a hash);
- ``_keyed``: each distinct raw string normalised and screened;
- ``_norms(nid, query, pii, excluded, frequency, ...)``: one row and a dense id per
  normalised query (ids in text order), with the sums over its raw variants;
- ``_raw_ids(key, nid)``: raw string (by its hash) to query id;
- ``_ev(nid, sh, uh, ts, clk, rc)``: the lines by query id, which the views ``events`` and
  ``queries`` present to the reference SQL of the statistics (``statistics.sql``, published
  in docs/warehouse.md), giving ``_computed``;
- ``_stats``: the result, with the privacy screen's verdict and NaN for unavailable rates.

Pure core: no Django.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from pathlib import Path

import duckdb
from duckdb.func import PythonUDFType

from .source import Source, identifier, not_text_sql
from .strata import PiiPolicy
from .text import SCREENED, Normalisation, screen_arrow

__all__ = [
    "SCREEN_UDF",
    "events_sql",
    "numbering_sql",
    "per_query_sql",
    "register_screen",
    "screen_sql",
    "statistics_sql",
    "statistics_steps",
    "stats_columns",
    "stats_sql",
]

SCREEN_UDF = "assay_screen"
_NAN = "CAST('NaN' AS DOUBLE)"
# The reference SQL of the per-query statistics, as published (docs/warehouse.md).
STATISTICS_SQL = Path(__file__).with_name("statistics.sql")


def register_screen(con: duckdb.DuckDBPyConnection, normalisation: Normalisation) -> None:
    """Register ``SCREEN_UDF``: the one rule of normalisation and screening, vectorised (DuckDB
    hands it a vector of distinct strings at a time)."""
    con.create_function(
        SCREEN_UDF,
        screen_arrow(normalisation),
        [duckdb.string_type()],
        duckdb.struct_type({name: duckdb.string_type() for name in SCREENED.names}),
        type=PythonUDFType.ARROW,
        side_effects=False,
    )


def screen_sql() -> str:
    """Normalise and screen each distinct raw string once, with the Python rule.

    ``SCREEN_UDF`` is :func:`sampling.text.screen_arrow`, registered by
    :func:`register_screen`. A query that looks like it holds personal data is keyed by its
    masked text under both policies, so the raw text never reaches the statistics.
    """
    return f"""CREATE OR REPLACE TEMP TABLE _keyed AS
        SELECT * EXCLUDE (screened), screened.norm AS norm, screened.pii AS pii,
               screened.query AS query
        FROM (SELECT *, {SCREEN_UDF}(raw) AS screened FROM _raw WHERE raw IS NOT NULL)"""


def numbering_sql(pii: PiiPolicy, by_hash: bool) -> list[str]:
    """Number the normalised queries, sum their counts, and map raw strings to ids.

    Ids follow the order of the normalised text, so they are the same whatever the log's
    order. Raw strings are keyed by their 64-bit hash when no two strings share one (an
    integer join is much cheaper than a string join), else by the text itself. Under the
    ``exclude`` policy a query with personal data keeps an id (it still is somebody's next
    query in a session) but is left out of the output.
    """
    key = "qh" if by_hash else "raw"
    excluded = "bool_or(pii IS NOT NULL)" if pii == "exclude" else "false"
    return [
        f"""CREATE OR REPLACE TEMP TABLE _norms AS
        SELECT CAST(row_number() OVER (ORDER BY query) AS INTEGER) AS nid, *
        FROM (SELECT query, min(pii) AS pii, {excluded} AS excluded,
                     sum(n) AS frequency,
                     sum(bad_ts) AS bad_ts, max(max_ts) AS max_ts
              FROM _keyed WHERE norm <> '' GROUP BY query)""",
        f"""CREATE OR REPLACE TEMP TABLE _raw_ids AS
        SELECT k.{key} AS key, q.nid FROM _keyed AS k JOIN _norms AS q USING (query)
        WHERE k.norm <> ''""",
    ]


def events_sql(
    source: Source,
    fields: Mapping[str, str],
    used: Mapping[str, str],
    probe: Collection[str] = (),
) -> str:
    """The one pass over the file: every line as a compact row.

    A row holds the raw query text and its 64-bit hash, the hashed session and user ids,
    the time and the outcome flags. The text is only kept until the dictionary is built
    from this table (grouping an in-memory column costs a fraction of parsing the file a
    second time); from then on the hash stands for it. For each field in ``probe`` a flag
    ``seen_<field>`` says whether the line had a value for it (JSON keys DuckDB's sample did
    not see may occur later in the file, or nowhere).
    """
    query = fields["query"]
    has_ts = f"{identifier(used['timestamp'])} IS NOT NULL" if "timestamp" in used else "false"
    seen = "".join(f", seen_{name}" for name in probe)
    flags = "".join(f", {identifier(used[name])} IS NOT NULL AS seen_{name}" for name in probe)
    return f"""CREATE OR REPLACE TEMP TABLE _events AS
        SELECT raw, hash(raw) AS qh, sh, uh, ts, clk, rc,
               has_ts_value AND ts IS NULL AS bad_ts, not_text{seen}
        FROM (SELECT {query} AS raw{flags}, {not_text_sql(source, used)} AS not_text,
                {fields.get("session_id", "CAST(NULL AS UBIGINT)")} AS sh,
                {fields.get("user_id", "CAST(NULL AS UBIGINT)")} AS uh,
                {fields.get("timestamp", "CAST(NULL AS DOUBLE)")} AS ts,
                {fields.get("result_count", "CAST(NULL AS DOUBLE)")} AS rc,
                {fields.get("clicked", "false")} AS clk,
                {has_ts} AS has_ts_value
              FROM {source.relation(store_rejects=True)})"""


def dictionary_sql() -> str:
    """Distinct raw strings with their hash and the sums that add up over raw variants.

    Counts and maxima are taken per raw string here, so that no later statement has to
    aggregate all lines again: a query's sums are the sums over its raw variants.
    """
    return """CREATE OR REPLACE TEMP TABLE _raw AS
        SELECT raw, hash(raw) AS qh, count(*) AS n,
               count(*) FILTER (WHERE bad_ts) AS bad_ts, max(ts) AS max_ts
        FROM _events GROUP BY raw"""


def per_query_sql(window: float, by_hash: bool) -> list[str]:
    """The lines by query id, and the statistics of ``statistics.sql`` over them.

    ``events`` and ``queries`` are the inputs the reference SQL names (docs/warehouse.md):
    here a query's id is its number in text order, so that ordering by id orders by text,
    and session and user ids are their 64-bit hashes.
    """
    key = "qh" if by_hash else "raw"
    return [
        # Blank queries have no id: the inner join drops their lines.
        f"""CREATE OR REPLACE TEMP TABLE _ev AS
        SELECT ids.nid, e.sh, e.uh, e.ts, e.clk, e.rc
        FROM _events AS e JOIN _raw_ids AS ids ON ids.key = e.{key}""",
        "DROP TABLE _events",
        "DROP TABLE _raw_ids",
        """CREATE OR REPLACE TEMP VIEW events AS
        SELECT nid AS query_id, sh AS session_id, uh AS user_id, ts, rc AS result_count,
               clk AS clicked
        FROM _ev""",
        "CREATE OR REPLACE TEMP VIEW queries AS SELECT nid AS query_id, query FROM _norms",
        # The window as a DOUBLE from its repr: a huge window in milliseconds may be "inf".
        *statistics_steps(f"CAST('{window!r}' AS DOUBLE)", "_computed"),
        "DROP VIEW events",
        "DROP VIEW queries",
        "DROP TABLE _ev",
    ]


def statistics_sql(window: str) -> str:
    """The reference SQL (``statistics.sql``, published as is) with its window filled in."""
    return STATISTICS_SQL.read_text(encoding="utf-8").replace("{window}", window)


def statistics_steps(window: str, target: str) -> list[str]:
    """``statistics.sql`` run one step (common table expression) at a time, into ``target``.

    Each step becomes a temporary table, dropped at the end: memory then holds one step's
    hash tables or sort at a time, and DuckDB spills each beyond its limit. As one statement
    the steps run side by side, and a 50-million-line log did not fit in 1 GB. The text of
    every step is the published one.
    """
    steps, final = _split_steps(statistics_sql(window))
    created = [f"CREATE OR REPLACE TEMP TABLE {name} AS {body}" for name, body in steps]
    dropped = [f"DROP TABLE {name}" for name, _ in reversed(steps)]
    return [*created, f"CREATE OR REPLACE TEMP TABLE {target} AS {final}", *dropped]


def _split_steps(sql: str) -> tuple[list[tuple[str, str]], str]:
    """(name, body) of each ``WITH`` step of ``sql``, and its final ``SELECT``."""
    text = re.sub(r"--[^\n]*", "", sql).strip()  # comments hold parentheses too
    head = re.match(r"WITH\s+", text, re.IGNORECASE)
    assert head is not None, "statistics.sql starts with WITH"
    steps: list[tuple[str, str]] = []
    position = head.end()
    while True:
        named = re.compile(r"\s*(\w+)\s+AS\s*\(", re.IGNORECASE).match(text, position)
        if named is None:
            return steps, text[position:].strip()
        end = _closing(text, named.end())
        steps.append((named.group(1), text[named.end() : end]))
        position = end + 1
        comma = re.compile(r"\s*,").match(text, position)
        if comma is None:
            return steps, text[position:].strip()
        position = comma.end()


def _closing(text: str, start: int) -> int:
    """The index of the parenthesis closing the one opened just before ``start``."""
    depth = 1
    for index in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[index], 0)
        if depth == 0:
            return index
    raise ValueError("statistics.sql: a parenthesis is not closed")


def _sequences(fields: Mapping[str, str]) -> bool:
    return "session_id" in fields and "timestamp" in fields


def stats_columns(fields: Mapping[str, str]) -> list[str]:
    """Columns of ``_stats`` (sessions / users only when the log has them)."""
    optional = [n for n, f in (("sessions", "session_id"), ("users", "user_id")) if f in fields]
    rates = ["zero_result_rate", "reformulation_rate", "abandonment_rate"]
    return ["query", "frequency", *optional, *rates, "pii"]


def stats_sql(fields: Mapping[str, str]) -> str:
    """The result: one row per normalised query kept (in no particular order).

    A rate the log cannot give (its column is missing) is NaN, as is one without events to
    measure it on; without a ``clicked`` column no search counts as abandoned or not.
    """
    sequenced = _sequences(fields)
    optional = "".join(
        f"c.{n}, " for n, f in (("sessions", "session_id"), ("users", "user_id")) if f in fields
    )
    zero = _rate("c.zero_result_rate", "result_count" in fields)
    reform = _rate("c.reformulation_rate", sequenced)
    abandon = _rate("c.abandonment_rate", sequenced and "clicked" in fields)
    return f"""CREATE OR REPLACE TEMP TABLE _stats AS
        SELECT t.nid, t.query, c.frequency, {optional}
               {zero} AS zero_result_rate, {reform} AS reformulation_rate,
               {abandon} AS abandonment_rate, t.pii
        FROM _norms AS t JOIN _computed AS c ON c.query_id = t.nid
        WHERE NOT t.excluded"""


def _rate(column: str, available: bool) -> str:
    return f"coalesce({column}, {_NAN})" if available else _NAN
