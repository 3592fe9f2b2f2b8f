"""Opening the PostgreSQL store: the embedded server if asked, the schema's migration or check,
the pool, and the checks that the schema matches the configuration.
"""

from __future__ import annotations

import asyncio
import logging
import math
from pathlib import Path

from actrone_pg.config import redact
from actrone_pg.errors import (
    ConfigurationError,
    MissingDependencyError,
    SchemaError,
    StoreError,
    StoreUnavailableError,
)
from actrone_pg.ranking import Analyzer, follow_recorded
from actrone_pg.stores.postgres.connection import Database
from actrone_pg.stores.postgres.settings import SchemaFacts
from actrone_pg.stores.postgres.statements import (
    CITUS_INSTALLED,
    DISTRIBUTED,
    RECORD_ANALYZER,
    RECORD_TS_CONFIG,
    SELECT_ANALYZER,
    SELECT_TS_CONFIG,
    VECTOR_SCHEMA,
)

try:
    import psycopg
    from pgvector.psycopg.vector import register_vector_info
    from psycopg import sql
    from psycopg.adapt import AdaptersMap
    from psycopg.types import TypeInfo
    from psycopg_pool import PoolTimeout
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("postgres", exc.name or "psycopg") from None

__all__ = ["setup"]

logger = logging.getLogger("actrone_pg.postgres")


async def setup(db: Database) -> None:
    """Start the embedded server if needed, migrate (or check the schema), open the pool, and
    record what the server and the schema are (``db.facts``, once)."""
    if db.pool is not None:
        return
    settings = db.settings
    if db.dsn is None:
        from actrone_pg._embedded import embedded_dsn

        data_dir = settings.data_dir
        if data_dir is None:
            from actrone_pg.config import default_data_dir

            data_dir = default_data_dir()
        db.dsn = await asyncio.to_thread(embedded_dsn, Path(data_dir))
    await asyncio.to_thread(_prepare_schema, db, db.dsn)
    if db.adapters is None:
        db.adapters = await _vector_adapters(db, db.dsn)
    pool = db.new_pool(db.dsn)
    try:
        await pool.open(wait=True, timeout=settings.connect_timeout)
    except PoolTimeout:
        await pool.close()
        raise StoreUnavailableError(
            f"could not connect to PostgreSQL within {settings.connect_timeout} s "
            "(postgres_connect_timeout); is the server running and the DSN right?"
        ) from None
    db.pool = pool
    try:
        await _check_text_search_config(db)
        analyzer = await _check_text_analyzer(db)
        async with db.conn() as conn:
            cur = await conn.execute(VECTOR_SCHEMA)
            row = await cur.fetchone()
            vector_schema = str(row[0]) if row else "public"
            cur = await conn.execute(CITUS_INSTALLED)
            citus = bool((await cur.fetchone() or (False,))[0])
            distributed = False
            if citus:
                cur = await conn.execute(
                    DISTRIBUTED, (sql.Identifier(db.schema, "memories").as_string(),)
                )
                distributed = bool((await cur.fetchone() or (False,))[0])
        _check_distribution(db, citus, distributed)
        db.facts = SchemaFacts(
            analyzer=analyzer,
            vector_schema=vector_schema,
            distributed=distributed,
        )
    except BaseException:
        await db.close()
        raise


async def _vector_adapters(db: Database, dsn: str) -> AdaptersMap:
    """psycopg's adapters with pgvector's vector type, for every connection of this store.

    pgvector's registration makes new dumper classes on each call, and psycopg caches every
    class it has seen in a class-level map that is never emptied: registering per
    connection grew the process by ~25 KB per new connection (the pool replaces them
    hourly and after outages). So the type is looked up once (its OID is the database's)
    and registered once, on a map each pooled connection starts from (``context=``).
    """
    try:
        async with await psycopg.AsyncConnection.connect(
            dsn, autocommit=True, connect_timeout=max(1, math.ceil(db.settings.connect_timeout))
        ) as conn:
            info = await TypeInfo.fetch(conn, "vector")
    except psycopg.OperationalError as exc:
        raise StoreUnavailableError(redact(f"cannot connect to PostgreSQL: {exc}")) from None
    if info is None:
        raise SchemaError(
            "the database has no 'vector' type: pgvector is not installed in it "
            "(run `actrone-pg migrate`, which installs it)"
        )
    # One map per OID of the type in this process, not per store: each store (each manager
    # created and closed) made new classes that stayed in psycopg's map, ~6 KB a store.
    key = (info.oid, info.array_oid)
    adapters = _ADAPTERS.get(key)
    if adapters is None:
        adapters = _ADAPTERS[key] = AdaptersMap(psycopg.adapters)
        register_vector_info(adapters, info)  # type: ignore[arg-type]  # an AdaptContext too
    return adapters


# The vector type's adapters by its OIDs (the type's, its array's): a few per process at most.
_ADAPTERS: dict[tuple[int, int], AdaptersMap] = {}


def _check_distribution(db: Database, citus: bool, distributed: bool) -> None:
    """``postgres_distribute="citus"`` requires a distributed schema."""
    if db.settings.distribute != "citus" or distributed:
        return
    if not citus:
        raise ConfigurationError(
            "postgres_distribute",
            "'citus' needs a Citus coordinator, and this server has no citus extension; "
            "connect to the coordinator, or set postgres_distribute='auto' (docs/scale-out.md)",
        )
    raise SchemaError(
        f"schema {db.schema!r} is not distributed with Citus (it was migrated on one "
        f"server, or with postgres_distribute='off'); run `actrone-pg migrate --distribute "
        f"--schema {db.schema}` on the coordinator (docs/scale-out.md, 'From one server')"
    )


async def _check_text_search_config(db: Database) -> None:
    # The term statistics are only meaningful under the configuration that built them: the
    # first store to write a schema records it, and a store configured otherwise refuses.
    async with db.conn() as conn:
        if db.ts_config != "simple":
            cur = await conn.execute(
                "SELECT count(*) FROM pg_ts_config WHERE cfgname = %s", (db.ts_config,)
            )
            row = await cur.fetchone()
            if not row or not row[0]:
                raise ConfigurationError(
                    "postgres_text_search_config",
                    f"the server has no text search configuration {db.ts_config!r} "
                    "(see \\dF in psql)",
                )
        await conn.execute(db.compose(RECORD_TS_CONFIG), (db.ts_config,))
        cur = await conn.execute(db.compose(SELECT_TS_CONFIG))
        row = await cur.fetchone()
    recorded = str(row[0]) if row else db.ts_config
    if recorded != db.ts_config:
        raise ConfigurationError(
            "postgres_text_search_config",
            f"schema {db.schema!r} holds term statistics built with {recorded!r}, not "
            f"{db.ts_config!r}; use {recorded!r}, or another postgres_schema",
        )


async def _check_text_analyzer(db: Database) -> Analyzer:
    # Like the configuration: term_freqs, doc_len and the statistics hold the analyzer's
    # terms, so the schema records it and a store configured otherwise refuses to write
    # (`actrone-pg reindex` rebuilds them). A schema written before analyzers were recorded
    # holds plain tokens: it is recorded as 'simple'.
    # Returns the analyzer the store follows: the configured one, or the recorded one.
    if db.ts_config != "simple":
        return db.analyzer
    async with db.conn() as conn:
        await conn.execute(db.compose(RECORD_ANALYZER), (db.analyzer.index_name,))
        cur = await conn.execute(db.compose(SELECT_ANALYZER))
        row = await cur.fetchone()
    recorded = str(row[0]) if row else db.analyzer.index_name
    return follow_recorded(
        f"schema {db.schema!r}",
        db.analyzer,
        recorded,
        dates_given=db.settings.lexical_dates is not None,
    )


def _prepare_schema(db: Database, dsn: str) -> None:
    _migrate(db, dsn)
    if db.settings.row_security:
        _install_row_security(db, dsn)


def _install_row_security(db: Database, dsn: str) -> None:
    """``postgres_row_security``: the schema's policies, installed if missing (as the owner)."""
    from actrone_pg import migrations

    try:
        if migrations.row_security_enabled(dsn, db.schema):
            return
    except psycopg.OperationalError as exc:
        raise StoreUnavailableError(redact(f"cannot connect to PostgreSQL: {exc}")) from None
    except psycopg.Error as exc:
        raise StoreError(redact(f"cannot read the schema's row security: {exc}")) from exc
    if not db.settings.auto_migrate:
        raise SchemaError(
            f"postgres_row_security=True, but schema {db.schema!r} has no row-level security; "
            'install it as the tables\' owner (docs/postgres.md, "Row-level security")'
        )
    migrations.row_security(dsn, db.schema, enable=True)


def _migrate(db: Database, dsn: str) -> None:
    from actrone_pg import migrations

    head = migrations.head_revision()
    try:
        current = migrations.current_revision(
            dsn, db.schema, connect_timeout=db.settings.connect_timeout
        )
    except psycopg.OperationalError as exc:
        raise StoreUnavailableError(redact(f"cannot connect to PostgreSQL: {exc}")) from None
    except psycopg.Error as exc:
        raise StoreError(redact(f"cannot read the schema version: {exc}")) from exc
    if current == head:
        return
    if current is not None and not migrations.upgradable(current):
        raise SchemaError(
            f"schema {db.schema!r} is at revision {current}, which this version of "
            f"actrone_pg does not know (its newest is {head}): the database was migrated by "
            "a newer release; upgrade actrone-pg"
        )
    if db.settings.auto_migrate:
        logger.info("migrating schema %s from %s to %s", db.schema, current, head)
        migrations.migrate(
            dsn, db.schema, text_search_config=db.ts_config, distribute=db.settings.distribute
        )
        return
    state = "has never been migrated" if current is None else f"is at revision {current}"
    raise SchemaError(
        f"schema {db.schema!r} {state}, but this version of actrone_pg needs revision "
        f"{head}; run `actrone-pg migrate --schema {db.schema}` (or set "
        "postgres_auto_migrate=True)"
    )
