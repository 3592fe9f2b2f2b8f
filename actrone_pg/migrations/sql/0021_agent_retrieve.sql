-- Pinned by migration 0021. Never edited: a change is a new revision with its own copy.
-- One store call on a schema distributed with Citus by agent_id (docs/scale-out.md), whole:
-- 0020's agent_retrieve (its arguments, rows, ranking and its way of running on the agent's
-- worker), with the ranked rows and the chosen memories read as retrieve() (0019) reads them.
--
-- Why: 0020's statement joined the chosen memories to the agent's table, a join that with
-- enable_nestloop off (the body's setting, migration 0005) is a hash join over every memory
-- of the agent, read whole; retrieve() probes the primary key once per chosen memory (LATERAL,
-- OFFSET 0, which only a nested loop runs), and keeps of the ranked rows the columns it reads.
-- docs/scale-out.md, "Migration 0021", has what it saves, and how it grows with the agent.
--
-- Migration 0020's way, unchanged: called on the node holding the agent's shards (where Citus
-- delegates the call), it finds the agent's shard of each table (pg_dist_shard,
-- pg_dist_placement) and runs the whole call as one statement over those shard tables, which
-- Citus does not plan, prepared once per session and shard group with a generic plan (named by
-- a digest of its text and the agent's memories shard) and executed with the call's values as
-- literals. Where this node holds no placement of the agent's shards (the coordinator inside a
-- transaction block, another worker, after a shard move, a server without Citus), or a shard
-- table was dropped between the look-up and the read (a shard move's deferred drop:
-- undefined_table, before any row is returned), it runs the same statement over the
-- distributed tables.
--
-- The call is one statement, written once: the "statement" block at the end, run as written
-- over the distributed tables. The migrations (actrone_pg/migrations/_ops.pinned) put 0019's
-- ranking body in its placeholder line; write at the "prepared" placeholder the same statement
-- as the text of a PREPARE, quoted for format(): each of this function's parameters and
-- variables (p_...) as its $n, each of the schema's tables as its format() argument (the
-- shard's name); at "prepared_name" the name's prefix; and at "prepared_execute" the format()
-- call that writes its EXECUTE with this call's values, in the $n order: see _ops.prepared.
--
-- From psql, on the coordinator, as 0019's:
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
LANGUAGE plpgsql VOLATILE
SET jit = off
-- as hybrid_search (0005): joins between CTEs of at most p_limit rows, never nested loops
SET enable_nestloop = off
AS $fn$
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
            v_statement := '{{prepared_name}}' || v_memories;
            v_call := {{prepared_execute v_statement}};
            -- A generic plan, made once (the statement's values change at every call).
            v_plans := current_setting('plan_cache_mode');
            PERFORM set_config('plan_cache_mode', 'force_generic_plan', true);
            -- RETURN QUERY EXECUTE of a statement not prepared yet fails as not returning
            -- rows, not as unknown: look first.
            IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_prepared_statements AS s
                           WHERE s.name = v_statement) THEN
                EXECUTE format(
{{prepared}},
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
{{statement
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
{{body 0019_hybrid_search}}
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
    ORDER BY c.position)
}};
END
$fn$
