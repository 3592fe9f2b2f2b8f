-- Pinned by migration 0019. Never edited: a change is a new revision with its own copy.
-- One store call on a schema distributed with Citus by agent_id (docs/scale-out.md), whole: a
-- session's recent turns (L1) and the agent's memories ranked by {schema}.hybrid_search's own
-- statement (0018) and packed as {schema}.pack_positions packs them (0010), with the chosen
-- memories' rows: {schema}.retrieve's result (0015), over any candidates. Installed by the
-- migrations as {schema}.agent_retrieve; 0014's arguments and rows.
--
-- The ranking is not written here: the placeholder line in the CTE h below is replaced, when
-- the migrations read this copy (actrone_pg/migrations/_ops.pinned), by the body of 0018's
-- pinned hybrid_search, verbatim, so that the psql-callable function and this entry rank with
-- one text. Its parameters are this function's, by the same names; the two it does not take
-- are variables here (p_content false: the chosen rows are read once, below; p_excluded the
-- agent's expired memories not swept yet, looked up unless a filtered set's statistics are
-- given, as 0014 did).
--
-- Why PL/pgSQL and not a call of hybrid_search: Citus plans no statement of a SQL function that
-- reads a distributed table with parameters ("could not create distributed plan"), on the
-- coordinator and on a worker alike, while it plans a PL/pgSQL function's statements (their
-- parameters bound as $n); and a distributed function is delegated to the worker holding the
-- agent's shards only when it is called alone (SELECT * FROM f(...), never inside a join).
-- Migration 0014 distributed this function by its first argument, colocated with memories:
-- every statement below reads the agent's shards only (agent_id = p_agent_id on every
-- distributed table, embedders being a reference table), so the worker runs it locally, in one
-- round trip from the coordinator. On a single server it works the same way (the store calls it
-- only on a distributed schema; the parity tests hold it to the reference there).
--
-- Arguments: retrieve's session arguments (p_session_id NULL reads no turns), then those of
-- hybrid_search without p_content and p_excluded, then pack_positions' p_budget and p_max_hits
-- (NULL and NULL: every ranked memory). Rows as retrieve's: kind 'turn' (newest first), 'memory'
-- (best first, with `candidates_considered`), or one 'ranked' row when no memory was chosen;
-- metadata as text.
--
-- Migration 0019: as retrieve (0019), the ranks come as one array, ranks, in place of a column
-- per ranking, from 0019's body; a later revision installs this copy again with its body line
-- naming its own hybrid_search (_ops.install's bodies), which keeps the columns read here
-- (position, cosine, bm25, fused_score, id, token_count and ranks) in their places.
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
-- as hybrid_search (0005): joins between CTEs of at most p_limit rows, never nested loops
SET enable_nestloop = off
AS $fn$
#variable_conflict use_column
DECLARE
    p_content boolean := false;
    p_excluded text[];
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
    IF p_n_docs IS NULL THEN
        -- One probe of the partial index of expiring memories.
        p_excluded := (SELECT array_agg(e.id) FROM {schema}.memories AS e
                       WHERE e.agent_id = p_agent_id AND e.expires_at <= p_now);
    END IF;
    RETURN QUERY
    WITH h (id, "position", cosine, bm25, dense_rank, lexical_rank, recency_rank, fused_score,
            session_id, content, content_type, importance, tags, source, sensitivity,
            created_at, metadata, embedder, token_count, ranks) AS MATERIALIZED (
{{body 0019_hybrid_search}}
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
           c.ranks, c.fused_score, m.id::text,
           m.session_id::text, m.content, m.content_type, m.importance, m.tags, m.source,
           m.sensitivity, m.created_at, m.metadata::text, m.embedder::text, m.token_count,
           m.expires_at, m.source_turn_ids, m.version, m.valid_from, m.valid_to, NULL::text,
           NULL::text, NULL::jsonb
    FROM p
    LEFT JOIN (c JOIN {schema}.memories AS m ON m.agent_id = p_agent_id AND m.id = c.id) ON true
    ORDER BY c.position;
END
$fn$
