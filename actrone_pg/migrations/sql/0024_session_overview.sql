-- Inspection views, for people reading an agent's memory with psql (and `actrone-pg inspect`).
-- They add nothing the tables do not hold; filter them by agent_id like the tables.
CREATE OR REPLACE VIEW {schema}.session_overview WITH (security_invoker = true) AS
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
