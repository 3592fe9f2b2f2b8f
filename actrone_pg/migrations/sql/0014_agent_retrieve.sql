-- Pinned by migration 0014. Never edited: a change is a new revision with its own copy.
-- One store call on a schema distributed with Citus by agent_id (docs/scale-out.md), whole: a
-- session's recent turns (L1) and the agent's memories ranked as {schema}.hybrid_search ranks
-- them (0013: admission, the dense, BM25 and recency rankings, RRF or the classic blend, the
-- same expressions in the same order) and packed as {schema}.pack_positions packs them (0010),
-- with the chosen memories' rows: {schema}.retrieve's result (0015), over any candidates.
-- Installed by the migrations as {schema}.agent_retrieve.
--
-- Why a copy of hybrid_search's ranking in PL/pgSQL: Citus plans no statement of a SQL function
-- that reads a distributed table with parameters ("could not create distributed plan"), on the
-- coordinator and on a worker alike, so hybrid_search (and retrieve, which calls it) cannot run
-- on a distributed schema; and a distributed function is delegated to the worker holding the
-- agent's shards only when it is called alone (SELECT * FROM f(...), never inside a join).
-- Migration 0014 distributes this function by its first argument, colocated with memories:
-- every statement below reads the agent's shards only (agent_id = p_agent_id on every
-- distributed table, embedders being a reference table), so the worker runs it locally, in one
-- round trip from the coordinator. On a single server it works the same way (the store calls it
-- only on a distributed schema; the parity tests hold it to the reference there).
--
-- Arguments: retrieve's session arguments (p_session_id NULL reads no turns), then those of
-- hybrid_search (0013) without p_content and p_excluded (the agent's expired memories not yet
-- swept are looked up here when p_n_docs is NULL, as the store's UNFILTERED argument does; a
-- filtered search passes its live candidates and statistics, a large agent its HNSW index's
-- nearest ids), then pack_positions' p_budget and p_max_hits (NULL and NULL: every ranked
-- memory). Rows as retrieve's: kind 'turn' (newest first), 'memory' (best first, with
-- `candidates_considered`), or one 'ranked' row when no memory was chosen; metadata as text.
--
-- From psql, on the coordinator:
--   SELECT kind, id, fused_score FROM {schema}.agent_retrieve('agent', 'session', 50, 86400,
--       'embedder', ARRAY['term'], '[...]'::vector, 0.5, 500, true, 60, ARRAY[1, 1, 0.3],
--       0.7, 0.3, now(), NULL, 1.2, 0.3, NULL, NULL, NULL, 1000, NULL);
CREATE OR REPLACE FUNCTION {schema}.agent_retrieve(
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
    p_candidates text[],
    p_bm25_k1 double precision,
    p_bm25_b double precision,
    p_n_docs bigint,
    p_total_length bigint,
    p_doc_freqs integer[],
    p_budget bigint,
    p_max_hits integer
)
RETURNS TABLE (
    kind text,
    candidates_considered integer,
    cosine double precision,
    bm25 double precision,
    dense_rank integer,
    lexical_rank integer,
    recency_rank integer,
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
-- as hybrid_search (0005): joins between CTEs of at most p_limit rows, never nested loops
SET enable_nestloop = off
AS $fn$
#variable_conflict use_column
DECLARE
    v_excluded text[];
BEGIN
    IF p_session_id IS NOT NULL THEN
        RETURN QUERY
        SELECT 'turn'::text, NULL::integer, NULL::float8, NULL::float8, NULL::integer,
               NULL::integer, NULL::integer, NULL::float8, t.id::text, NULL::text, NULL::text,
               NULL::text, NULL::float8, NULL::text[], NULL::text, NULL::text, t.created_at,
               NULL::text, NULL::text, t.token_count, NULL::timestamptz, NULL::text[],
               NULL::integer, NULL::timestamptz, NULL::timestamptz, t.user_message,
               t.assistant_message, t.tool_results
        FROM {schema}.turns AS t
        JOIN {schema}.sessions AS x ON x.agent_id = t.agent_id AND x.session_id = t.session_id
        WHERE x.agent_id = p_agent_id AND x.session_id = p_session_id
          AND x.last_active_at >= now() - make_interval(secs => p_session_ttl)
        ORDER BY t.seq DESC
        LIMIT p_turn_limit;
    END IF;
    IF p_n_docs IS NULL THEN
        v_excluded := (SELECT array_agg(e.id) FROM {schema}.memories AS e
                       WHERE e.agent_id = p_agent_id AND e.expires_at <= p_now);
    END IF;
    RETURN QUERY
WITH
-- Admission: cosine >= threshold, the nearest p_limit, ties newer first then id. The threshold
-- is applied before the sort, so only admitted rows are sorted; the distance of an admitted row
-- is then computed twice (filter and sort key), which costs less than sorting every row when a
-- query admits a tenth of the agent's memories (17.5 vs 19.2 ms p50 in an ad-hoc A/B of the two
-- forms on the data of benchmarks/pg_store_latency.py, ~1,000 admitted per query, loaded host).
nearest AS (
    -- Vectors of up to 600 dimensions come from an index-only scan of ix_memories_candidates
    -- (the agent's vectors stored together in the index); larger ones, which do not fit in a
    -- btree entry, through the primary key. The embedder's registered dimension decides the
    -- branch once per call (a one-time filter), so the other branch costs nothing; with
    -- p_candidates only the third branch runs, fetching those ids through the primary key.
    SELECT u.id, u.created_at, u.cosine
    FROM (
        SELECT m.id, m.created_at, -(m.embedding OPERATOR({vector_schema}.<#>) p_vector) AS cosine
        FROM {schema}.memories AS m
        WHERE m.agent_id = p_agent_id AND m.embedder = p_embedder
          AND {vector_schema}.vector_dims(m.embedding) <= 600
          AND -(m.embedding OPERATOR({vector_schema}.<#>) p_vector) >= p_threshold
          AND (SELECT e.dimensions FROM {schema}.embedders AS e WHERE e.name = p_embedder) <= 600
          AND p_candidates IS NULL
          AND (v_excluded IS NULL OR m.id <> ALL (v_excluded))
        UNION ALL
        SELECT m.id, m.created_at, -(m.embedding OPERATOR({vector_schema}.<#>) p_vector)
        FROM {schema}.memories AS m
        WHERE m.agent_id = p_agent_id AND m.embedder = p_embedder
          AND -(m.embedding OPERATOR({vector_schema}.<#>) p_vector) >= p_threshold
          AND (SELECT e.dimensions FROM {schema}.embedders AS e WHERE e.name = p_embedder) > 600
          AND p_candidates IS NULL
          AND (v_excluded IS NULL OR m.id <> ALL (v_excluded))
        UNION ALL
        SELECT m.id, m.created_at, -(m.embedding OPERATOR({vector_schema}.<#>) p_vector)
        FROM {schema}.memories AS m
        WHERE p_candidates IS NOT NULL
          AND m.agent_id = p_agent_id AND m.id = ANY (p_candidates) AND m.embedder = p_embedder
          AND -(m.embedding OPERATOR({vector_schema}.<#>) p_vector) >= p_threshold
          AND (v_excluded IS NULL OR m.id <> ALL (v_excluded))
    ) AS u
    ORDER BY u.cosine DESC, u.created_at DESC, u.id
    LIMIT p_limit
),
candidates AS (
    SELECT n.id, n.created_at, n.cosine FROM nearest AS n WHERE n.cosine >= p_threshold
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
stats AS (
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
-- MATERIALIZED: computed once, not once per candidate inside the correlated BM25 sum. Each
-- term's document frequency is one primary-key probe: as a join (with nested loops off) the
-- planner read all of the agent's term statistics instead, ~1 ms for 10,000 terms. Stored in
-- query-term order, the order every read of it below returns.
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
    ORDER BY terms.ord
),
-- Each candidate's row, fetched once through the primary key: one index scan with the candidate
-- ids as an array (PostgreSQL 17+ walks the index once for a sorted array instead of descending
-- it per id), whatever the row estimates say.
docs AS (
    SELECT m.id, m.token_count, m.doc_len, m.term_freqs
    FROM {schema}.memories AS m
    WHERE m.agent_id = p_agent_id AND m.id = ANY (ARRAY(SELECT c.id FROM candidates AS c))
),
lexical AS (
    -- The BM25 terms are summed in query-term order, as ranking.bm25_score sums them: a
    -- materialized CTE is read back in the order it was stored, so the sum needs no ORDER BY
    -- of its own, which sorted the matching terms once per candidate (8.97 against 8.61 ms
    -- p50 for the whole function, 500 candidates, identical results; migration 0008).
    SELECT
        d.id,
        (
            SELECT sum(
                ti.idf * ((d.term_freqs ->> ti.term)::integer::float8 * (p_bm25_k1 + 1.0::float8))
                / ((d.term_freqs ->> ti.term)::integer::float8
                   + p_bm25_k1 * ((1.0::float8 - p_bm25_b)
                                  + p_bm25_b * d.doc_len::float8 / st.avgdl))
            )
            FROM term_idf AS ti
            WHERE d.term_freqs ? ti.term
        ) AS bm25
    FROM docs AS d
    CROSS JOIN stats AS st
    -- Only documents sharing a term get a BM25 sum (a few percent of the candidates, usually).
    WHERE d.term_freqs ?| ARRAY(SELECT ti.term FROM term_idf AS ti)
),
ranked AS (
    SELECT
        c.id,
        c.created_at,
        c.cosine,
        l.bm25,
        row_number() OVER (ORDER BY c.cosine DESC, c.created_at DESC, c.id) AS dense_rank,
        row_number() OVER (ORDER BY c.created_at DESC, c.id) AS recency_rank
    FROM candidates AS c
    LEFT JOIN lexical AS l ON l.id = c.id
),
lexical_ranked AS (
    SELECT
        r.id,
        row_number() OVER (ORDER BY r.bm25 DESC, r.created_at DESC, r.id) AS lexical_rank
    FROM ranked AS r
    WHERE r.bm25 > 0.0::float8
),
fused AS (
    SELECT
        r.*,
        lr.lexical_rank,
        CASE WHEN p_hybrid THEN
            (p_rrf_weights[1] / (p_rrf_k + r.dense_rank)::float8
             + COALESCE(p_rrf_weights[2] / (p_rrf_k + lr.lexical_rank)::float8, 0.0::float8))
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
    LEFT JOIN lexical_ranked AS lr ON lr.id = r.id
),
h AS MATERIALIZED (
    SELECT
        f.id,
        row_number() OVER (ORDER BY f.fused_score DESC, f.created_at DESC, f.id)::integer AS pos,
        f.cosine,
        f.bm25,
        f.dense_rank::integer AS dense_rank,
        CASE WHEN p_hybrid THEN f.lexical_rank::integer END AS lexical_rank,
        f.recency_rank::integer AS recency_rank,
        f.fused_score,
        d.token_count
    FROM fused AS f
    JOIN docs AS d ON d.id = f.id
),
p AS MATERIALIZED (
    SELECT {schema}.pack_positions(array_agg(h.token_count ORDER BY h.pos), p_budget, p_max_hits)
               AS taken,
           count(*)::integer AS n
    FROM h
),
c AS MATERIALIZED (
    SELECT h.* FROM h WHERE h.pos = ANY ((SELECT p.taken FROM p)::integer[])
)
SELECT
    CASE WHEN c.id IS NULL THEN 'ranked' ELSE 'memory' END, p.n, c.cosine, c.bm25,
    c.dense_rank, c.lexical_rank, c.recency_rank, c.fused_score, m.id::text,
    m.session_id::text, m.content, m.content_type, m.importance, m.tags, m.source,
    m.sensitivity, m.created_at, m.metadata::text, m.embedder::text, m.token_count,
    m.expires_at, m.source_turn_ids, m.version, m.valid_from, m.valid_to, NULL::text, NULL::text,
    NULL::jsonb
FROM p
LEFT JOIN (c JOIN {schema}.memories AS m ON m.agent_id = p_agent_id AND m.id = c.id) ON true
ORDER BY c.pos;
END
$fn$
