-- One call of the store, whole: a session's recent turns (L1) and the agent's memories ranked by
-- {schema}.hybrid_search's own statement and packed into a token budget by {schema}.pack_positions
-- (L2), in one round trip and one snapshot (spec §3.2 allows the one statement). Installed by the
-- migrations as {schema}.retrieve; the store calls it alone,
-- `SELECT * FROM {schema}.retrieve(agent, ...)`, the agent first, so that on Citus the whole call is delegated to the agent's worker
-- (distributed by its first argument, colocated with the memories).
--
-- Being PL/pgSQL, it plans each of its statements once per session and reuses the plan
-- (force_generic_plan), whoever calls it, psql included.
--
-- The ranking is hybrid_search's body, inline (between the "ranking:" lines, copied from
-- hybrid_search by `python -m actrone_pg.migrations._render`), rather than a call of it: called
-- as a function, hybrid_search returned its 500 ranked rows through a tuplestore of its own, 19
-- columns wide, that h then copied; inline, they are stored once, the columns h reads
-- (docs/benchmarks.md, "The ranking's fixed cost, measured by parts"). The body's parameters
-- this function does not take are variables of the same names (p_content false: the chosen rows
-- are read once, below; p_candidates and the given statistics NULL: the agent's exact scan and
-- statistics). enable_nestloop is off as in hybrid_search, for the body's joins; the final
-- probe per chosen memory is a LATERAL subquery, which only a nested loop runs.
--
-- The explain columns are cosine, bm25, ranks and fused_score; ranks is the array of the body's
-- ranks (one element per ranking of actrone_pg.ranking.CHANNELS, in the order of
-- p_rrf_weights), so that a new ranking changes hybrid_search's body alone, provided it keeps
-- the columns read here: position, cosine, bm25, fused_score, id, token_count and ranks.
--
-- p_session_id NULL reads no turns (search_memories). p_budget NULL takes every ranked memory;
-- p_max_hits stops after that many (NULL: no limit), as pack_positions does. Rows:
--   kind 'turn':   the session's newest p_turn_limit turns, newest first (id, created_at,
--                  token_count, user_message, assistant_message, tool_results);
--   kind 'memory': each chosen memory, best first, with `candidates_considered` (how many
--                  were ranked), its explain columns and every stored field (metadata as text);
--   kind 'ranked': when no memory was chosen, one row with `candidates_considered` alone.
-- The agent's expired memories that the sweeper has not deleted yet are never admitted.
--
-- From psql:
--   SELECT kind, id, fused_score FROM {schema}.retrieve('agent', 'session', 50, 86400,
--       'embedder', ARRAY['term'], '[...]'::vector, 0.5, 500, true, 60, ARRAY[1, 1, 0.3],
--       0.7, 0.3, now(), 1.2, 0.3, 1000, NULL);
CREATE OR REPLACE FUNCTION {schema}.retrieve(
    p_agent_id text,
    p_session_id text,
    p_turn_limit integer,
    p_session_ttl double precision,
    p_embedder text,
    p_terms text[],
    p_vector {vector_schema}.vector,
    p_threshold double precision,
    p_limit integer,
    p_hybrid boolean,
    p_rrf_k integer,
    p_rrf_weights double precision[],
    p_relevance_weight double precision,
    p_recency_weight double precision,
    p_now timestamptz,
    p_bm25_k1 double precision,
    p_bm25_b double precision,
    p_budget bigint,
    p_max_hits integer
)
RETURNS TABLE (
    kind text,
    candidates_considered integer,
    cosine double precision,
    bm25 double precision,
    ranks integer[],
    fused_score double precision,
    id text,
    session_id text,
    content text,
    content_type text,
    importance double precision,
    tags text[],
    source text,
    sensitivity text,
    created_at timestamptz,
    metadata text,
    embedder text,
    token_count integer,
    expires_at timestamptz,
    source_turn_ids text[],
    version integer,
    valid_from timestamptz,
    valid_to timestamptz,
    user_message text,
    assistant_message text,
    tool_results jsonb
)
LANGUAGE plpgsql STABLE
SET jit = off
SET enable_nestloop = off
SET plan_cache_mode = force_generic_plan
AS $fn$
#variable_conflict use_column
DECLARE
    p_content boolean := false;
    p_candidates text[];
    p_excluded text[];
    p_n_docs bigint;
    p_total_length bigint;
    p_doc_freqs integer[];
BEGIN
    IF p_session_id IS NOT NULL THEN
        RETURN QUERY
        SELECT 'turn'::text, NULL::integer, NULL::float8, NULL::float8, NULL::integer[],
               NULL::float8, t.id::text, NULL::text, NULL::text, NULL::text, NULL::float8,
               NULL::text[], NULL::text, NULL::text, t.created_at, NULL::text, NULL::text,
               t.token_count, NULL::timestamptz, NULL::text[],
               NULL::integer, NULL::timestamptz, NULL::timestamptz, t.user_message,
               t.assistant_message, t.tool_results
        FROM {schema}.turns AS t
        JOIN {schema}.sessions AS x ON x.agent_id = t.agent_id AND x.session_id = t.session_id
        WHERE x.agent_id = p_agent_id AND x.session_id = p_session_id
          AND x.last_active_at >= now() - make_interval(secs => p_session_ttl)
        ORDER BY t.seq DESC
        LIMIT p_turn_limit;
    END IF;
    -- One probe of the partial index of expiring memories.
    SELECT array_agg(e.id) INTO p_excluded
    FROM {schema}.memories AS e
    WHERE e.agent_id = p_agent_id AND e.expires_at <= p_now;
    RETURN QUERY
    WITH h AS MATERIALIZED (
        SELECT b."position", b.cosine, b.bm25, b.ranks, b.fused_score, b.id, b.token_count
        FROM (
-- ranking: hybrid_search's body, as python -m actrone_pg.migrations._render copies it
WITH
-- Admission: cosine >= threshold, the nearest p_limit, ties newer first then id; the threshold is
-- applied before the sort, so only admitted rows are sorted (migration 0003). The dense rank is
-- the row's place in that same sort (one sort for the admission and the dense ranking).
nearest AS MATERIALIZED (
    SELECT u.id, u.created_at, u.cosine,
           row_number() OVER (ORDER BY u.cosine DESC, u.created_at DESC, u.id) AS dense_rank
    FROM (
        -- Vectors of up to 600 dimensions come from an index-only scan of ix_memories_candidates;
        -- larger ones, which do not fit in a btree entry, through the primary key. The
        -- embedder's registered dimension decides the branch once per call (a one-time filter);
        -- with p_candidates only the third branch runs, fetching those ids by primary key.
        SELECT m.id, m.created_at, -(m.embedding OPERATOR({vector_schema}.<#>) p_vector) AS cosine
        FROM {schema}.memories AS m
        WHERE m.agent_id = p_agent_id AND m.embedder = p_embedder
          AND {vector_schema}.vector_dims(m.embedding) <= 600
          AND -(m.embedding OPERATOR({vector_schema}.<#>) p_vector) >= p_threshold
          AND (SELECT e.dimensions FROM {schema}.embedders AS e WHERE e.name = p_embedder) <= 600
          AND p_candidates IS NULL
          AND (p_excluded IS NULL OR m.id <> ALL (p_excluded))
        UNION ALL
        SELECT m.id, m.created_at, -(m.embedding OPERATOR({vector_schema}.<#>) p_vector)
        FROM {schema}.memories AS m
        WHERE m.agent_id = p_agent_id AND m.embedder = p_embedder
          AND -(m.embedding OPERATOR({vector_schema}.<#>) p_vector) >= p_threshold
          AND (SELECT e.dimensions FROM {schema}.embedders AS e WHERE e.name = p_embedder) > 600
          AND p_candidates IS NULL
          AND (p_excluded IS NULL OR m.id <> ALL (p_excluded))
        UNION ALL
        SELECT m.id, m.created_at, -(m.embedding OPERATOR({vector_schema}.<#>) p_vector)
        FROM {schema}.memories AS m
        WHERE p_candidates IS NOT NULL
          AND m.agent_id = p_agent_id AND m.id = ANY (p_candidates) AND m.embedder = p_embedder
          AND -(m.embedding OPERATOR({vector_schema}.<#>) p_vector) >= p_threshold
          AND (p_excluded IS NULL OR m.id <> ALL (p_excluded))
    ) AS u
    ORDER BY u.cosine DESC, u.created_at DESC, u.id
    LIMIT p_limit
),
-- BM25 statistics of the agent's whole corpus (every embedder), kept by the writers, or the
-- ones given (a filtered set's).
given_stats AS (
    SELECT
        COALESCE(p_n_docs, max(s.n_docs), 0) AS n_docs,
        COALESCE(p_total_length, max(s.total_length), 0) AS total_length
    FROM {schema}.agent_stats AS s
    WHERE s.agent_id = p_agent_id AND p_n_docs IS NULL
),
stats AS MATERIALIZED (
    SELECT
        g.n_docs,
        CASE WHEN g.n_docs > 0 AND g.total_length > 0
             THEN g.total_length::float8 / g.n_docs::float8
             ELSE 1.0::float8 END AS avgdl
    FROM given_stats AS g
),
terms AS (
    SELECT t.term, min(t.ord) AS ord
    FROM unnest(p_terms) WITH ORDINALITY AS t(term, ord)
    WHERE t.term IS NOT NULL AND t.term <> ''
    GROUP BY t.term
),
-- MATERIALIZED: computed once, not once per candidate. Each term's document frequency is one
-- primary-key probe (as a join the planner read all of the agent's term statistics, migration
-- 0008). Stored in query-term order, the order every read of it below returns, so that each
-- candidate's BM25 terms are summed in query-term order, as ranking.bm25 sums them.
term_idf AS MATERIALIZED (
    SELECT
        terms.term,
        terms.ord,
        ln(1.0::float8
           + ((st.n_docs - f.df)::float8 + 0.5::float8) / (f.df::float8 + 0.5::float8)) AS idf
    FROM terms
    CROSS JOIN stats AS st
    CROSS JOIN LATERAL (
        SELECT CASE WHEN p_doc_freqs IS NOT NULL
                    THEN COALESCE(p_doc_freqs[terms.ord::integer], 0)
                    ELSE COALESCE((
                        SELECT ts.df FROM {schema}.term_stats AS ts
                        WHERE ts.agent_id = p_agent_id AND ts.term = terms.term
                    ), 0) END AS df
    ) AS f
    -- 0018: a term no document holds adds 0.0 to every sum; it is not looked up.
    WHERE f.df > 0
    ORDER BY terms.ord
),
-- The recency and lexical rankings, one sort each. A candidate without a query term has a NULL
-- BM25 and no lexical rank; those with one sort first (NULLS LAST), so counting them in that
-- order gives each its 1-based rank among them, as a row_number() over them alone would.
ranked AS (
    SELECT
        s.*,
        row_number() OVER (ORDER BY s.created_at DESC, s.id) AS recency_rank,
        CASE WHEN s.bm25 > 0.0::float8 THEN
            count(*) FILTER (WHERE s.bm25 > 0.0::float8)
                OVER (ORDER BY s.bm25 DESC NULLS LAST, s.created_at DESC, s.id
                      ROWS UNBOUNDED PRECEDING)
        END AS lexical_rank
    FROM (
        SELECT
            n.id, n.created_at, n.cosine, n.dense_rank, d.token_count, d.bm25,
            d.session_id, d.content, d.content_type, d.importance, d.tags, d.source,
            d.sensitivity, d.metadata, d.embedder
        FROM nearest AS n
        -- Each candidate's row, fetched once through the primary key: one index scan with the
        -- candidate ids as an array (PostgreSQL 17+ walks the index once for a sorted array),
        -- its BM25 computed there (OFFSET 0: once per row, not once per use). Only documents
        -- sharing a term get a sum; each term's frequency is read once ("->>"), its row of
        -- term_idf skipped where the document lacks it. The memory's fields are carried only
        -- for p_content (NULL otherwise), so the sorts below move narrow rows.
        JOIN (
            SELECT m.id, m.token_count,
                   CASE WHEN m.term_freqs ?| ARRAY(SELECT ti.term FROM term_idf AS ti) THEN (
                       SELECT sum(x.idf * (x.tf * (p_bm25_k1 + 1.0::float8))
                                  / (x.tf + p_bm25_k1 * ((1.0::float8 - p_bm25_b)
                                                         + p_bm25_b * m.doc_len::float8
                                                           / (SELECT st.avgdl FROM stats AS st))))
                       FROM (SELECT ti.idf, (m.term_freqs ->> ti.term)::integer::float8 AS tf
                             FROM term_idf AS ti OFFSET 0) AS x
                       WHERE x.tf IS NOT NULL
                   ) END AS bm25,
                   CASE WHEN p_content THEN m.session_id END AS session_id,
                   CASE WHEN p_content THEN m.content END AS content,
                   CASE WHEN p_content THEN m.content_type END AS content_type,
                   CASE WHEN p_content THEN m.importance END AS importance,
                   CASE WHEN p_content THEN m.tags END AS tags,
                   CASE WHEN p_content THEN m.source END AS source,
                   CASE WHEN p_content THEN m.sensitivity END AS sensitivity,
                   CASE WHEN p_content THEN m.metadata END AS metadata,
                   CASE WHEN p_content THEN m.embedder END AS embedder
            FROM {schema}.memories AS m
            WHERE m.agent_id = p_agent_id AND m.id = ANY (ARRAY(SELECT c.id FROM nearest AS c))
            OFFSET 0
        ) AS d ON d.id = n.id
    ) AS s
),
fused AS (
    SELECT
        r.*,
        CASE WHEN p_hybrid THEN
            (p_rrf_weights[1] / (p_rrf_k + r.dense_rank)::float8
             + COALESCE(p_rrf_weights[2] / (p_rrf_k + r.lexical_rank)::float8, 0.0::float8))
            + p_rrf_weights[3] / (p_rrf_k + r.recency_rank)::float8
        ELSE
            p_relevance_weight * r.cosine
            + p_recency_weight * (
                CASE WHEN extract(epoch FROM (p_now - r.created_at)) <= 0 THEN 1.0::float8
                     ELSE greatest(0.0::float8,
                                   1.0::float8
                                   - extract(epoch FROM (p_now - r.created_at))::float8
                                     / 2592000.0::float8)
                END)
        END AS fused_score
    FROM ranked AS r
)
-- Ordered as the final ranking's window is: no sort of its own.
SELECT
    f.id,
    row_number() OVER (ORDER BY f.fused_score DESC, f.created_at DESC, f.id)::integer,
    f.cosine,
    f.bm25,
    f.dense_rank::integer,
    CASE WHEN p_hybrid THEN f.lexical_rank::integer END,
    f.recency_rank::integer,
    f.fused_score,
    f.session_id, f.content, f.content_type, f.importance, f.tags, f.source, f.sensitivity,
    f.created_at,
    f.metadata,
    f.embedder,
    f.token_count,
    ARRAY[f.dense_rank::integer, CASE WHEN p_hybrid THEN f.lexical_rank::integer END,
          f.recency_rank::integer]
FROM fused AS f
ORDER BY f.fused_score DESC, f.created_at DESC, f.id
-- ranking: end
        ) AS b (id, "position", cosine, bm25, dense_rank, lexical_rank, recency_rank,
                fused_score, session_id, content, content_type, importance, tags, source,
                sensitivity, created_at, metadata, embedder, token_count, ranks)
    ),
    p AS MATERIALIZED (
        SELECT {schema}.pack_positions(array_agg(h.token_count ORDER BY h.position), p_budget,
                                       p_max_hits) AS taken,
               count(*)::integer AS n
        FROM h
    ),
    c AS MATERIALIZED (
        SELECT h.* FROM h WHERE h.position = ANY ((SELECT p.taken FROM p)::integer[])
    )
    SELECT CASE WHEN c.id IS NULL THEN 'ranked' ELSE 'memory' END, p.n, c.cosine, c.bm25,
           c.ranks, c.fused_score, f.id::text, f.session_id::text, f.content, f.content_type,
           f.importance, f.tags, f.source, f.sensitivity, f.created_at, f.metadata::text,
           f.embedder::text, f.token_count, f.expires_at, f.source_turn_ids, f.version,
           f.valid_from, f.valid_to, NULL::text, NULL::text, NULL::jsonb
    -- One primary-key probe per chosen memory (LATERAL, OFFSET 0 so that it stays a probe).
    FROM p
    LEFT JOIN (c CROSS JOIN LATERAL (
        SELECT m.id, m.session_id, m.content, m.content_type, m.importance, m.tags, m.source,
               m.sensitivity, m.created_at, m.metadata, m.embedder, m.token_count, m.expires_at,
               m.source_turn_ids, m.version, m.valid_from, m.valid_to
        FROM {schema}.memories AS m
        WHERE m.agent_id = p_agent_id AND m.id = c.id OFFSET 0) AS f) ON true
    ORDER BY c.position;
END
$fn$
