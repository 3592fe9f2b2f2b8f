-- Pinned by migration 0019. Never edited: a change is a new revision with its own copy.
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
-- Migration 0018: the ranking is not a call of hybrid_search any more but its body (0018's pinned
-- copy), put in place of the placeholder line in the CTE h below when the migrations read this
-- copy (actrone_pg/migrations/_ops.pinned), as agent_retrieve (0017) does: the same text ranks
-- in hybrid_search, here and on Citus. Called as a function, hybrid_search returned its 500
-- ranked rows through a tuplestore of its own, 19 columns wide, that h then copied; inline, they
-- are stored once, the nine columns h reads (docs/benchmarks.md, "The ranking's fixed cost,
-- measured by parts"). The body's parameters this function does not take are variables of the
-- same names (p_content false: the chosen rows are read once, below; p_candidates and the given
-- statistics NULL: the agent's exact scan and statistics). enable_nestloop is off as in
-- hybrid_search (migration 0005), for the body's joins; the final probe per chosen memory is a
-- LATERAL subquery, which only a nested loop runs.
--
-- Migration 0019: the explain columns are cosine, bm25, ranks and fused_score; ranks is the
-- array of the body's ranks (0019's hybrid_search: one element per ranking, in the order of
-- p_rrf_weights) in place of a column per ranking, so that a new ranking changes the body
-- alone. A later revision installs this copy again with its body line naming its own
-- hybrid_search (_ops.install's bodies), provided that copy keeps the columns this one reads:
-- position, cosine, bm25, fused_score, id, token_count and ranks, in their places.
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
    ORDER BY c.position;
END
$fn$
