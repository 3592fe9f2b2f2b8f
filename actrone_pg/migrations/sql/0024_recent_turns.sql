-- Inspection views, for people reading an agent's memory with psql (and `actrone-pg inspect`).
-- They add nothing the tables do not hold; filter them by agent_id like the tables.
CREATE OR REPLACE VIEW {schema}.recent_turns WITH (security_invoker = true) AS
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
