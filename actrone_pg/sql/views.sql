-- Inspection views, for people reading an agent's memory with psql (and `actrone-pg inspect`).
-- They add nothing the tables do not hold; filter them by agent_id like the tables.
CREATE OR REPLACE VIEW {schema}.session_overview AS
SELECT
    s.agent_id,
    s.session_id,
    count(t.id) AS turn_count,
    COALESCE(sum(t.token_count), 0) AS tokens,
    s.created_at,
    s.last_active_at,
    now() - s.last_active_at AS idle,
    s.metadata
FROM {schema}.sessions AS s
LEFT JOIN {schema}.turns AS t ON t.agent_id = s.agent_id AND t.session_id = s.session_id
GROUP BY s.agent_id, s.session_id;

CREATE OR REPLACE VIEW {schema}.recent_turns AS
SELECT
    t.agent_id,
    t.session_id,
    row_number() OVER (PARTITION BY t.agent_id, t.session_id ORDER BY t.seq DESC) AS turns_ago,
    t.id,
    t.created_at,
    now() - t.created_at AS age,
    t.token_count AS tokens,
    t.user_message,
    t.assistant_message,
    t.tool_results
FROM {schema}.turns AS t;

CREATE OR REPLACE VIEW {schema}.memory_overview AS
SELECT
    m.agent_id,
    m.id,
    m.session_id,
    m.created_at,
    now() - m.created_at AS age,
    m.token_count AS tokens,
    m.embedder,
    {vector_schema}.vector_dims(m.embedding) AS dimensions,
    m.source,
    m.content_type,
    m.importance,
    m.sensitivity,
    m.tags,
    m.content
FROM {schema}.memories AS m;
