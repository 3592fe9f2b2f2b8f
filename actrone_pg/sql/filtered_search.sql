-- The CTEs that go before a filtered search (builders.search): one pass finds the filtered set,
-- its cosines and its BM25 statistics, which hybrid_search is then given (FILTERED_CANDIDATES,
-- FILTERED_STATS in statements.py). Placeholders: s, the schema; vs, pgvector's schema; where,
-- the filter's conditions on m (each value a named parameter of its key). Parameters, by name:
-- agent, embedder, now, vector, terms, threshold, limit, and the probe's sample, indexed,
-- broad_divisor, most_divisor.
-- - fp: the filter is checked on a sample of the agent's memories (the first sample by id: a few
--   hundred primary-key reads). broad: it matches at least 1 / broad_divisor of them, or no index
--   serves it. most: broad, and it matches more than 1 / most_divisor. The sample only picks the
--   way; every way gives the same result.
-- - fm: if not broad, the matching rows only (a selective filter, read through that index); if
--   broad, every row of the agent, ok telling whether it matches (one pass: reading most of the
--   rows through an index costs more), the filter evaluated once per row. The cosine is computed
--   for live matching rows of the embedder. A row's terms are kept only if the row is on the side
--   its statistics are counted on (the matching rows, or if most match the others) and has one of
--   the query's terms: term_freqs is read (and decompressed) for that side only, and what is
--   materialised stays small.
-- - fn: the filtered set's N and total length (every embedder, expired ones included until swept,
--   as the pipeline counts them).
-- - fd: each term's document frequency in the filtered set, counted on that side: among the
--   matching rows, or as the agent's (term_stats) minus the other rows'.
-- docs/postgres.md, "Filtered search", has the measurements.
fp AS MATERIALIZED (
  SELECT b.broad, b.broad AND s.hits * %(most_divisor)s::bigint > s.n AS most
  FROM (SELECT count(*) FILTER (WHERE {where}) AS hits, count(*) AS n
        FROM (SELECT * FROM {s}.memories AS m WHERE m.agent_id = %(agent)s
              ORDER BY m.id LIMIT %(sample)s) AS m) AS s
  CROSS JOIN LATERAL (
    SELECT NOT %(indexed)s::bool OR s.hits * %(broad_divisor)s::bigint >= s.n AS broad) AS b),
fm AS MATERIALIZED (
  SELECT m.id, m.created_at, m.doc_len,
         CASE WHEN m.term_freqs ?| %(terms)s::text[] THEN m.term_freqs END AS term_freqs,
         true AS ok,
         CASE WHEN true AND m.embedder = %(embedder)s
                   AND (m.expires_at IS NULL OR m.expires_at > %(now)s)
              THEN -(m.embedding OPERATOR({vs}.<#>) %(vector)s) END AS cosine
  FROM {s}.memories AS m
  WHERE m.agent_id = %(agent)s AND {where} AND NOT (SELECT fp.broad FROM fp)
  UNION ALL
  SELECT y.id, y.created_at, y.doc_len,
         CASE WHEN y.ok <> (SELECT fp.most FROM fp) AND y.term_freqs ?| %(terms)s::text[]
              THEN y.term_freqs END,
         y.ok,
         CASE WHEN y.ok AND y.embedder = %(embedder)s
                   AND (y.expires_at IS NULL OR y.expires_at > %(now)s)
              THEN -(y.embedding OPERATOR({vs}.<#>) %(vector)s) END AS cosine
  FROM (SELECT m.id, m.created_at, m.doc_len, m.term_freqs, m.embedder, m.expires_at,
               m.embedding, COALESCE({where}, false) AS ok
        FROM {s}.memories AS m
        WHERE m.agent_id = %(agent)s AND (SELECT fp.broad FROM fp) OFFSET 0) AS y),
ft AS MATERIALIZED (SELECT f.ok, f.term_freqs FROM fm AS f WHERE f.term_freqs IS NOT NULL),
fc AS (
  SELECT ARRAY(SELECT x.id
               FROM (SELECT f.id FROM fm AS f WHERE f.cosine >= %(threshold)s::float8
                     ORDER BY f.cosine DESC, f.created_at DESC, f.id LIMIT %(limit)s::int) AS x
               ORDER BY x.id) AS ids),
fn AS (
  SELECT count(*) FILTER (WHERE f.ok) AS n_docs,
         COALESCE(sum(f.doc_len) FILTER (WHERE f.ok), 0)::bigint AS total_length
  FROM fm AS f),
fd AS (
  SELECT ARRAY(
    SELECT (CASE WHEN (SELECT fp.most FROM fp)
                 THEN COALESCE((SELECT ts.df FROM {s}.term_stats AS ts
                                WHERE ts.agent_id = %(agent)s AND ts.term = t.term), 0)
                      - (SELECT count(*) FROM ft AS f WHERE NOT f.ok AND f.term_freqs ? t.term)
                 ELSE (SELECT count(*) FROM ft AS f WHERE f.ok AND f.term_freqs ? t.term)
            END)::integer
    FROM unnest(%(terms)s::text[]) WITH ORDINALITY AS t(term, ord) ORDER BY t.ord) AS dfs)
