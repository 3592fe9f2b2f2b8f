-- Row-level security removed (0024_row_security.sql installed it): the per-agent tables'
-- policies dropped and row security disabled, its SECURITY DEFINER functions dropped.

DROP POLICY IF EXISTS actrone_agent ON {schema}.sessions;
ALTER TABLE {schema}.sessions DISABLE ROW LEVEL SECURITY;

DROP POLICY IF EXISTS actrone_agent ON {schema}.turns;
ALTER TABLE {schema}.turns DISABLE ROW LEVEL SECURITY;

DROP POLICY IF EXISTS actrone_agent ON {schema}.memories;
ALTER TABLE {schema}.memories DISABLE ROW LEVEL SECURITY;

DROP POLICY IF EXISTS actrone_agent ON {schema}.memory_history;
ALTER TABLE {schema}.memory_history DISABLE ROW LEVEL SECURITY;

DROP POLICY IF EXISTS actrone_agent ON {schema}.term_stats;
ALTER TABLE {schema}.term_stats DISABLE ROW LEVEL SECURITY;

DROP POLICY IF EXISTS actrone_agent ON {schema}.agent_stats;
ALTER TABLE {schema}.agent_stats DISABLE ROW LEVEL SECURITY;

DROP POLICY IF EXISTS actrone_agent ON {schema}.locks;
ALTER TABLE {schema}.locks DISABLE ROW LEVEL SECURITY;

DROP FUNCTION IF EXISTS {schema}.expired_memory_ids(integer);
DROP FUNCTION IF EXISTS {schema}.expired_session_ids(double precision, integer);
DROP FUNCTION IF EXISTS {schema}.lock_agent_shards(text[]);
