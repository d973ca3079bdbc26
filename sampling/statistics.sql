-- Per-query statistics of a search log: the reference SQL (docs/warehouse.md).
--
-- Assay runs this very file in DuckDB for every log it ingests; a warehouse runs it too, with
-- at most function names changed (see docs/warehouse.md), so that its output imports as a
-- statistics file and gives the same strata, draw and inclusion probabilities.
--
-- Inputs, one row per log line and one per normalised query:
--   events(query_id, session_id, user_id, ts, result_count, clicked)
--     query_id      the line's normalised query (its text, or an id ordered as the texts are)
--     session_id    NULL when the line has none (an empty id is NULL)
--     user_id       NULL when the line has none
--     ts            DOUBLE, seconds (or the log's own epoch unit, the window in that unit);
--                   NULL when missing or unreadable
--     result_count  DOUBLE, NULL when missing or not a number
--     clicked       BOOLEAN: a click on this search (NULL counts as no click)
--   queries(query_id, query)  the normalised text of each query_id
-- Parameter: {window}, the reformulation window in the unit of ts (default 300 seconds).
-- Output: one row per query_id: query_id, query, frequency, sessions, users,
--   zero_result_rate, reformulation_rate, abandonment_rate (a rate is NULL without events
--   to measure it on).
WITH sequenced AS (
    -- The lines of a session in time order, ties broken by the query's text.
    -- (one partitioning and order for the three, so that the lines are sorted once)
    SELECT query_id,
           ts,
           lead(query_id) OVER (PARTITION BY session_id ORDER BY ts, query_id) AS next_id,
           lead(ts) OVER (PARTITION BY session_id ORDER BY ts, query_id) AS next_ts,
           max(CASE WHEN clicked THEN ts END) OVER (
               PARTITION BY session_id ORDER BY ts, query_id
               ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING
           ) AS last_click
    FROM events
    WHERE session_id IS NOT NULL AND ts IS NOT NULL
),
steps AS (
    -- A candidate reformulation: the next query of the session, a different one, within
    -- the window. Abandoned: no click in the session at or after this search.
    SELECT query_id,
           CASE WHEN next_ts - ts > 0 AND next_ts - ts <= {window} AND next_id <> query_id
                THEN next_id END AS next_id,
           CASE WHEN last_click IS NULL OR last_click < ts THEN 1 ELSE 0 END AS abandoned
    FROM sequenced
),
step_counts AS (
    -- Searches by (query, candidate successor): far fewer rows than searches.
    SELECT query_id, next_id, count(*) AS searches, sum(abandoned) AS abandoned
    FROM steps
    GROUP BY query_id, next_id
),
pairs AS (
    SELECT query_id, next_id FROM step_counts WHERE next_id IS NOT NULL
),
texts AS (
    -- The terms (whitespace-separated tokens) and length of each query met in a pair, once.
    SELECT query_id, query, length(query) AS len,
           list_filter(string_split(query, ' '), lambda term: term <> '') AS terms
    FROM queries
    WHERE query_id IN (SELECT query_id FROM pairs UNION SELECT next_id FROM pairs)
),
alike AS (
    -- Similar: a shared term, or at most least(2, ceil(0.3 * longer length)) edits apart
    -- (characters, not bytes).
    SELECT p.query_id, p.next_id
    FROM pairs AS p
    JOIN texts AS a ON a.query_id = p.query_id
    JOIN texts AS b ON b.query_id = p.next_id
    WHERE list_has_any(a.terms, b.terms)
       OR (abs(a.len - b.len) <= least(2, ceil(0.3 * greatest(a.len, b.len)))
           AND levenshtein(a.query, b.query) <= least(2, ceil(0.3 * greatest(a.len, b.len))))
),
sequence_counts AS (
    SELECT c.query_id,
           sum(c.searches) AS sequenced,
           sum(CASE WHEN r.query_id IS NOT NULL THEN c.searches ELSE 0 END) AS reformulated,
           sum(c.abandoned) AS abandoned
    FROM step_counts AS c
    LEFT JOIN alike AS r ON r.query_id = c.query_id AND r.next_id = c.next_id
    GROUP BY c.query_id
),
line_counts AS (
    SELECT query_id,
           count(*) AS frequency,
           count(result_count) AS counted,
           count(CASE WHEN result_count = 0 THEN 1 END) AS zero
    FROM events
    GROUP BY query_id
),
id_pairs AS (
    -- Distinct (query, session) and (query, user) pairs in one pass over the lines.
    SELECT query_id, session_id, user_id, grouping(user_id) = 1 AS by_session
    FROM events
    GROUP BY GROUPING SETS ((query_id, session_id), (query_id, user_id))
),
id_counts AS (
    SELECT query_id,
           count(CASE WHEN by_session AND session_id IS NOT NULL THEN 1 END) AS sessions,
           count(CASE WHEN NOT by_session AND user_id IS NOT NULL THEN 1 END) AS users
    FROM id_pairs
    GROUP BY query_id
)
SELECT l.query_id,
       t.query,
       l.frequency,
       i.sessions,
       i.users,
       CASE WHEN l.counted > 0 THEN CAST(l.zero AS DOUBLE) / l.counted END AS zero_result_rate,
       CASE WHEN s.sequenced > 0 THEN CAST(s.reformulated AS DOUBLE) / s.sequenced END
           AS reformulation_rate,
       CASE WHEN s.sequenced > 0 THEN CAST(s.abandoned AS DOUBLE) / s.sequenced END
           AS abandonment_rate
FROM line_counts AS l
JOIN id_counts AS i ON i.query_id = l.query_id
JOIN queries AS t ON t.query_id = l.query_id
LEFT JOIN sequence_counts AS s ON s.query_id = l.query_id
