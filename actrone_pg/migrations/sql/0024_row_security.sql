-- Row-level security per agent (postgres_row_security=True; docs/postgres.md, "Row-level
-- security"): every per-agent table shows and accepts only the rows of the agent the
-- session serves, the custom setting actrone.agent_id, which the store sets on each
-- connection it takes for a call (set_config(..., false) on its autocommit connections; an
-- empty string for a call of no agent). With no agent set, a role without BYPASSRLS sees and
-- writes nothing. The tables' owner and roles with BYPASSRLS are not bound.
--
-- Run by the store's setup (or actrone_pg.migrations.row_security) as the tables' owner, once
-- the schema is at head; running it again changes nothing. 0024_row_security_off.sql removes
-- it. The views are security_invoker, the SQL functions SECURITY INVOKER (the default): both
-- read under the caller's policies.
--
-- The two SECURITY DEFINER functions below are the sweeps' one way across agents: they list
-- the expired memories and sessions (agent and id only); the store then deletes each agent's
-- under that agent's setting. They run as the owner, with search_path pinned; EXECUTE is
-- revoked from PUBLIC and granted by the operator (docs/postgres.md).
--
-- On Citus the setting reaches the workers, where the shards' policies read it, as a SET
-- LOCAL of the call's transaction (Database.serve). Citus relays each CREATE POLICY to the
-- shards, which is why this file runs statement by statement. A batch's first statement takes
-- its agents' shard metadata locks, which Citus grants the tables' owner only: the third
-- SECURITY DEFINER function below takes them (and nothing else) for the application's role.

ALTER TABLE {schema}.sessions ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS actrone_agent ON {schema}.sessions;
CREATE POLICY actrone_agent ON {schema}.sessions
    USING (agent_id = current_setting('actrone.agent_id', true))
    WITH CHECK (agent_id = current_setting('actrone.agent_id', true));

ALTER TABLE {schema}.turns ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS actrone_agent ON {schema}.turns;
CREATE POLICY actrone_agent ON {schema}.turns
    USING (agent_id = current_setting('actrone.agent_id', true))
    WITH CHECK (agent_id = current_setting('actrone.agent_id', true));

ALTER TABLE {schema}.memories ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS actrone_agent ON {schema}.memories;
CREATE POLICY actrone_agent ON {schema}.memories
    USING (agent_id = current_setting('actrone.agent_id', true))
    WITH CHECK (agent_id = current_setting('actrone.agent_id', true));

ALTER TABLE {schema}.memory_history ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS actrone_agent ON {schema}.memory_history;
CREATE POLICY actrone_agent ON {schema}.memory_history
    USING (agent_id = current_setting('actrone.agent_id', true))
    WITH CHECK (agent_id = current_setting('actrone.agent_id', true));

ALTER TABLE {schema}.term_stats ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS actrone_agent ON {schema}.term_stats;
CREATE POLICY actrone_agent ON {schema}.term_stats
    USING (agent_id = current_setting('actrone.agent_id', true))
    WITH CHECK (agent_id = current_setting('actrone.agent_id', true));

ALTER TABLE {schema}.agent_stats ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS actrone_agent ON {schema}.agent_stats;
CREATE POLICY actrone_agent ON {schema}.agent_stats
    USING (agent_id = current_setting('actrone.agent_id', true))
    WITH CHECK (agent_id = current_setting('actrone.agent_id', true));

ALTER TABLE {schema}.locks ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS actrone_agent ON {schema}.locks;
CREATE POLICY actrone_agent ON {schema}.locks
    USING (agent_id = current_setting('actrone.agent_id', true))
    WITH CHECK (agent_id = current_setting('actrone.agent_id', true));

CREATE OR REPLACE FUNCTION {schema}.expired_memory_ids(p_limit integer)
RETURNS TABLE (agent_id text, id text)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
SELECT m.agent_id, m.id FROM {schema}.memories AS m
WHERE m.expires_at IS NOT NULL AND m.expires_at <= now()
ORDER BY m.agent_id LIMIT p_limit
$fn$;
REVOKE ALL ON FUNCTION {schema}.expired_memory_ids(integer) FROM PUBLIC;

CREATE OR REPLACE FUNCTION {schema}.expired_session_ids(p_ttl double precision, p_limit integer)
RETURNS TABLE (agent_id text, session_id text)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
SELECT s.agent_id, s.session_id FROM {schema}.sessions AS s
WHERE s.last_active_at < now() - make_interval(secs => p_ttl) LIMIT p_limit
$fn$;
REVOKE ALL ON FUNCTION {schema}.expired_session_ids(double precision, integer) FROM PUBLIC;

CREATE OR REPLACE FUNCTION {schema}.lock_agent_shards(p_agents text[])
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM lock_shard_metadata(5, ARRAY(
        SELECT DISTINCT get_shard_id_for_distribution_column('{schema}.memories'::regclass, a)
        FROM unnest(p_agents) AS a ORDER BY 1));
END
$fn$;
REVOKE ALL ON FUNCTION {schema}.lock_agent_shards(text[]) FROM PUBLIC;
