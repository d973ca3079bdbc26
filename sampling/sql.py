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
- ``_ev(nid, sh, uh, ts, clk)``: the lines by query id, read by ``_distinct`` (distinct
  sessions and users) and ``_seq`` (the session window), which become ``_per_query`` and
  ``_pairs(nid, next_nid, n)``;
- ``_terms``, ``_alike``, ``_lens``, ``_near``: the similarity tests, giving
  ``_reform(nid, reformulated)``;
- ``_stats``: the result.

Pure core: no Django.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import duckdb
from duckdb.func import PythonUDFType

from .source import Source, identifier
from .strata import PiiPolicy
from .text import SCREENED, Normalisation, screen_arrow

__all__ = [
    "SCREEN_UDF",
    "events_sql",
    "numbering_sql",
    "per_query_sql",
    "reform_sql",
    "register_screen",
    "screen_sql",
    "stats_columns",
    "stats_sql",
]

SCREEN_UDF = "assay_screen"
_NAN = "CAST('NaN' AS DOUBLE)"


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
                     sum(n) AS frequency, sum(rc_n) AS rc_n, sum(zero_n) AS zero_n,
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
        SELECT raw, hash(raw) AS qh, sh, uh, ts, clk, rc IS NOT NULL AS rc_known,
               rc = 0 AS rc_zero, has_ts_value AND ts IS NULL AS bad_ts{seen}
        FROM (SELECT {query} AS raw{flags},
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
               count(*) FILTER (WHERE rc_known) AS rc_n, count(*) FILTER (WHERE rc_zero) AS zero_n,
               count(*) FILTER (WHERE bad_ts) AS bad_ts, max(ts) AS max_ts
        FROM _events GROUP BY raw"""


def per_query_sql(fields: Mapping[str, str], window: float, by_hash: bool) -> list[str]:
    """Events by query id; distinct sessions and users; the session sequences.

    Sequences are the events with a session id and a timestamp, ordered by (timestamp,
    query id), i.e. ties by normalised text. ``_seq`` counts, per (query, candidate
    successor), the sequenced events and the abandoned ones; the candidate is the next
    query of the session when it came within the window and differs.
    """
    key = "qh" if by_hash else "raw"
    return [
        # Events by query id, written once: two statements read them, and each would pay
        # for the join again (measured: more than writing the narrow table costs).
        # Blank queries have no id: the inner join drops their lines.
        f"""CREATE OR REPLACE TEMP TABLE _ev AS
        SELECT ids.nid, e.sh, e.uh, e.ts, e.clk
        FROM _events AS e JOIN _raw_ids AS ids ON ids.key = e.{key}""",
        "DROP TABLE _events",
        "DROP TABLE _raw_ids",
        _DISTINCT,
        _sequence_sql(window) if _sequences(fields) else _NO_SEQUENCES,
        "DROP TABLE _ev",
        """CREATE OR REPLACE TEMP TABLE _pairs AS
        SELECT nid, next_nid, n FROM _seq WHERE next_nid IS NOT NULL""",
        # One table per query in two steps: a join of all tables at once would hold a hash
        # table of a million entries for each.
        """CREATE OR REPLACE TEMP TABLE _per_query AS
        SELECT p.*, coalesce(d.sessions, 0) AS sessions, coalesce(d.users, 0) AS users,
               coalesce(q.seq_n, 0) AS seq_n, coalesce(q.abandoned_n, 0) AS abandoned_n
        FROM _norms AS p
        LEFT JOIN _distinct AS d USING (nid)
        LEFT JOIN (SELECT nid, sum(n) AS seq_n, sum(abandoned_n) AS abandoned_n
                   FROM _seq GROUP BY nid) AS q USING (nid)""",
        "DROP TABLE _distinct",
        "DROP TABLE _seq",
    ]


def _sequences(fields: Mapping[str, str]) -> bool:
    return "session_id" in fields and "timestamp" in fields


# Distinct non-null sessions and users per query, exactly: one hash aggregation with two
# grouping sets, (query, session) and (query, user), reads the events once for both. Without
# the column the ids are all null and count 0.
_DISTINCT = """CREATE OR REPLACE TEMP TABLE _distinct AS
    SELECT nid, count(*) FILTER (WHERE by_session AND sh IS NOT NULL) AS sessions,
           count(*) FILTER (WHERE NOT by_session AND uh IS NOT NULL) AS users
    FROM (SELECT nid, sh, uh, grouping(uh) = 1 AS by_session FROM _ev
          GROUP BY GROUPING SETS ((nid, sh), (nid, uh)))
    GROUP BY nid"""


def _sequence_sql(window: float) -> str:
    # The window as a DOUBLE from its repr: a huge window in milliseconds may be "inf".
    # Abandonment compares with the session's last click: "no click at or after t" holds
    # exactly when the last click came before t (or never), ties included.
    return f"""CREATE OR REPLACE TEMP TABLE _seq AS
        SELECT nid,
               CASE WHEN next_ts - ts > 0 AND next_ts - ts <= CAST('{window!r}' AS DOUBLE)
                         AND next_nid <> nid
                    THEN next_nid END AS next_nid,
               count(*) AS n,
               count(*) FILTER (WHERE last_click IS NULL OR last_click < ts) AS abandoned_n
        FROM (SELECT nid, ts, lead(nid) OVER s AS next_nid, lead(ts) OVER s AS next_ts,
                     max(CASE WHEN clk THEN ts END) OVER (s ROWS BETWEEN UNBOUNDED PRECEDING
                                                             AND UNBOUNDED FOLLOWING) AS last_click
              FROM _ev WHERE sh IS NOT NULL AND ts IS NOT NULL
              -- one window specification, so the events are partitioned and sorted once
              WINDOW s AS (PARTITION BY sh ORDER BY ts, nid))
        GROUP BY ALL"""


_NO_SEQUENCES = """CREATE OR REPLACE TEMP TABLE _seq AS
    SELECT CAST(NULL AS INTEGER) AS nid, CAST(NULL AS INTEGER) AS next_nid,
           CAST(0 AS BIGINT) AS n, CAST(0 AS BIGINT) AS abandoned_n WHERE false"""


def reform_sql() -> list[str]:
    """Which (query, successor) pairs are similar, tested once per distinct pair.

    Sharing a term is a join on term hashes (terms: whitespace-separated tokens of the
    normalised text), far cheaper than splitting both texts of every pair. Pairs sharing none
    get the edit-distance test, bounded by ``min(2, ceil(0.3 * longer length))``, behind two
    exact filters that spare most ``levenshtein`` calls: the lengths differ by no more than
    the bound, and one of the three thirds of the first text occurs in the second (two edits
    cannot touch all three thirds, so an untouched third survives verbatim).
    """
    return [
        """CREATE OR REPLACE TEMP TABLE _terms AS
        SELECT DISTINCT nid, hash(term) AS term
        FROM (SELECT nid, unnest(string_split(query, ' ')) AS term FROM _norms)
        WHERE term <> ''""",
        """CREATE OR REPLACE TEMP TABLE _alike AS
        SELECT DISTINCT p.nid, p.next_nid
        FROM _pairs AS p
        JOIN _terms AS a ON a.nid = p.nid
        JOIN _terms AS b ON b.nid = p.next_nid AND b.term = a.term""",
        # The length test on integers first: it leaves a fifth of the pairs to fetch
        # both texts for.
        "CREATE OR REPLACE TEMP TABLE _lens AS SELECT nid, length(query) AS len FROM _norms",
        """CREATE OR REPLACE TEMP TABLE _near AS
        SELECT p.nid, p.next_nid
        FROM _pairs AS p
        JOIN _lens AS a ON a.nid = p.nid
        JOIN _lens AS b ON b.nid = p.next_nid
        WHERE abs(a.len - b.len) <= least(2, ceil(0.3 * greatest(a.len, b.len)))""",
        "DROP TABLE _lens",
        """INSERT INTO _alike
        SELECT p.nid, p.next_nid
        FROM _near AS p
        JOIN _norms AS a ON a.nid = p.nid
        JOIN _norms AS b ON b.nid = p.next_nid
        WHERE (contains(b.query, substr(a.query, 1, length(a.query) // 3))
               OR contains(b.query, substr(a.query, length(a.query) // 3 + 1, length(a.query) // 3))
               OR contains(b.query, substr(a.query, 2 * (length(a.query) // 3) + 1)))
          AND levenshtein(a.query, b.query)
              <= least(2, ceil(0.3 * greatest(length(a.query), length(b.query))))""",
        """CREATE OR REPLACE TEMP TABLE _reform AS
        SELECT nid, sum(n) AS reformulated
        FROM _pairs SEMI JOIN (SELECT DISTINCT nid, next_nid FROM _alike) USING (nid, next_nid)
        GROUP BY nid""",
        "DROP TABLE _terms",
        "DROP TABLE _alike",
        "DROP TABLE _near",
        "DROP TABLE _pairs",
    ]


def stats_columns(fields: Mapping[str, str]) -> list[str]:
    """Columns of ``_stats`` (sessions / users only when the log has them)."""
    optional = [n for n, f in (("sessions", "session_id"), ("users", "user_id")) if f in fields]
    rates = ["zero_result_rate", "reformulation_rate", "abandonment_rate"]
    return ["query", "frequency", *optional, *rates, "pii"]


def stats_sql(fields: Mapping[str, str]) -> str:
    """The result: one row per normalised query kept (in no particular order)."""
    sequenced = _sequences(fields)
    optional = "".join(
        f"t.{n}, " for n, f in (("sessions", "session_id"), ("users", "user_id")) if f in fields
    )
    zero = _rate("t.zero_n", "t.rc_n", "result_count" in fields)
    reform = _rate("coalesce(r.reformulated, 0)", "t.seq_n", sequenced)
    abandon = _rate("t.abandoned_n", "t.seq_n", sequenced and "clicked" in fields)
    return f"""CREATE OR REPLACE TEMP TABLE _stats AS
        SELECT t.nid, t.query, t.frequency, {optional}
               {zero} AS zero_result_rate, {reform} AS reformulation_rate,
               {abandon} AS abandonment_rate, t.pii
        FROM _per_query AS t LEFT JOIN _reform AS r USING (nid)
        WHERE NOT t.excluded"""


def _rate(count: str, total: str, available: bool) -> str:
    if not available:
        return _NAN
    return f"CASE WHEN {total} > 0 THEN {count} / {total} ELSE {_NAN} END"
