"""Distribution of an actrone schema with Citus (docs/scale-out.md), read from the catalog.

Used by ``actrone-pg migrate --distribute``, which converts a schema migrated on one server (its
tables and their data) in place, by a schema of the pre-release revisions stamped as the baseline
(``_legacy``), and by later revisions that add a function of their own
(``_ops.distribute_function``). A new schema is distributed by the baseline's plain file,
``sql/0024_distribute.sql``, which ends in the same catalog (tests/stores/test_citus.py checks
that this module then finds nothing to do). Every step is idempotent: what is already
distributed is left alone, so a second run changes nothing.

The rule, from the catalog of the schema:

* a table with an ``agent_id`` column is distributed by it, colocated with ``memories`` (every
  primary key and unique index starts with ``agent_id``: Citus refuses any other);
* every other table but Alembic's version table is a reference table (``embedders``,
  ``settings``: small lookups read with the agent's rows, copied to every node);
* the PL/pgSQL functions the store calls on a distributed schema (:data:`BY_AGENT`) are
  distributed by their first argument, ``p_agent_id``, colocated with ``memories``, so that
  ``SELECT * FROM f(agent, ...)`` called alone runs whole on the worker holding the agent's
  shards; other PL/pgSQL functions are only created on every node (a distributed function calls
  them there), as a fresh migrate on Citus leaves them. SQL functions stay on the coordinator:
  Citus plans no statement of a SQL function that reads a distributed table with parameters.
  The ones the store calls inside a transaction block (:data:`FORCE_DELEGATED`) are distributed
  with ``force_delegation``, which delegates them there too.

Statements go through ``run(statement, params) -> rows``, so that the same code serves an
Alembic bind and a plain psycopg connection. Identifiers are quoted with psycopg.sql; values
travel as bound parameters.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from psycopg import sql

__all__ = [
    "BY_AGENT",
    "COLOCATE_WITH",
    "FORCE_DELEGATED",
    "REFERENCE_TABLES",
    "Run",
    "citus_installed",
    "distribute_function",
    "distribute_schema",
    "distributed",
    "runner",
    "undistribute_schema",
]

logger = logging.getLogger("actrone_pg.migrations")

#: Runs a statement with bound parameters and returns its rows (possibly none).
Run = Callable[[str, Sequence[Any]], Sequence[Sequence[Any]]]

#: The table every per-agent table and function is colocated with.
COLOCATE_WITH = "memories"
#: The per-agent functions the store calls on a distributed schema, distributed by their first
#: argument: ``retrieve``, the one read of every client, and ``agent_write``.
BY_AGENT = ("agent_write", "retrieve")
#: Of those, the ones the store calls inside a transaction block (agent_write, before the
#: batch's COPY): delegated there only with ``force_delegation``.
FORCE_DELEGATED = ("agent_write",)
#: The shared lookup tables made reference tables (documentation; the catalog decides).
REFERENCE_TABLES = ("embedders", "settings")
# Distribution order: a table referenced by a foreign key before the tables that reference it.
_FIRST = ("embedders", "settings", "memories", "sessions")
_VERSION_TABLE = "actrone_alembic_version"


def runner(conn: Any) -> Run:
    """A :data:`Run` over a psycopg (synchronous) connection."""

    def run(statement: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        cur = conn.execute(statement, tuple(params))
        return cur.fetchall() if cur.description is not None else []

    return run


def citus_installed(run: Run) -> bool:
    """Whether the database has the ``citus`` extension (a coordinator, or a worker)."""
    rows = run("SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')", ())
    return bool(rows and rows[0][0])


def distributed(run: Run, schema: str) -> bool:
    """Whether ``schema``'s memories table is distributed by Citus."""
    if not citus_installed(run):
        return False
    rows = run(
        "SELECT EXISTS (SELECT 1 FROM pg_dist_partition AS p JOIN pg_class AS c"
        " ON c.oid = p.logicalrelid JOIN pg_namespace AS n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relname = %s AND p.partmethod = 'h')",
        (schema, COLOCATE_WITH),
    )
    return bool(rows and rows[0][0])


def _tables(run: Run, schema: str) -> list[tuple[str, bool, str | None]]:
    """``(table, has agent_id, Citus partition method or None)`` of the schema's tables."""
    rows = run(
        "SELECT c.relname, EXISTS (SELECT 1 FROM pg_attribute AS a WHERE a.attrelid = c.oid"
        " AND a.attname = 'agent_id' AND NOT a.attisdropped),"
        " (SELECT p.partmethod::text FROM pg_dist_partition AS p WHERE p.logicalrelid = c.oid)"
        " FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relkind IN ('r', 'p') AND c.relname <> %s",
        (schema, _VERSION_TABLE),
    )
    found = [(str(r[0]), bool(r[1]), None if r[2] is None else str(r[2])) for r in rows]
    order = {name: i for i, name in enumerate(_FIRST)}
    return sorted(found, key=lambda t: (order.get(t[0], len(order)), t[0]))


def _functions(run: Run, schema: str) -> list[tuple[str, str, bool]]:
    """``(signature, name, already distributed)`` of the schema's PL/pgSQL functions."""
    rows = run(
        "SELECT p.oid::regprocedure::text, p.proname::text,"
        " EXISTS (SELECT 1 FROM pg_dist_object AS o WHERE o.classid = 'pg_proc'::regclass"
        " AND o.objid = p.oid)"
        " FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace"
        " JOIN pg_language AS l ON l.oid = p.prolang"
        " WHERE n.nspname = %s AND l.lanname = 'plpgsql' ORDER BY 1",
        (schema,),
    )
    return [(str(r[0]), str(r[1]), bool(r[2])) for r in rows]


def distribute_schema(run: Run, schema: str) -> list[str]:
    """Distribute what is not yet distributed in ``schema``; returns what was done, in order.

    A populated table is distributed with its rows (Citus copies them to the shards; writes to
    that table wait meanwhile): docs/scale-out.md, "From one server".
    """
    done: list[str] = []
    colocate = sql.Identifier(schema, COLOCATE_WITH).as_string()
    for table, per_agent, method in _tables(run, schema):
        name = sql.Identifier(schema, table).as_string()
        if per_agent and method != "h":
            if table == COLOCATE_WITH:
                run("SELECT create_distributed_table(%s, 'agent_id')", (name,))
            else:
                run(
                    "SELECT create_distributed_table(%s, 'agent_id', colocate_with => %s)",
                    (name, colocate),
                )
            done.append(f"distributed {table} by agent_id")
        elif not per_agent and method != "n":
            run("SELECT create_reference_table(%s)", (name,))
            done.append(f"reference table {table}")
    for signature, function, known in _functions(run, schema):
        if function in BY_AGENT:
            forced = function in FORCE_DELEGATED
            if _distribute_function(run, schema, signature, force_delegation=forced):
                done.append(f"distributed function {signature}")
        elif not known:
            run("SELECT create_distributed_function(%s::regprocedure)", (signature,))
            done.append(f"function {signature} on every node")
    for step in done:
        logger.info("citus: %s", step)
    return done


def _distribute_function(run: Run, schema: str, signature: str, *, force_delegation: bool) -> bool:
    """Distribute one function by its first argument, colocated with memories (once)."""
    rows = run(
        "SELECT EXISTS (SELECT 1 FROM pg_dist_object AS o WHERE o.classid = 'pg_proc'::regclass"
        " AND o.objid = %s::regprocedure AND o.distribution_argument_index IS NOT NULL)",
        (signature,),
    )
    if rows and rows[0][0]:
        return False
    run(
        "SELECT create_distributed_function(%s::regprocedure, '$1', colocate_with := %s,"
        " force_delegation := %s)",
        (signature, sql.Identifier(schema, COLOCATE_WITH).as_string(), force_delegation),
    )
    return True


def distribute_function(
    run: Run, schema: str, signature: str, *, force_delegation: bool = False
) -> bool:
    """Distribute ``signature`` (schema-qualified, argument types) by its first argument.

    A no-op (``False``) unless ``schema``'s memories table is distributed: off Citus, with
    ``postgres_distribute="off"``, or on a schema not converted yet (``migrate --distribute``
    distributes such functions with the tables). ``force_delegation`` delegates the call inside a
    transaction block too, but then Citus refuses any statement of the function that is not
    filtered by the distribution argument on a colocated table (a read of a reference table
    included); the store calls its reading functions on autocommit connections, outside
    transaction blocks, where a call made alone is delegated without it, and only
    :data:`FORCE_DELEGATED` ones (which read and write the shard tables by name, which Citus
    does not check) inside one.
    """
    if not distributed(run, schema):
        return False
    return _distribute_function(run, schema, signature, force_delegation=force_delegation)


def undistribute_schema(run: Run, schema: str) -> None:
    """Turn ``schema``'s Citus tables back into plain tables of the coordinator (with data)."""
    if not citus_installed(run):
        return
    for table, _per_agent, method in reversed(_tables(run, schema)):
        if method is None:
            continue
        # A table may have gone back already, with the ones its foreign keys connect it to.
        still = run(
            "SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = %s::regclass)",
            (sql.Identifier(schema, table).as_string(),),
        )
        if still and still[0][0]:
            run(
                "SELECT undistribute_table(%s, cascade_via_foreign_keys => true)",
                (sql.Identifier(schema, table).as_string(),),
            )
