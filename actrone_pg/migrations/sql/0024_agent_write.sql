-- A batch's writes for one agent besides its rows, in one call, on every server: the agent's
-- statistics row taken (the lock every writer of the agent takes first), the writer's lock
-- checked (fenced writes), the replaced memories deleted (and with p_fresh their earlier
-- versions), the document frequencies and the agent's totals moved by the batch's terms less the
-- replaced memories', and the analyzer the schema records returned. The caller then COPYs the
-- rows, in the same transaction (writes.upsert_memories, writes.update_memory). This is the
-- batch write's one definition, for every client and every server.
--
-- Why: on the cluster each of those statements was a hop through the coordinator. Distributed
-- with force_delegation, the call is delegated inside the caller's transaction block to the
-- worker holding the agent's shards, where it runs them over the shard tables (which Citus does
-- not plan), so a batch is two hops (this call, the COPY) instead of five.
--
-- The caller first takes the agent's shard's metadata lock on the coordinator in share mode
-- (statements.LOCK_SHARD_METADATA), as Citus's own writes do there: a shard move takes it
-- exclusively, on the coordinator and then on every node, while it blocks writes
-- (BlockWritesToShardList), and so does `actrone-pg reindex` (REINDEX_LOCK_SHARDS: its table
-- locks on the coordinator do not reach the shard tables this call writes). So no move of the
-- agent's shards starts its cut-over and no reindex runs while the transaction is open, and
-- none is half done when the coordinator plans this call. (Taken here,
-- on the worker, the lock would come before the COPY's on the coordinator: the opposite order to
-- a move's, a distributed deadlock measured under a rebalance.)
--
-- Where it runs, and over which tables (the same statements each time):
-- * on the worker holding the agent's shards (Citus, delegated): over the shard tables;
-- * on a node without them, called there and not delegated (a Citus session that no longer
--   delegates functions runs the call on the coordinator; a client connected to another node):
--   over the distributed tables, each statement routed by Citus to the agent's shards like any
--   client's. (A call delegated to a node that lost the placement, which the caller's metadata
--   lock rules out, is refused by Citus: a query on a shard runs no distributed query; nothing
--   is written.)
-- * on a schema that is not distributed (one server, postgres_distribute = 'off'): over the
--   schema's tables.
--
-- held = false: p_fence_name's lock is not held by p_fence_holder (or has lapsed); nothing but
-- the statistics row's lock was taken, and the caller rolls back. With no fence (NULLs), held.
--
-- From psql, in a transaction (the statistics row stays locked to its end):
--   BEGIN;
--   SELECT lock_shard_metadata(5, ARRAY[get_shard_id_for_distribution_column(
--       '{schema}.memories', 'agent')]);  -- on a distributed schema
--   SELECT * FROM {schema}.agent_write('agent', ARRAY['id1'], ARRAY['term'], ARRAY[1], 1, 3,
--       true, NULL, NULL);
--   ROLLBACK;
CREATE OR REPLACE FUNCTION {schema}.agent_write(
    p_agent_id text,
    p_ids text[],
    p_terms text[],
    p_deltas integer[],
    p_count integer,
    p_length bigint,
    p_fresh boolean,
    p_fence_name text,
    p_fence_holder text
)
RETURNS TABLE (held boolean, n_docs bigint, analyzer text)
LANGUAGE plpgsql VOLATILE
SET jit = off
AS $fn$
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
                -- No placement here: the distributed tables, through this node's Citus.
                v_memories := NULL;
            END IF;
        END IF;
        IF v_memories IS NOT NULL THEN
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
    -- names: this revision's prefix, the agent's memories shard, or the oid of the schema's
    -- memories table, plain or distributed), so that a call plans none of them (0.3 to 0.5 ms
    -- of a call, docs/scale-out.md).
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
                       ' RETURNING true, n_docs,'
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
            RETURN QUERY SELECT false, NULL::bigint, NULL::text;
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
$fn$;
