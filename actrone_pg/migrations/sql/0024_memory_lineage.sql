-- Lineage: one row per current memory and turn it was consolidated from (source_turn_ids), in
-- the order the memory lists them. Filter by agent_id like the tables.
CREATE OR REPLACE VIEW {schema}.memory_lineage WITH (security_invoker = true) AS
SELECT
    m.agent_id,
    m.id AS memory_id,
    t.turn_id,
    t.ordinality::integer AS turn_position,
    m.session_id,
    m.source,
    m.created_at,
    m.content
FROM {schema}.memories AS m
CROSS JOIN LATERAL unnest(m.source_turn_ids) WITH ORDINALITY AS t(turn_id, ordinality);
