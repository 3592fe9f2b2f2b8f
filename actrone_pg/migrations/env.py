"""Alembic environment of actrone_pg's migrations.

Settings, first found wins:

* schema: ``config.attributes["actrone_schema"]``, ``-x schema=...``, the ini option
  ``actrone_schema``, ``$ACTRONE_POSTGRES_SCHEMA``, else ``actrone``;
* distribution (``postgres_distribute``: "auto", "citus" or "off"):
  ``config.attributes["actrone_distribute"]``, ``-x distribute=...``, the ini option
  ``actrone_distribute``, ``$ACTRONE_POSTGRES_DISTRIBUTE``, else ``auto``;
* server: ``config.attributes["connection"]`` (an open SQLAlchemy connection),
  ``config.attributes["actrone_dsn"]``, ``-x dsn=...``, the ini option ``sqlalchemy.url``,
  ``$ACTRONE_POSTGRES_DSN``.

The version table is ``actrone_alembic_version`` inside the schema. Before anything is created
the environment checks that pgvector can be installed, so a server without it is left untouched.
A schema at 0023, the last pre-release revision, is stamped as the baseline, 0024, before the
migrations run (:mod:`actrone_pg.migrations._legacy`). An upgrade that finds the schema at head
installs its functions and views again if they differ from the head files
(:mod:`actrone_pg.migrations._objects`; the differences are left in
``config.attributes["actrone_refreshed"]``).
"""

from __future__ import annotations

import os
from typing import Any

import sqlalchemy as sa
from alembic import context
from psycopg import sql

from actrone_pg.config import DISTRIBUTE_MODES
from actrone_pg.errors import ConfigurationError, SchemaError
from actrone_pg.migrations import (
    PGVECTOR_HINT,
    VERSION_TABLE,
    _legacy,
    _objects,
    advisory_lock,
    lock_key,
    validate_schema,
)
from actrone_pg.migrations.models import build_metadata

config = context.config
x_args = context.get_x_argument(as_dictionary=True)


def _setting(attr: str, x_name: str, ini: str, env: str) -> str | None:
    value = config.attributes.get(attr) or x_args.get(x_name) or config.get_main_option(ini)
    return value or os.environ.get(env) or None


schema = validate_schema(
    _setting("actrone_schema", "schema", "actrone_schema", "ACTRONE_POSTGRES_SCHEMA") or "actrone"
)
target_metadata = build_metadata(schema)
distribute = (
    (
        _setting(
            "actrone_distribute", "distribute", "actrone_distribute", "ACTRONE_POSTGRES_DISTRIBUTE"
        )
        or "auto"
    )
    .strip()
    .lower()
)
if distribute not in DISTRIBUTE_MODES:
    raise ConfigurationError(
        "postgres_distribute",
        f"unknown mode {distribute!r}; choose one of {', '.join(DISTRIBUTE_MODES)}",
    )


def _include_name(name: str | None, type_: str, parent_names: Any) -> bool:
    # Compare only our own schema (and never our version table) with the metadata.
    if type_ == "schema":
        return name == schema
    if type_ == "table":
        return name != VERSION_TABLE
    return True


def _run(connection: sa.Connection, *, lock_in_transaction: bool = False) -> None:
    available = connection.exec_driver_sql(
        "SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')"
    ).scalar()
    if not available:
        if not lock_in_transaction:
            connection.rollback()
        raise SchemaError(PGVECTOR_HINT)
    if not lock_in_transaction:
        # End the check's implicit transaction so the migrations get their own (and commit it);
        # a caller's connection stays in the caller's transaction, which the caller commits.
        connection.rollback()
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        version_table=VERSION_TABLE,
        version_table_schema=schema,
        include_schemas=True,
        include_name=_include_name,
        compare_type=True,
        # Read by the revisions that distribute with Citus (_ops.distribute_mode).
        actrone_distribute=distribute,
    )
    with context.begin_transaction():
        # Inside the migration transaction: if anything fails, the schema goes too.
        if lock_in_transaction:
            # A caller's own connection: serialise with other runs for this transaction.
            connection.exec_driver_sql(
                sql.SQL("SELECT pg_advisory_xact_lock({})")
                .format(sql.Literal(lock_key(schema)))
                .as_string()
            )
        connection.exec_driver_sql(
            sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)).as_string()
        )
        # A schema of the pre-release revisions, at their last, 0023: stamped as the baseline.
        _legacy.adopt(connection, schema)
        # An upgrade that finds the schema at head already: its functions and views are brought
        # to the head files if an earlier build left others (_objects); tables stay as they are.
        migration = context.get_context()
        upgrade = getattr(migration.opts.get("fn"), "__name__", None) == "upgrade"
        at_head = upgrade and migration.get_current_revision() == context.get_head_revision()
        context.run_migrations()
        if at_head:
            config.attributes["actrone_refreshed"] = _objects.refresh(connection, schema)


def run_migrations_online() -> None:
    """Run against a live database (the only mode: the migrations query the server)."""
    given = config.attributes.get("connection")
    if given is not None:
        _run(given, lock_in_transaction=True)
        return
    dsn = _setting("actrone_dsn", "dsn", "sqlalchemy.url", "ACTRONE_POSTGRES_DSN")
    if not dsn:
        raise SchemaError(
            "no database given: pass -x dsn=postgresql://..., set sqlalchemy.url, or set "
            "ACTRONE_POSTGRES_DSN"
        )
    libpq_dsn = dsn.replace("postgresql+psycopg://", "postgresql://", 1)

    def connect() -> Any:
        import psycopg

        return psycopg.connect(libpq_dsn, connect_timeout=10)

    engine = sa.create_engine("postgresql+psycopg://", creator=connect, poolclass=sa.NullPool)
    # migrate() already holds the lock (attributes set); the alembic CLI path takes it here.
    lock = config.attributes.get("actrone_dsn") is None
    try:
        if lock:
            with advisory_lock(libpq_dsn, schema), engine.connect() as connection:
                _run(connection)
        else:
            with engine.connect() as connection:
                _run(connection)
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise SchemaError(
        "offline (--sql) mode is not supported: the migrations look up where pgvector is "
        "installed; run them against the database"
    )
run_migrations_online()
