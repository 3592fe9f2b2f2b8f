-- The baseline's distribution with Citus (migration 0024), on a coordinator, right after the
-- other files, while the tables are empty (docs/scale-out.md). Every table with an agent_id is
-- distributed by it, colocated with memories; the shared lookups are reference tables. The
-- per-agent functions the store calls are distributed by their first argument, p_agent_id, so
-- that a call made alone runs whole on the worker holding the agent's shards; agent_write, which
-- the store calls inside a transaction block, with force_delegation. The other PL/pgSQL
-- functions are created on every node (a distributed function calls them there). SQL functions
-- stay on the coordinator: Citus plans no statement of a SQL function that reads a distributed
-- table with parameters. A schema migrated on one server is distributed, with its rows, by
-- `actrone-pg migrate --distribute` (actrone_pg/migrations/_citus.py), which ends in the same
-- catalog.
SELECT create_reference_table('{schema}.embedders');
SELECT create_reference_table('{schema}.settings');
SELECT create_distributed_table('{schema}.memories', 'agent_id');
SELECT create_distributed_table('{schema}.sessions', 'agent_id',
                                colocate_with => '{schema}.memories');
SELECT create_distributed_table('{schema}.agent_stats', 'agent_id',
                                colocate_with => '{schema}.memories');
SELECT create_distributed_table('{schema}.locks', 'agent_id',
                                colocate_with => '{schema}.memories');
SELECT create_distributed_table('{schema}.memory_history', 'agent_id',
                                colocate_with => '{schema}.memories');
SELECT create_distributed_table('{schema}.term_stats', 'agent_id',
                                colocate_with => '{schema}.memories');
SELECT create_distributed_table('{schema}.turns', 'agent_id',
                                colocate_with => '{schema}.memories');
SELECT create_distributed_function(
    '{schema}.retrieve(text, text, integer, double precision, text, text[],
        {vector_schema}.vector, double precision, integer, boolean, integer,
        double precision[], double precision, double precision, timestamptz,
        double precision, double precision, bigint, integer, jsonb, integer)',
    '$1', colocate_with := '{schema}.memories');
SELECT create_distributed_function(
    '{schema}.agent_write(text, text[], text[], integer[], integer, bigint, boolean, text,
        text)',
    '$1', colocate_with := '{schema}.memories', force_delegation := true);
SELECT create_distributed_function('{schema}.pack_positions(integer[], bigint, integer)');
