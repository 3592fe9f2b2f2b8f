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
--
-- p_content => false ranks exactly the same but leaves the memory's fields (session_id to
-- embedder, except created_at and token_count) NULL: retrieve_context ranks every candidate,
-- packs the token budget from token_count and fetches only the memories that fit (12.1 against
-- 14.1 ms p50 for 500 candidates in an A/B of the two forms on the data of `actrone-pg bench`).
--
-- p_candidates, when given, replaces the exact scan: admission, ranking and fusion then run over
-- those memories only (the store passes the nearest ids an agent's own HNSW index returns, for
-- agents too large to scan; see docs/postgres.md). Cosines are still computed exactly here.
--
-- p_bm25_k1 and p_bm25_b are BM25's term-frequency saturation and length normalisation
-- (RankingParams.bm25_k1 / bm25_b).
--
-- p_excluded are ids never admitted (the store passes the agent's expired memories the sweeper
-- has not deleted yet: they stay out of every ranking). p_n_docs, p_total_length and p_doc_freqs
-- (one per p_terms entry, in order), when given, replace the agent's BM25 statistics: a filtered
-- search (spec §9.3) passes those of the filtered set, with the filtered set's live memories as
-- p_candidates, so that admission, BM25, the rankings and the fusion are those of the filtered
-- set, as actrone_pg.pipeline ranks it.
--
-- One sort per ranking, no join between the rankings, one read of each candidate's term
-- frequencies per query term (docs/benchmarks.md, "Where one call's time goes"). A query term
-- that no document of the corpus holds (document frequency 0, in the agent's statistics or the
-- given ones) adds nothing to any candidate's BM25 and is not looked up; each frequency is read
-- as text (->>). The writers keep term_stats in the transaction that writes the memories, so in
-- the statement's snapshot a frequency of 0 means no candidate holds the term.
--
-- The ranks are returned once more as one array, last: ranks[i] is the rank in the i-th ranking
-- of actrone_pg.ranking.CHANNELS (dense, lexical, recency), in the order of p_rrf_weights, NULL
-- where the memory is absent from it. retrieve() and agent_retrieve, which run this body inline
-- (python -m actrone_pg.migrations._render copies it into them), return this array, not a column
-- per ranking, so that a new ranking is written here alone: its rank appended to ranks, its term
-- to the fusion's sum, the columns before ranks kept as they are (docs/architecture.md, "A new
-- ranking channel"). dense_rank, lexical_rank and recency_rank stay, for psql.
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
    p_now timestamptz DEFAULT now(),
    p_content boolean DEFAULT true,
    p_candidates text[] DEFAULT NULL,
    p_bm25_k1 double precision DEFAULT 1.2,
    p_bm25_b double precision DEFAULT 0.3,
    p_excluded text[] DEFAULT NULL,
    p_n_docs bigint DEFAULT NULL,
    p_total_length bigint DEFAULT NULL,
    p_doc_freqs integer[] DEFAULT NULL
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
    token_count integer,
    ranks integer[]
)
LANGUAGE sql STABLE PARALLEL SAFE
SET jit = off
-- Every join below is between CTEs of at most p_limit rows. Without table statistics (a freshly
-- loaded table, before ANALYZE) the planner estimates one row each and joins them by nested
-- loops, p_limit² comparisons: 100 ms for 500 candidates of 500 memories, 4-6 ms with this
-- setting, and 3.9 ms either way once the tables are analysed (psql \timing, migration 0005).
SET enable_nestloop = off
-- One plan per session, reused: PostgreSQL 18 caches the plans of SQL functions, but left to
-- choose it planned this body afresh for every call (0.88 ms of planning, EXPLAIN EXECUTE of
-- the body), the plan barely depending on the arguments' values. A generic plan is replanned
-- when the tables' statistics change (ANALYZE, VACUUM). The function alone: 8.51 -> 8.11 and
-- 8.70 -> 8.30 ms p50 (two A/B runs of 900 calls, 10 agents x 10,000, migration 0009).
SET plan_cache_mode = force_generic_plan
AS $$
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
        OFFSET 0  -- one probe per term (flattened, the CASE stood three times: 3 probes)
    ) AS f
    -- 0018: a term no document holds adds 0.0 to every sum; it is not looked up.
    WHERE f.df > 0
    ORDER BY terms.ord
),
-- The terms of term_idf in columns, t1..t16 and their IDFs w1..w16 (NULL past the last), so that
-- a candidate's BM25 is one expression over its row instead of a subquery per candidate (see
-- the candidates' rows below); terms, n and the subquery serve a query of more terms. Also the
-- constants of every candidate's BM25, computed once.
term_slots AS MATERIALIZED (
    SELECT a.n, a.terms, (SELECT st.avgdl FROM stats AS st) AS avgdl,
           p_bm25_k1 + 1.0::float8 AS k1_plus_1,
           a.terms[1] AS t1, a.idfs[1] AS w1, a.terms[2] AS t2, a.idfs[2] AS w2,
           a.terms[3] AS t3, a.idfs[3] AS w3, a.terms[4] AS t4, a.idfs[4] AS w4,
           a.terms[5] AS t5, a.idfs[5] AS w5, a.terms[6] AS t6, a.idfs[6] AS w6,
           a.terms[7] AS t7, a.idfs[7] AS w7, a.terms[8] AS t8, a.idfs[8] AS w8,
           a.terms[9] AS t9, a.idfs[9] AS w9, a.terms[10] AS t10, a.idfs[10] AS w10,
           a.terms[11] AS t11, a.idfs[11] AS w11, a.terms[12] AS t12, a.idfs[12] AS w12,
           a.terms[13] AS t13, a.idfs[13] AS w13, a.terms[14] AS t14, a.idfs[14] AS w14,
           a.terms[15] AS t15, a.idfs[15] AS w15, a.terms[16] AS t16, a.idfs[16] AS w16
    FROM (SELECT count(*) AS n, array_agg(ti.term ORDER BY ti.ord) AS terms,
                 array_agg(ti.idf ORDER BY ti.ord) AS idfs
          FROM term_idf AS ti) AS a
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
        -- its BM25 computed there (OFFSET 0: once per row, not once per use). Each query term's
        -- frequency is read once ("->>", NULL where the document lacks the term, and for the
        -- slots past the last term); a document holding none has no sum (NULL). The sum adds
        -- the terms in query-term order, 0.0 for a term the document lacks, exactly as
        -- ranking.bm25 adds them (x + 0.0 = x); past 16 terms, one subquery per candidate sums
        -- the terms it holds. The memory's fields are carried only for p_content (NULL
        -- otherwise), so the sorts below move narrow rows.
        JOIN (
            SELECT m.id, m.token_count,
                   CASE WHEN m.n > 16 THEN
                       CASE WHEN m.term_freqs ?| m.terms THEN (
                           SELECT sum(x.idf * (x.tf * m.k1_plus_1) / (x.tf + m.norm))
                           FROM (SELECT ti.idf, (m.term_freqs ->> ti.term)::integer::float8 AS tf
                                 FROM term_idf AS ti OFFSET 0) AS x
                           WHERE x.tf IS NOT NULL
                       ) END
                   WHEN COALESCE(m.tf1, m.tf2, m.tf3, m.tf4, m.tf5, m.tf6, m.tf7, m.tf8, m.tf9,
                                 m.tf10, m.tf11, m.tf12, m.tf13, m.tf14, m.tf15, m.tf16)
                        IS NOT NULL THEN
                         COALESCE(m.w1 * (m.tf1 * m.k1_plus_1) / (m.tf1 + m.norm), 0.0::float8)
                       + COALESCE(m.w2 * (m.tf2 * m.k1_plus_1) / (m.tf2 + m.norm), 0.0::float8)
                       + COALESCE(m.w3 * (m.tf3 * m.k1_plus_1) / (m.tf3 + m.norm), 0.0::float8)
                       + COALESCE(m.w4 * (m.tf4 * m.k1_plus_1) / (m.tf4 + m.norm), 0.0::float8)
                       + COALESCE(m.w5 * (m.tf5 * m.k1_plus_1) / (m.tf5 + m.norm), 0.0::float8)
                       + COALESCE(m.w6 * (m.tf6 * m.k1_plus_1) / (m.tf6 + m.norm), 0.0::float8)
                       + COALESCE(m.w7 * (m.tf7 * m.k1_plus_1) / (m.tf7 + m.norm), 0.0::float8)
                       + COALESCE(m.w8 * (m.tf8 * m.k1_plus_1) / (m.tf8 + m.norm), 0.0::float8)
                       + COALESCE(m.w9 * (m.tf9 * m.k1_plus_1) / (m.tf9 + m.norm), 0.0::float8)
                       + COALESCE(m.w10 * (m.tf10 * m.k1_plus_1) / (m.tf10 + m.norm), 0.0::float8)
                       + COALESCE(m.w11 * (m.tf11 * m.k1_plus_1) / (m.tf11 + m.norm), 0.0::float8)
                       + COALESCE(m.w12 * (m.tf12 * m.k1_plus_1) / (m.tf12 + m.norm), 0.0::float8)
                       + COALESCE(m.w13 * (m.tf13 * m.k1_plus_1) / (m.tf13 + m.norm), 0.0::float8)
                       + COALESCE(m.w14 * (m.tf14 * m.k1_plus_1) / (m.tf14 + m.norm), 0.0::float8)
                       + COALESCE(m.w15 * (m.tf15 * m.k1_plus_1) / (m.tf15 + m.norm), 0.0::float8)
                       + COALESCE(m.w16 * (m.tf16 * m.k1_plus_1) / (m.tf16 + m.norm), 0.0::float8)
                   END AS bm25,
                   CASE WHEN p_content THEN m.session_id END AS session_id,
                   CASE WHEN p_content THEN m.content END AS content,
                   CASE WHEN p_content THEN m.content_type END AS content_type,
                   CASE WHEN p_content THEN m.importance END AS importance,
                   CASE WHEN p_content THEN m.tags END AS tags,
                   CASE WHEN p_content THEN m.source END AS source,
                   CASE WHEN p_content THEN m.sensitivity END AS sensitivity,
                   CASE WHEN p_content THEN m.metadata END AS metadata,
                   CASE WHEN p_content THEN m.embedder END AS embedder
            FROM (
                SELECT m.id, m.token_count, m.term_freqs, m.session_id, m.content,
                       m.content_type, m.importance, m.tags, m.source, m.sensitivity, m.metadata,
                       m.embedder, k.n, k.terms, k.k1_plus_1,
                       p_bm25_k1 * ((1.0::float8 - p_bm25_b)
                                    + p_bm25_b * m.doc_len::float8 / k.avgdl) AS norm,
                       (m.term_freqs ->> k.t1)::integer::float8 AS tf1,
                       (m.term_freqs ->> k.t2)::integer::float8 AS tf2,
                       (m.term_freqs ->> k.t3)::integer::float8 AS tf3,
                       (m.term_freqs ->> k.t4)::integer::float8 AS tf4,
                       (m.term_freqs ->> k.t5)::integer::float8 AS tf5,
                       (m.term_freqs ->> k.t6)::integer::float8 AS tf6,
                       (m.term_freqs ->> k.t7)::integer::float8 AS tf7,
                       (m.term_freqs ->> k.t8)::integer::float8 AS tf8,
                       (m.term_freqs ->> k.t9)::integer::float8 AS tf9,
                       (m.term_freqs ->> k.t10)::integer::float8 AS tf10,
                       (m.term_freqs ->> k.t11)::integer::float8 AS tf11,
                       (m.term_freqs ->> k.t12)::integer::float8 AS tf12,
                       (m.term_freqs ->> k.t13)::integer::float8 AS tf13,
                       (m.term_freqs ->> k.t14)::integer::float8 AS tf14,
                       (m.term_freqs ->> k.t15)::integer::float8 AS tf15,
                       (m.term_freqs ->> k.t16)::integer::float8 AS tf16,
                       k.w1, k.w2, k.w3, k.w4, k.w5, k.w6, k.w7, k.w8,
                       k.w9, k.w10, k.w11, k.w12, k.w13, k.w14, k.w15, k.w16
                FROM {schema}.memories AS m
                CROSS JOIN term_slots AS k
                WHERE m.agent_id = p_agent_id
                  AND m.id = ANY (ARRAY(SELECT c.id FROM nearest AS c))
                OFFSET 0
            ) AS m
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
$$
