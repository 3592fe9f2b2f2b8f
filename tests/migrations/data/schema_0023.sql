-- A schema as the pre-release revisions built it at 0023, their last (the state the baseline,
-- 0024, takes over): `pg_dump --schema-only --no-owner --no-privileges` of a schema migrated by
-- actrone_pg/migrations at commit 2522161 (revisions 0001 to 0023), its comment lines left out,
-- the schema and pgvector's schema written as {schema} and {vector_schema}, and its version row.
-- Test data for tests/migrations/test_baseline.py; never installed by the package.
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;

CREATE FUNCTION {schema}.agent_retrieve(p_agent_id text, p_session_id text, p_turn_limit integer, p_session_ttl double precision, p_embedder text, p_terms text[], p_vector {vector_schema}.vector, p_threshold double precision, p_limit integer, p_hybrid boolean, p_rrf_k integer, p_rrf_weights double precision[], p_relevance_weight double precision, p_recency_weight double precision, p_now timestamp with time zone, p_candidates text[], p_bm25_k1 double precision, p_bm25_b double precision, p_n_docs bigint, p_total_length bigint, p_doc_freqs integer[], p_budget bigint, p_max_hits integer) RETURNS TABLE(kind text, candidates_considered integer, cosine double precision, bm25 double precision, ranks integer[], fused_score double precision, id text, session_id text, content text, content_type text, importance double precision, tags text[], source text, sensitivity text, created_at timestamp with time zone, metadata text, embedder text, token_count integer, expires_at timestamp with time zone, source_turn_ids text[], version integer, valid_from timestamp with time zone, valid_to timestamp with time zone, user_message text, assistant_message text, tool_results jsonb)
    LANGUAGE plpgsql
    SET jit TO 'off'
    SET enable_nestloop TO 'off'
    AS $_$
#variable_conflict use_column
DECLARE
    p_content boolean := false;
    p_excluded text[];
    v_memories bigint;
    v_statement text;
    v_call text;
    v_plans text;
BEGIN
    -- Nested IFs: PL/pgSQL parses a statement when it first runs it, and a server without
    -- Citus has no pg_dist_* catalogs.
    IF current_setting('citus.version', true) IS NOT NULL THEN
        IF EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition AS d
                   WHERE d.logicalrelid = '{schema}.memories'::regclass) THEN
            v_memories := pg_catalog.get_shard_id_for_distribution_column(
                '{schema}.memories'::regclass, p_agent_id);
            IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_placement AS pl
                           JOIN pg_catalog.pg_dist_local_group AS g ON g.groupid = pl.groupid
                           WHERE pl.shardid = v_memories) THEN
                v_memories := NULL;  -- not this node's: the distributed statements
            END IF;
        END IF;
    END IF;
    IF v_memories IS NOT NULL THEN
        BEGIN
            IF p_n_docs IS NULL THEN
                EXECUTE format('SELECT array_agg(e.id) FROM %s AS e'
                               ' WHERE e.agent_id = $1 AND e.expires_at <= $2',
                               pg_catalog.shard_name('{schema}.memories'::regclass, v_memories))
                    INTO p_excluded USING p_agent_id, p_now;
            END IF;
            v_statement := 'actrone_07737fa6fa5d_' || v_memories;
            v_call := format('EXECUTE %I(%L, %L, %L, %L, %L, %L, %L, %L, %L, %L, %L, %L, %L, %L, %L, %L, %L, %L, %L, %L, %L, %L, %L, %L, %L)', v_statement, p_agent_id, p_session_id, p_turn_limit, p_session_ttl, p_embedder, p_terms, p_vector, p_threshold, p_limit, p_hybrid, p_rrf_k, p_rrf_weights, p_relevance_weight, p_recency_weight, p_now, p_candidates, p_bm25_k1, p_bm25_b, p_n_docs, p_total_length, p_doc_freqs, p_budget, p_max_hits, p_content, p_excluded);
            -- A generic plan, made once (the statement's values change at every call).
            v_plans := current_setting('plan_cache_mode');
            PERFORM set_config('plan_cache_mode', 'force_generic_plan', true);
            -- RETURN QUERY EXECUTE of a statement not prepared yet fails as not returning
            -- rows, not as unknown: look first.
            IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_prepared_statements AS s
                           WHERE s.name = v_statement) THEN
                EXECUTE format(
$prepare$PREPARE %1$I (text, text, integer, double precision, text, text[], {vector_schema}.vector, double precision, integer, boolean, integer, double precision[], double precision, double precision, timestamptz, text[], double precision, double precision, bigint, bigint, integer[], bigint, integer, boolean, text[]) AS
(SELECT 'turn'::text, NULL::integer, NULL::float8, NULL::float8, NULL::integer[],
               NULL::float8, t.id::text, NULL::text, NULL::text, NULL::text, NULL::float8,
               NULL::text[], NULL::text, NULL::text, t.created_at, NULL::text, NULL::text,
               t.token_count, NULL::timestamptz, NULL::text[],
               NULL::integer, NULL::timestamptz, NULL::timestamptz, t.user_message,
               t.assistant_message, t.tool_results
        FROM %3$s AS t
        JOIN %4$s AS x ON x.agent_id = t.agent_id AND x.session_id = t.session_id
        WHERE $2 IS NOT NULL AND x.agent_id = $1 AND x.session_id = $2
          AND x.last_active_at >= now() - make_interval(secs => $4)
        ORDER BY t.seq DESC
        LIMIT $3)
UNION ALL
(WITH h AS MATERIALIZED (
        SELECT b."position", b.cosine, b.bm25, b.ranks, b.fused_score, b.id, b.token_count
        FROM (
WITH
nearest AS MATERIALIZED (
    SELECT u.id, u.created_at, u.cosine,
           row_number() OVER (ORDER BY u.cosine DESC, u.created_at DESC, u.id) AS dense_rank
    FROM (
        -- Vectors of up to 600 dimensions come from an index-only scan of ix_memories_candidates;
        -- larger ones, which do not fit in a btree entry, through the primary key. The
        -- embedder's registered dimension decides the branch once per call (a one-time filter);
        -- with $16 only the third branch runs, fetching those ids by primary key.
        SELECT m.id, m.created_at, -(m.embedding OPERATOR({vector_schema}.<#>) $7) AS cosine
        FROM %2$s AS m
        WHERE m.agent_id = $1 AND m.embedder = $5
          AND {vector_schema}.vector_dims(m.embedding) <= 600
          AND -(m.embedding OPERATOR({vector_schema}.<#>) $7) >= $8
          AND (SELECT e.dimensions FROM %7$s AS e WHERE e.name = $5) <= 600
          AND $16 IS NULL
          AND ($25 IS NULL OR m.id <> ALL ($25))
        UNION ALL
        SELECT m.id, m.created_at, -(m.embedding OPERATOR({vector_schema}.<#>) $7)
        FROM %2$s AS m
        WHERE m.agent_id = $1 AND m.embedder = $5
          AND -(m.embedding OPERATOR({vector_schema}.<#>) $7) >= $8
          AND (SELECT e.dimensions FROM %7$s AS e WHERE e.name = $5) > 600
          AND $16 IS NULL
          AND ($25 IS NULL OR m.id <> ALL ($25))
        UNION ALL
        SELECT m.id, m.created_at, -(m.embedding OPERATOR({vector_schema}.<#>) $7)
        FROM %2$s AS m
        WHERE $16 IS NOT NULL
          AND m.agent_id = $1 AND m.id = ANY ($16) AND m.embedder = $5
          AND -(m.embedding OPERATOR({vector_schema}.<#>) $7) >= $8
          AND ($25 IS NULL OR m.id <> ALL ($25))
    ) AS u
    ORDER BY u.cosine DESC, u.created_at DESC, u.id
    LIMIT $9
),
given_stats AS (
    SELECT
        COALESCE($19, max(s.n_docs), 0) AS n_docs,
        COALESCE($20, max(s.total_length), 0) AS total_length
    FROM %5$s AS s
    WHERE s.agent_id = $1 AND $19 IS NULL
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
    FROM unnest($6) WITH ORDINALITY AS t(term, ord)
    WHERE t.term IS NOT NULL AND t.term <> ''
    GROUP BY t.term
),
term_idf AS MATERIALIZED (
    SELECT
        terms.term,
        terms.ord,
        ln(1.0::float8
           + ((st.n_docs - f.df)::float8 + 0.5::float8) / (f.df::float8 + 0.5::float8)) AS idf
    FROM terms
    CROSS JOIN stats AS st
    CROSS JOIN LATERAL (
        SELECT CASE WHEN $21 IS NOT NULL
                    THEN COALESCE($21[terms.ord::integer], 0)
                    ELSE COALESCE((
                        SELECT ts.df FROM %6$s AS ts
                        WHERE ts.agent_id = $1 AND ts.term = terms.term
                    ), 0) END AS df
    ) AS f
    -- 0018: a term no document holds adds 0.0 to every sum; it is not looked up.
    WHERE f.df > 0
    ORDER BY terms.ord
),
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
        -- for $24 (NULL otherwise), so the sorts below move narrow rows.
        JOIN (
            SELECT m.id, m.token_count,
                   CASE WHEN m.term_freqs ?| ARRAY(SELECT ti.term FROM term_idf AS ti) THEN (
                       SELECT sum(x.idf * (x.tf * ($17 + 1.0::float8))
                                  / (x.tf + $17 * ((1.0::float8 - $18)
                                                         + $18 * m.doc_len::float8
                                                           / (SELECT st.avgdl FROM stats AS st))))
                       FROM (SELECT ti.idf, (m.term_freqs ->> ti.term)::integer::float8 AS tf
                             FROM term_idf AS ti OFFSET 0) AS x
                       WHERE x.tf IS NOT NULL
                   ) END AS bm25,
                   CASE WHEN $24 THEN m.session_id END AS session_id,
                   CASE WHEN $24 THEN m.content END AS content,
                   CASE WHEN $24 THEN m.content_type END AS content_type,
                   CASE WHEN $24 THEN m.importance END AS importance,
                   CASE WHEN $24 THEN m.tags END AS tags,
                   CASE WHEN $24 THEN m.source END AS source,
                   CASE WHEN $24 THEN m.sensitivity END AS sensitivity,
                   CASE WHEN $24 THEN m.metadata END AS metadata,
                   CASE WHEN $24 THEN m.embedder END AS embedder
            FROM %2$s AS m
            WHERE m.agent_id = $1 AND m.id = ANY (ARRAY(SELECT c.id FROM nearest AS c))
            OFFSET 0
        ) AS d ON d.id = n.id
    ) AS s
),
fused AS (
    SELECT
        r.*,
        CASE WHEN $10 THEN
            ($12[1] / ($11 + r.dense_rank)::float8
             + COALESCE($12[2] / ($11 + r.lexical_rank)::float8, 0.0::float8))
            + $12[3] / ($11 + r.recency_rank)::float8
        ELSE
            $13 * r.cosine
            + $14 * (
                CASE WHEN extract(epoch FROM ($15 - r.created_at)) <= 0 THEN 1.0::float8
                     ELSE greatest(0.0::float8,
                                   1.0::float8
                                   - extract(epoch FROM ($15 - r.created_at))::float8
                                     / 2592000.0::float8)
                END)
        END AS fused_score
    FROM ranked AS r
)
SELECT
    f.id,
    row_number() OVER (ORDER BY f.fused_score DESC, f.created_at DESC, f.id)::integer,
    f.cosine,
    f.bm25,
    f.dense_rank::integer,
    CASE WHEN $10 THEN f.lexical_rank::integer END,
    f.recency_rank::integer,
    f.fused_score,
    f.session_id, f.content, f.content_type, f.importance, f.tags, f.source, f.sensitivity,
    f.created_at,
    f.metadata,
    f.embedder,
    f.token_count,
    ARRAY[f.dense_rank::integer, CASE WHEN $10 THEN f.lexical_rank::integer END,
          f.recency_rank::integer]
FROM fused AS f
ORDER BY f.fused_score DESC, f.created_at DESC, f.id
        ) AS b (id, "position", cosine, bm25, dense_rank, lexical_rank, recency_rank,
                fused_score, session_id, content, content_type, importance, tags, source,
                sensitivity, created_at, metadata, embedder, token_count, ranks)
    ),
    p AS MATERIALIZED (
        SELECT {schema}.pack_positions(array_agg(h.token_count ORDER BY h.position), $22,
                                       $23) AS taken,
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
        FROM %2$s AS m
        WHERE m.agent_id = $1 AND m.id = c.id OFFSET 0) AS f) ON true
    ORDER BY c.position)
$prepare$,
                    v_statement,
                    pg_catalog.shard_name('{schema}.memories'::regclass, v_memories),
                    pg_catalog.shard_name('{schema}.turns'::regclass,
                        pg_catalog.get_shard_id_for_distribution_column('{schema}.turns'::regclass,
                                                                        p_agent_id)),
                    pg_catalog.shard_name('{schema}.sessions'::regclass,
                        pg_catalog.get_shard_id_for_distribution_column('{schema}.sessions'::regclass,
                                                                        p_agent_id)),
                    pg_catalog.shard_name('{schema}.agent_stats'::regclass,
                        pg_catalog.get_shard_id_for_distribution_column(
                            '{schema}.agent_stats'::regclass, p_agent_id)),
                    pg_catalog.shard_name('{schema}.term_stats'::regclass,
                        pg_catalog.get_shard_id_for_distribution_column(
                            '{schema}.term_stats'::regclass, p_agent_id)),
                    (SELECT pg_catalog.shard_name(s.logicalrelid, s.shardid)
                     FROM pg_catalog.pg_dist_shard AS s
                     WHERE s.logicalrelid = '{schema}.embedders'::regclass));
            END IF;
            RETURN QUERY EXECUTE v_call;
            PERFORM set_config('plan_cache_mode', v_plans, true);
            RETURN;
        EXCEPTION WHEN undefined_table THEN
            -- A shard table dropped since the look-up (a shard move's deferred drop): no row
            -- was returned, and the block's setting is undone with it; the distributed
            -- statements below find the agent's placement (and its excluded ids again).
            NULL;
        END;
    END IF;
    IF p_n_docs IS NULL THEN
        -- One probe of the partial index of expiring memories.
        p_excluded := (SELECT array_agg(e.id) FROM {schema}.memories AS e
                       WHERE e.agent_id = p_agent_id AND e.expires_at <= p_now);
    END IF;
    RETURN QUERY
(SELECT 'turn'::text, NULL::integer, NULL::float8, NULL::float8, NULL::integer[],
               NULL::float8, t.id::text, NULL::text, NULL::text, NULL::text, NULL::float8,
               NULL::text[], NULL::text, NULL::text, t.created_at, NULL::text, NULL::text,
               t.token_count, NULL::timestamptz, NULL::text[],
               NULL::integer, NULL::timestamptz, NULL::timestamptz, t.user_message,
               t.assistant_message, t.tool_results
        FROM {schema}.turns AS t
        JOIN {schema}.sessions AS x ON x.agent_id = t.agent_id AND x.session_id = t.session_id
        WHERE p_session_id IS NOT NULL AND x.agent_id = p_agent_id AND x.session_id = p_session_id
          AND x.last_active_at >= now() - make_interval(secs => p_session_ttl)
        ORDER BY t.seq DESC
        LIMIT p_turn_limit)
UNION ALL
(WITH h AS MATERIALIZED (
        SELECT b."position", b.cosine, b.bm25, b.ranks, b.fused_score, b.id, b.token_count
        FROM (
WITH
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
    ORDER BY c.position);
END
$_$;

CREATE FUNCTION {schema}.agent_write(p_agent_id text, p_ids text[], p_terms text[], p_deltas integer[], p_count integer, p_length bigint, p_fresh boolean, p_fence_name text, p_fence_holder text) RETURNS TABLE(placed boolean, held boolean, n_docs bigint, analyzer text)
    LANGUAGE plpgsql
    SET jit TO 'off'
    AS $_$
#variable_conflict use_column
DECLARE
    v_memories bigint;
    v_stats text := '{schema}.agent_stats';
    v_rows text := '{schema}.memories';
    v_history text := '{schema}.memory_history';
    v_terms text := '{schema}.term_stats';
    v_locks text := '{schema}.locks';
    v_settings text := '{schema}.settings';
    v_gone integer;
    v_gone_length bigint;
    v_gone_ids text[];
    v_gone_terms text[];
    v_name text;
BEGIN
    -- Nested IFs: PL/pgSQL parses a statement when it first runs it, and a server without
    -- Citus has no pg_dist_* catalogs.
    IF current_setting('citus.version', true) IS NOT NULL THEN
        IF EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition AS d
                   WHERE d.logicalrelid = '{schema}.memories'::regclass) THEN
            v_memories := pg_catalog.get_shard_id_for_distribution_column(
                '{schema}.memories'::regclass, p_agent_id);
            IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_placement AS pl
                           JOIN pg_catalog.pg_dist_local_group AS g ON g.groupid = pl.groupid
                           WHERE pl.shardid = v_memories) THEN
                RETURN QUERY SELECT false, false, NULL::bigint, NULL::text;
                RETURN;
            END IF;
            v_rows := pg_catalog.shard_name('{schema}.memories'::regclass, v_memories);
            v_stats := pg_catalog.shard_name('{schema}.agent_stats'::regclass,
                pg_catalog.get_shard_id_for_distribution_column('{schema}.agent_stats'::regclass,
                                                                p_agent_id));
            v_history := pg_catalog.shard_name('{schema}.memory_history'::regclass,
                pg_catalog.get_shard_id_for_distribution_column(
                    '{schema}.memory_history'::regclass, p_agent_id));
            v_terms := pg_catalog.shard_name('{schema}.term_stats'::regclass,
                pg_catalog.get_shard_id_for_distribution_column('{schema}.term_stats'::regclass,
                                                                p_agent_id));
            v_locks := pg_catalog.shard_name('{schema}.locks'::regclass,
                pg_catalog.get_shard_id_for_distribution_column('{schema}.locks'::regclass,
                                                                p_agent_id));
            -- A reference table: one shard, placed on every node.
            v_settings := (SELECT pg_catalog.shard_name(s.logicalrelid, s.shardid)
                           FROM pg_catalog.pg_dist_shard AS s
                           WHERE s.logicalrelid = '{schema}.settings'::regclass);
        END IF;
    END IF;
    -- The four statements every batch runs, prepared once per session and set of tables (their
    -- names: this revision's prefix, the agent's memories shard or the plain table's oid), so
    -- that a call plans none of them (0.3 to 0.5 ms of a call, docs/scale-out.md).
    v_name := 'actrone_0022_' || coalesce('s' || v_memories,
                                          't' || '{schema}.memories'::regclass::oid) || '_';
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_prepared_statements AS q
                   WHERE q.name = v_name || 'stats') THEN
        EXECUTE format('PREPARE %I (text) AS'
                       ' INSERT INTO %s AS s (agent_id, n_docs, total_length) VALUES ($1, 0, 0)'
                       ' ON CONFLICT (agent_id) DO UPDATE SET n_docs = s.n_docs',
                       v_name || 'stats', v_stats);
        EXECUTE format('PREPARE %I (text, text[]) AS'
                       ' WITH g AS (DELETE FROM %s AS d WHERE d.agent_id = $1 AND d.id = ANY ($2)'
                       ' RETURNING d.id, d.doc_len, d.term_freqs)'
                       ' SELECT count(*)::integer, coalesce(sum(g.doc_len), 0)::bigint,'
                       ' array_agg(g.id),'
                       ' (SELECT array_agg(k.k) FROM g AS o, jsonb_object_keys(o.term_freqs) AS k(k))'
                       ' FROM g',
                       v_name || 'gone', v_rows);
        -- The batch's terms (+ its count of memories holding each) less one per replaced
        -- memory holding it; a frequency netting to zero is not written.
        EXECUTE format('PREPARE %I (text, text[], integer[], text[]) AS'
                       ' INSERT INTO %s AS t (agent_id, term, df)'
                       ' SELECT $1, u.term, sum(u.delta)'
                       ' FROM (SELECT a.term, a.delta FROM unnest($2, $3) AS a(term, delta)'
                       '       UNION ALL SELECT r.term, -1 FROM unnest($4) AS r(term)) AS u'
                       ' GROUP BY u.term HAVING sum(u.delta) <> 0'
                       ' ON CONFLICT (agent_id, term) DO UPDATE SET df = t.df + EXCLUDED.df',
                       v_name || 'terms', v_terms);
        EXECUTE format('PREPARE %I (integer, bigint, text) AS'
                       ' UPDATE %s SET n_docs = n_docs + $1, total_length = total_length + $2'
                       ' WHERE agent_id = $3'
                       ' RETURNING true, true, n_docs,'
                       ' (SELECT value FROM %s WHERE name = ''text_analyzer'')',
                       v_name || 'totals', v_stats, v_settings);
    END IF;
    -- SQL's EXECUTE takes no parameters: the values as literals (short text, ids and terms).
    EXECUTE format('EXECUTE %I (%L)', v_name || 'stats', p_agent_id);
    IF p_fence_name IS NOT NULL THEN
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s AS l WHERE l.agent_id = $1'
                       ' AND l.name = $2 AND l.holder = $3 AND l.expires_at > clock_timestamp()'
                       ' FOR SHARE)', v_locks)
            INTO held USING p_agent_id, p_fence_name, p_fence_holder;
        IF NOT held THEN
            RETURN QUERY SELECT true, false, NULL::bigint, NULL::text;
            RETURN;
        END IF;
    END IF;
    EXECUTE format('EXECUTE %I (%L, %L)', v_name || 'gone', p_agent_id, p_ids)
        INTO v_gone, v_gone_length, v_gone_ids, v_gone_terms;
    IF v_gone > 0 AND p_fresh THEN
        EXECUTE format('DELETE FROM %s WHERE agent_id = $1 AND id = ANY ($2)', v_history)
            USING p_agent_id, v_gone_ids;
    END IF;
    EXECUTE format('EXECUTE %I (%L, %L, %L, %L)', v_name || 'terms', p_agent_id, p_terms,
                   p_deltas, v_gone_terms);
    IF v_gone > 0 THEN
        -- the replaced memories' terms that no memory holds now
        EXECUTE format('DELETE FROM %s WHERE agent_id = $1 AND term = ANY ($2) AND df <= 0',
                       v_terms)
            USING p_agent_id, v_gone_terms;
    END IF;
    RETURN QUERY EXECUTE format('EXECUTE %I (%L, %L, %L)', v_name || 'totals',
                                p_count - v_gone, p_length - v_gone_length, p_agent_id);
END
$_$;

CREATE FUNCTION {schema}.hybrid_search(p_agent_id text, p_embedder text, p_terms text[], p_vector {vector_schema}.vector, p_threshold double precision DEFAULT 0.72, p_limit integer DEFAULT 500, p_hybrid boolean DEFAULT true, p_rrf_k integer DEFAULT 60, p_rrf_weights double precision[] DEFAULT ARRAY[(1)::double precision, (1)::double precision, (1)::double precision], p_relevance_weight double precision DEFAULT 0.7, p_recency_weight double precision DEFAULT 0.3, p_now timestamp with time zone DEFAULT now(), p_content boolean DEFAULT true, p_candidates text[] DEFAULT NULL::text[], p_bm25_k1 double precision DEFAULT 1.2, p_bm25_b double precision DEFAULT 0.3, p_excluded text[] DEFAULT NULL::text[], p_n_docs bigint DEFAULT NULL::bigint, p_total_length bigint DEFAULT NULL::bigint, p_doc_freqs integer[] DEFAULT NULL::integer[]) RETURNS TABLE(id text, "position" integer, cosine double precision, bm25 double precision, dense_rank integer, lexical_rank integer, recency_rank integer, fused_score double precision, session_id text, content text, content_type text, importance double precision, tags text[], source text, sensitivity text, created_at timestamp with time zone, metadata jsonb, embedder text, token_count integer, ranks integer[])
    LANGUAGE sql STABLE PARALLEL SAFE
    SET jit TO 'off'
    SET enable_nestloop TO 'off'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
WITH
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
$$;

CREATE FUNCTION {schema}.pack_positions(p_costs integer[], p_budget bigint, p_max_items integer DEFAULT NULL::integer) RETURNS integer[]
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
DECLARE
    n integer := coalesce(cardinality(p_costs), 0);
    cheapest integer[];
    taken integer[] := ARRAY[]::integer[];
    used bigint := 0;
    i integer;
BEGIN
    IF p_budget IS NULL THEN
        RETURN ARRAY(SELECT generate_series(1, least(n, coalesce(p_max_items, n))));
    END IF;
    -- cheapest[i] = the smallest cost from position i on
    cheapest := array_fill(NULL::integer, ARRAY[n]);
    FOR i IN REVERSE n..1 LOOP
        cheapest[i] := CASE WHEN i = n THEN p_costs[i] ELSE least(p_costs[i], cheapest[i + 1]) END;
    END LOOP;
    FOR i IN 1..n LOOP
        EXIT WHEN used + cheapest[i] > p_budget OR cardinality(taken) = p_max_items;
        IF used + p_costs[i] <= p_budget THEN
            taken := taken || i;
            used := used + p_costs[i];
        END IF;
    END LOOP;
    RETURN taken;
END
$$;

CREATE FUNCTION {schema}.query_terms(p_query text) RETURNS text[]
    LANGUAGE sql STABLE STRICT PARALLEL SAFE
    AS $$
SELECT COALESCE(array_agg(t.term ORDER BY t.ord), ARRAY[]::text[])
FROM (
    SELECT r.m[1] AS term, min(r.o) AS ord
    FROM regexp_matches(lower(p_query), '[^\W_]+', 'g') WITH ORDINALITY AS r(m, o)
    GROUP BY r.m[1]
) AS t
$$;

CREATE FUNCTION {schema}.retrieve(p_agent_id text, p_session_id text, p_turn_limit integer, p_session_ttl double precision, p_embedder text, p_terms text[], p_vector {vector_schema}.vector, p_threshold double precision, p_limit integer, p_hybrid boolean, p_rrf_k integer, p_rrf_weights double precision[], p_relevance_weight double precision, p_recency_weight double precision, p_now timestamp with time zone, p_bm25_k1 double precision, p_bm25_b double precision, p_budget bigint, p_max_hits integer) RETURNS TABLE(kind text, candidates_considered integer, cosine double precision, bm25 double precision, ranks integer[], fused_score double precision, id text, session_id text, content text, content_type text, importance double precision, tags text[], source text, sensitivity text, created_at timestamp with time zone, metadata text, embedder text, token_count integer, expires_at timestamp with time zone, source_turn_ids text[], version integer, valid_from timestamp with time zone, valid_to timestamp with time zone, user_message text, assistant_message text, tool_results jsonb)
    LANGUAGE plpgsql STABLE
    SET jit TO 'off'
    SET enable_nestloop TO 'off'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
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
WITH
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
$$;



CREATE TABLE {schema}.actrone_alembic_version (
    version_num character varying(32) NOT NULL
);

CREATE TABLE {schema}.agent_stats (
    agent_id text NOT NULL COLLATE pg_catalog."C",
    n_docs bigint NOT NULL,
    total_length bigint NOT NULL
);

CREATE TABLE {schema}.embedders (
    name text NOT NULL COLLATE pg_catalog."C",
    dimensions integer NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT ck_embedders_ck_embedders_dimensions_positive CHECK ((dimensions > 0))
);

CREATE TABLE {schema}.locks (
    agent_id text NOT NULL COLLATE pg_catalog."C",
    name text NOT NULL COLLATE pg_catalog."C",
    holder text NOT NULL,
    expires_at timestamp with time zone NOT NULL
);

CREATE TABLE {schema}.memories (
    agent_id text NOT NULL COLLATE pg_catalog."C",
    id text NOT NULL COLLATE pg_catalog."C",
    session_id text COLLATE pg_catalog."C",
    content text NOT NULL,
    content_type text NOT NULL,
    importance double precision NOT NULL,
    tags text[] NOT NULL,
    source text NOT NULL,
    sensitivity text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    metadata jsonb NOT NULL,
    embedder text NOT NULL COLLATE pg_catalog."C",
    token_count integer NOT NULL,
    doc_len integer NOT NULL,
    term_freqs jsonb NOT NULL,
    embedding {vector_schema}.vector NOT NULL,
    expires_at timestamp with time zone,
    source_turn_ids text[] DEFAULT '{}'::text[] NOT NULL,
    version integer DEFAULT 1 NOT NULL,
    valid_from timestamp with time zone,
    valid_to timestamp with time zone
)
WITH (toast_tuple_target='8160');

CREATE TABLE {schema}.memory_history (
    agent_id text NOT NULL COLLATE pg_catalog."C",
    id text NOT NULL COLLATE pg_catalog."C",
    version integer NOT NULL,
    session_id text COLLATE pg_catalog."C",
    content text NOT NULL,
    content_type text NOT NULL,
    importance double precision NOT NULL,
    tags text[] NOT NULL,
    source text NOT NULL,
    sensitivity text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    metadata jsonb NOT NULL,
    embedder text NOT NULL COLLATE pg_catalog."C",
    token_count integer NOT NULL,
    expires_at timestamp with time zone,
    source_turn_ids text[] NOT NULL,
    valid_from timestamp with time zone,
    valid_to timestamp with time zone NOT NULL
);

CREATE VIEW {schema}.memory_lineage AS
 SELECT m.agent_id,
    m.id AS memory_id,
    t.turn_id,
    (t.ordinality)::integer AS turn_position,
    m.session_id,
    m.source,
    m.created_at,
    m.content
   FROM ({schema}.memories m
     CROSS JOIN LATERAL unnest(m.source_turn_ids) WITH ORDINALITY t(turn_id, ordinality));

CREATE VIEW {schema}.memory_overview AS
 SELECT agent_id,
    id,
    session_id,
    created_at,
    (now() - created_at) AS age,
    token_count AS tokens,
    embedder,
    {vector_schema}.vector_dims(embedding) AS dimensions,
    source,
    content_type,
    importance,
    sensitivity,
    tags,
    content
   FROM {schema}.memories m;

CREATE VIEW {schema}.memory_versions AS
 SELECT m.agent_id,
    m.id,
    m.version,
    m.valid_from,
    m.valid_to,
    true AS is_current,
    m.session_id,
    m.content,
    m.content_type,
    m.importance,
    m.tags,
    m.source,
    m.sensitivity,
    m.created_at,
    m.metadata,
    m.embedder,
    m.token_count,
    m.expires_at,
    m.source_turn_ids
   FROM {schema}.memories m
UNION ALL
 SELECT h.agent_id,
    h.id,
    h.version,
    h.valid_from,
    h.valid_to,
    false AS is_current,
    h.session_id,
    h.content,
    h.content_type,
    h.importance,
    h.tags,
    h.source,
    h.sensitivity,
    h.created_at,
    h.metadata,
    h.embedder,
    h.token_count,
    h.expires_at,
    h.source_turn_ids
   FROM {schema}.memory_history h;

CREATE TABLE {schema}.turns (
    agent_id text NOT NULL COLLATE pg_catalog."C",
    session_id text NOT NULL COLLATE pg_catalog."C",
    id text NOT NULL COLLATE pg_catalog."C",
    seq bigint NOT NULL,
    user_message text NOT NULL,
    assistant_message text NOT NULL,
    tool_results jsonb,
    created_at timestamp with time zone NOT NULL,
    token_count integer NOT NULL
);

CREATE VIEW {schema}.recent_turns AS
 SELECT agent_id,
    session_id,
    row_number() OVER (PARTITION BY agent_id, session_id ORDER BY seq DESC) AS turns_ago,
    id,
    created_at,
    (now() - created_at) AS age,
    token_count AS tokens,
    user_message,
    assistant_message,
    tool_results
   FROM {schema}.turns t;

CREATE VIEW {schema}.session_overview AS
SELECT
    NULL::text COLLATE pg_catalog."C" AS agent_id,
    NULL::text COLLATE pg_catalog."C" AS session_id,
    NULL::bigint AS turn_count,
    NULL::bigint AS tokens,
    NULL::timestamp with time zone AS created_at,
    NULL::timestamp with time zone AS last_active_at,
    NULL::interval AS idle,
    NULL::jsonb AS metadata;

CREATE TABLE {schema}.sessions (
    agent_id text NOT NULL COLLATE pg_catalog."C",
    session_id text NOT NULL COLLATE pg_catalog."C",
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    last_active_at timestamp with time zone DEFAULT now() NOT NULL,
    metadata jsonb DEFAULT '{}'::jsonb NOT NULL
);

CREATE TABLE {schema}.settings (
    name text NOT NULL COLLATE pg_catalog."C",
    value text NOT NULL
);

CREATE TABLE {schema}.term_stats (
    agent_id text NOT NULL COLLATE pg_catalog."C",
    term text NOT NULL COLLATE pg_catalog."C",
    df integer NOT NULL
);

ALTER TABLE {schema}.turns ALTER COLUMN seq ADD GENERATED BY DEFAULT AS IDENTITY (
    SEQUENCE NAME {schema}.turns_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

ALTER TABLE ONLY {schema}.actrone_alembic_version
    ADD CONSTRAINT actrone_alembic_version_pkc PRIMARY KEY (version_num);

ALTER TABLE ONLY {schema}.agent_stats
    ADD CONSTRAINT pk_agent_stats PRIMARY KEY (agent_id);

ALTER TABLE ONLY {schema}.embedders
    ADD CONSTRAINT pk_embedders PRIMARY KEY (name);

ALTER TABLE ONLY {schema}.locks
    ADD CONSTRAINT pk_locks PRIMARY KEY (agent_id, name);

ALTER TABLE ONLY {schema}.memories
    ADD CONSTRAINT pk_memories PRIMARY KEY (agent_id, id);

ALTER TABLE ONLY {schema}.memory_history
    ADD CONSTRAINT pk_memory_history PRIMARY KEY (agent_id, id, version);

ALTER TABLE ONLY {schema}.sessions
    ADD CONSTRAINT pk_sessions PRIMARY KEY (agent_id, session_id);

ALTER TABLE ONLY {schema}.settings
    ADD CONSTRAINT pk_settings PRIMARY KEY (name);

ALTER TABLE ONLY {schema}.term_stats
    ADD CONSTRAINT pk_term_stats PRIMARY KEY (agent_id, term);

ALTER TABLE ONLY {schema}.turns
    ADD CONSTRAINT pk_turns PRIMARY KEY (agent_id, session_id, id);

CREATE INDEX ix_memories_agent_id_created_at_id ON {schema}.memories USING btree (agent_id, created_at, id);

CREATE INDEX ix_memories_agent_id_expires_at ON {schema}.memories USING btree (agent_id, expires_at) WHERE (expires_at IS NOT NULL);

CREATE INDEX ix_memories_candidates ON {schema}.memories USING btree (agent_id, embedder) INCLUDE (created_at, id, embedding) WHERE ({vector_schema}.vector_dims(embedding) <= 600);

CREATE INDEX ix_memories_metadata ON {schema}.memories USING gin (metadata jsonb_path_ops);

CREATE INDEX ix_memories_tags ON {schema}.memories USING gin (tags);

CREATE INDEX ix_turns_agent_id_session_id_seq ON {schema}.turns USING btree (agent_id, session_id, seq);

CREATE OR REPLACE VIEW {schema}.session_overview AS
 SELECT s.agent_id,
    s.session_id,
    count(t.id) AS turn_count,
    COALESCE(sum(t.token_count), (0)::bigint) AS tokens,
    s.created_at,
    s.last_active_at,
    (now() - s.last_active_at) AS idle,
    s.metadata
   FROM ({schema}.sessions s
     LEFT JOIN {schema}.turns t ON (((t.agent_id = s.agent_id) AND (t.session_id = s.session_id))))
  GROUP BY s.agent_id, s.session_id;

ALTER TABLE ONLY {schema}.memories
    ADD CONSTRAINT fk_memories_embedder_embedders FOREIGN KEY (embedder) REFERENCES {schema}.embedders(name);

ALTER TABLE ONLY {schema}.turns
    ADD CONSTRAINT fk_turns_agent_id_sessions FOREIGN KEY (agent_id, session_id) REFERENCES {schema}.sessions(agent_id, session_id) ON DELETE CASCADE;

INSERT INTO {schema}.actrone_alembic_version (version_num) VALUES ('0023');
