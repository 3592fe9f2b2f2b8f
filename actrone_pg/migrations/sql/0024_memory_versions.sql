-- Every version of every memory: the current one (in memories, valid_to NULL) and the ones
-- update_memory replaced (in memory_history), oldest first per memory when ordered by version.
-- Filter by agent_id like the tables.
CREATE OR REPLACE VIEW {schema}.memory_versions WITH (security_invoker = true) AS
SELECT
    m.agent_id, m.id, m.version, m.valid_from, m.valid_to, true AS is_current,
    m.session_id, m.content, m.content_type, m.importance, m.tags, m.source, m.sensitivity,
    m.created_at, m.metadata, m.embedder, m.token_count, m.expires_at, m.source_turn_ids
FROM {schema}.memories AS m
UNION ALL
SELECT
    h.agent_id, h.id, h.version, h.valid_from, h.valid_to, false AS is_current,
    h.session_id, h.content, h.content_type, h.importance, h.tags, h.source, h.sensitivity,
    h.created_at, h.metadata, h.embedder, h.token_count, h.expires_at, h.source_turn_ids
FROM {schema}.memory_history AS h;
