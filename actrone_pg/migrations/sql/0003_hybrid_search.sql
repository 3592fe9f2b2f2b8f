-- Pinned by migration 0003. Never edited: a change is a new revision with its own copy.
-- Hybrid search over one agent's memories, in one statement: admission, the dense, BM25 and
-- recency rankings, and Reciprocal Rank Fusion (or the classic blend), exactly as
-- actrone_pg/ranking.py defines them. Installed by the migrations as {schema}.hybrid_search.
--
-- Parity with the reference is bit-for-bit where it can be: every float expression below is
-- written in the same order of operations as ranking.py (float8 literals, never numeric), the
-- BM25 terms are summed in query-term order, ids sort by code point (the columns are COLLATE "C")
-- and every ranking breaks ties newer first, then id ascending, with distinct 1-based ranks.
-- Only the cosine itself comes from pgvector's float32 inner product (the vectors are
-- L2-normalised, so the inner product is the cosine), whose summation order differs from
-- numpy's: values agree to about 1e-7.
--
-- p_terms are the query's terms, tokenised by the caller exactly as ranking.tokenize does
-- (lower-case runs of letters and digits); {schema}.query_terms(text) approximates that in SQL
-- for use from psql. Terms are data, never parsed as a tsquery, so any user text is safe.
CREATE OR REPLACE FUNCTION {schema}.hybrid_search(
    p_agent_id text,
    p_embedder text,
    p_terms text[],
    p_vector {vector_schema}.vector,
    p_threshold double precision DEFAULT 0.72,
    p_limit integer DEFAULT 500,
    p_hybrid boolean DEFAULT true,
    p_rrf_k integer DEFAULT 60,
    p_rrf_weights double precision[] DEFAULT ARRAY[1, 1, 1]::double precision[],
    p_relevance_weight double precision DEFAULT 0.7,
    p_recency_weight double precision DEFAULT 0.3,
    p_now timestamptz DEFAULT now()
)
RETURNS TABLE (
    id text,
    "position" integer,
    cosine double precision,
    bm25 double precision,
    dense_rank integer,
    lexical_rank integer,
    recency_rank integer,
    fused_score double precision,
    session_id text,
    content text,
    content_type text,
    importance double precision,
    tags text[],
    source text,
    sensitivity text,
    created_at timestamptz,
    metadata jsonb,
    embedder text,
    token_count integer
)
LANGUAGE sql STABLE PARALLEL SAFE
SET jit = off
AS $$
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
    -- branch once per call (a one-time filter), so the other branch costs nothing.
    SELECT u.id, u.created_at, u.cosine
    FROM (
        SELECT m.id, m.created_at, -(m.embedding OPERATOR({vector_schema}.<#>) p_vector) AS cosine
        FROM {schema}.memories AS m
        WHERE m.agent_id = p_agent_id AND m.embedder = p_embedder
          AND {vector_schema}.vector_dims(m.embedding) <= 600
          AND -(m.embedding OPERATOR({vector_schema}.<#>) p_vector) >= p_threshold
          AND (SELECT e.dimensions FROM {schema}.embedders AS e WHERE e.name = p_embedder) <= 600
        UNION ALL
        SELECT m.id, m.created_at, -(m.embedding OPERATOR({vector_schema}.<#>) p_vector)
        FROM {schema}.memories AS m
        WHERE m.agent_id = p_agent_id AND m.embedder = p_embedder
          AND -(m.embedding OPERATOR({vector_schema}.<#>) p_vector) >= p_threshold
          AND (SELECT e.dimensions FROM {schema}.embedders AS e WHERE e.name = p_embedder) > 600
    ) AS u
    ORDER BY u.cosine DESC, u.created_at DESC, u.id
    LIMIT p_limit
),
candidates AS (
    SELECT n.id, n.created_at, n.cosine FROM nearest AS n WHERE n.cosine >= p_threshold
),
-- BM25 statistics of the agent's whole corpus (every embedder), kept by the writers.
stats AS (
    SELECT
        COALESCE(max(s.n_docs), 0) AS n_docs,
        CASE WHEN max(s.n_docs) > 0 AND max(s.total_length) > 0
             THEN max(s.total_length)::float8 / max(s.n_docs)::float8
             ELSE 1.0::float8 END AS avgdl
    FROM {schema}.agent_stats AS s
    WHERE s.agent_id = p_agent_id
),
terms AS (
    SELECT t.term, min(t.ord) AS ord
    FROM unnest(p_terms) WITH ORDINALITY AS t(term, ord)
    WHERE t.term IS NOT NULL AND t.term <> ''
    GROUP BY t.term
),
-- MATERIALIZED: computed once, not once per candidate inside the correlated BM25 sum.
term_idf AS MATERIALIZED (
    SELECT
        terms.term,
        terms.ord,
        ln(1.0::float8
           + ((st.n_docs - COALESCE(ts.df, 0))::float8 + 0.5::float8)
             / (COALESCE(ts.df, 0)::float8 + 0.5::float8)) AS idf
    FROM terms
    CROSS JOIN stats AS st
    LEFT JOIN {schema}.term_stats AS ts ON ts.agent_id = p_agent_id AND ts.term = terms.term
),
-- Each candidate's row, fetched once through the primary key: one index scan with the candidate
-- ids as an array (PostgreSQL 17+ walks the index once for a sorted array instead of descending
-- it per id), whatever the row estimates say.
docs AS (
    SELECT
        m.id, m.session_id, m.content, m.content_type, m.importance, m.tags, m.source,
        m.sensitivity, m.metadata, m.embedder, m.token_count, m.doc_len, m.term_freqs
    FROM {schema}.memories AS m
    WHERE m.agent_id = p_agent_id AND m.id = ANY (ARRAY(SELECT c.id FROM candidates AS c))
),
lexical AS (
    -- The BM25 terms are summed in query-term order, as ranking.bm25_score sums them.
    SELECT
        d.id,
        (
            SELECT sum(
                ti.idf * ((d.term_freqs ->> ti.term)::integer::float8 * (1.2::float8 + 1.0::float8))
                / ((d.term_freqs ->> ti.term)::integer::float8
                   + 1.2::float8 * ((1.0::float8 - 0.75::float8)
                                    + 0.75::float8 * d.doc_len::float8 / st.avgdl))
                ORDER BY ti.ord
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
)
SELECT
    f.id,
    row_number() OVER (ORDER BY f.fused_score DESC, f.created_at DESC, f.id)::integer,
    f.cosine,
    f.bm25,
    f.dense_rank::integer,
    CASE WHEN p_hybrid THEN f.lexical_rank::integer END,
    f.recency_rank::integer,
    f.fused_score,
    d.session_id,
    d.content,
    d.content_type,
    d.importance,
    d.tags,
    d.source,
    d.sensitivity,
    f.created_at,
    d.metadata,
    d.embedder,
    d.token_count
FROM fused AS f
JOIN docs AS d ON d.id = f.id
ORDER BY 2
$$
