-- Inspection views, for people reading an agent's memory with psql (and `actrone-pg inspect`).
-- They add nothing the tables do not hold; filter them by agent_id like the tables.
CREATE OR REPLACE VIEW {schema}.memory_overview WITH (security_invoker = true) AS
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
