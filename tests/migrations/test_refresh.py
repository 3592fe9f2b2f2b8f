"""A schema at head whose functions or views are not the shipped ones (left by an earlier build of
the unreleased baseline): an upgrade installs them again, tables and rows untouched, and changes
nothing when they are the shipped ones (actrone_pg/migrations/_objects.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from actrone_pg import migrations
from actrone_pg.errors import SchemaError
from actrone_pg.stores.postgres import PostgresSettings, PostgresStore
from tests.factories import record, request
from tests.migrations.test_baseline import catalog, vector_schema
from tests.sql.test_installed import installed_differences

pytestmark = pytest.mark.postgres

RETRIEVE = (
    "text, text, integer, double precision, text, text[], {vector_schema}.vector,"
    " double precision, integer, boolean, integer, double precision[], double precision,"
    " double precision, timestamptz, double precision, double precision, bigint, integer,"
    " jsonb, integer"
)


def replace_retrieve_with_an_older_signature(dsn: str, schema: str) -> None:
    """As an earlier build of 0024 left it: ``retrieve`` with another argument list."""
    with psycopg.connect(dsn) as conn:
        arguments = RETRIEVE.replace(
            "{vector_schema}", sql.Identifier(vector_schema(conn)).as_string()
        )
        name = sql.Identifier(schema, "retrieve").as_string()
        conn.execute(f"DROP FUNCTION {name}({arguments})".encode())
        conn.execute(
            f"CREATE FUNCTION {name}(p_agent_id text, p_query text) RETURNS TABLE (id text)"
            " LANGUAGE sql AS $$ SELECT NULL::text WHERE false $$".encode()
        )


def states(dsn: str, schema: str) -> list[tuple[Any, ...]]:
    """Each function and view of ``schema`` with the transaction that last wrote its row."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(
            "SELECT p.oid::regprocedure::text, p.xmin::text FROM pg_proc AS p"
            " JOIN pg_namespace AS n ON n.oid = p.pronamespace WHERE n.nspname = %s"
            " UNION ALL SELECT c.relname::text, c.xmin::text FROM pg_class AS c"
            " JOIN pg_namespace AS n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relkind = 'v' ORDER BY 1",
            (schema, schema),
        ).fetchall()


async def search_works(dsn: str, schema: str) -> None:
    """The memory written before the functions were installed again is still there, and found."""
    store = PostgresStore(PostgresSettings(dsn, schema=schema, auto_migrate=False))
    await store.setup()
    try:
        found = await store.search(request("a", "tea", [1, 0, 0, 0]))
        assert [hit.memory.id for hit in found.hits] == ["m1"]
    finally:
        await store.close()


async def test_migrate_at_head_installs_an_older_retrieve_again_and_the_store_works(
    postgres_dsn: str, scratch_schema: str, postgres_schema: str
) -> None:
    migrations.migrate(postgres_dsn, scratch_schema)
    replace_retrieve_with_an_older_signature(postgres_dsn, scratch_schema)
    store = PostgresStore(PostgresSettings(postgres_dsn, schema=scratch_schema))
    await store.setup()
    try:
        await store.upsert_memories([record("a", "m1", "green tea", [1, 0, 0, 0])])
        with pytest.raises(SchemaError, match="(?s)missing a function.*run `actrone-pg migrate`"):
            await store.search(request("a", "tea", [1, 0, 0, 0]))
    finally:
        await store.close()

    found = migrations.migrate(postgres_dsn, scratch_schema)

    assert found == ["function retrieve is not the head file's"]
    assert migrations.current_revision(postgres_dsn, scratch_schema) == migrations.head_revision()
    assert installed_differences(postgres_dsn, scratch_schema) == []
    assert catalog(postgres_dsn, scratch_schema) == catalog(postgres_dsn, postgres_schema)
    migrations.check(postgres_dsn, scratch_schema)
    await search_works(postgres_dsn, scratch_schema)


def test_migrate_at_head_installs_a_changed_body_and_view_again(
    postgres_dsn: str, scratch_schema: str
) -> None:
    migrations.migrate(postgres_dsn, scratch_schema)
    with psycopg.connect(postgres_dsn) as conn:
        conn.execute(
            sql.SQL(
                "CREATE OR REPLACE FUNCTION {}(p_query text) RETURNS text[] LANGUAGE sql"
                " IMMUTABLE AS $$ SELECT ARRAY[p_query] $$"
            ).format(sql.Identifier(scratch_schema, "query_terms"))
        )
        conn.execute(
            sql.SQL("ALTER VIEW {} RESET (security_invoker)").format(
                sql.Identifier(scratch_schema, "recent_turns")
            )
        )
        conn.execute(
            sql.SQL(
                "CREATE FUNCTION {}(p_agent_id text) RETURNS int LANGUAGE sql AS $$ SELECT 1 $$"
            ).format(sql.Identifier(scratch_schema, "agent_retrieve"))
        )
    assert len(installed_differences(postgres_dsn, scratch_schema)) == 2
    assert view_options(postgres_dsn, scratch_schema) is None

    found = migrations.migrate(postgres_dsn, scratch_schema)

    assert found == ["function agent_retrieve is not one the library installs"]
    assert installed_differences(postgres_dsn, scratch_schema) == []
    assert view_options(postgres_dsn, scratch_schema) == ["security_invoker=true"]


def test_a_changed_view_option_alone_is_a_difference(
    postgres_dsn: str, scratch_schema: str
) -> None:
    migrations.migrate(postgres_dsn, scratch_schema)
    with psycopg.connect(postgres_dsn) as conn:
        conn.execute(
            sql.SQL("ALTER VIEW {} RESET (security_invoker)").format(
                sql.Identifier(scratch_schema, "recent_turns")
            )
        )
    found = migrations.migrate(postgres_dsn, scratch_schema)
    assert found == ["view recent_turns is not the head file's"]
    assert view_options(postgres_dsn, scratch_schema) == ["security_invoker=true"]


def view_options(dsn: str, schema: str) -> Any:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT reloptions FROM pg_class WHERE oid = %s::regclass",
            (sql.Identifier(schema, "recent_turns").as_string(),),
        ).fetchone()
    return row[0] if row else "missing"


def test_migrate_at_head_with_the_shipped_functions_changes_nothing(
    postgres_dsn: str, scratch_schema: str
) -> None:
    migrations.migrate(postgres_dsn, scratch_schema)
    before = states(postgres_dsn, scratch_schema)
    assert migrations.migrate(postgres_dsn, scratch_schema) == []
    assert states(postgres_dsn, scratch_schema) == before


def test_the_users_own_alembic_upgrade_at_head_installs_them_again(
    postgres_dsn: str, scratch_schema: str, tmp_path: Path
) -> None:
    migrations.migrate(postgres_dsn, scratch_schema)
    replace_retrieve_with_an_older_signature(postgres_dsn, scratch_schema)
    ini = tmp_path / "alembic.ini"
    ini.write_text("[actrone]\nscript_location = actrone_pg:migrations\n")
    alembic = [sys.executable, "-m", "alembic", "-c", str(ini), "-n", "actrone"]
    options = ["-x", f"schema={scratch_schema}", "-x", f"dsn={postgres_dsn}"]
    subprocess.run([*alembic, *options, "upgrade", "head"], check=True, capture_output=True)
    assert installed_differences(postgres_dsn, scratch_schema) == []
    subprocess.run([*alembic, *options, "check"], check=True, capture_output=True)


def test_a_downgrade_and_a_stamp_at_head_leave_the_functions_alone(
    postgres_dsn: str, scratch_schema: str
) -> None:
    # Only an upgrade installs them again: `alembic downgrade <head>` and `stamp head` at head
    # change nothing.
    from alembic import command

    migrations.migrate(postgres_dsn, scratch_schema)
    replace_retrieve_with_an_older_signature(postgres_dsn, scratch_schema)
    before = states(postgres_dsn, scratch_schema)
    cfg = migrations.make_config(postgres_dsn, scratch_schema)
    command.downgrade(cfg, migrations.head_revision())
    command.stamp(cfg, "head")
    assert states(postgres_dsn, scratch_schema) == before
