"""Shared by the PostgreSQL sub-commands: the connection options, DSN resolution, error mapping."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from actrone_pg.config import MemoryConfig, redact
from actrone_pg.errors import StoreUnavailableError

CONNECT_HINT = (
    "check that the server runs and that the DSN's host, port, user and password are right "
    "(--dsn or ACTRONE_POSTGRES_DSN)"
)


@dataclass(frozen=True)
class Target:
    """The database a command works on."""

    dsn: str
    schema: str
    config: MemoryConfig


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    """``--dsn``, ``--schema`` and ``--data-dir``, defaulting to the ACTRONE_* settings."""
    parser.add_argument(
        "--dsn",
        default=None,
        help="PostgreSQL DSN (default: ACTRONE_POSTGRES_DSN, else the embedded server)",
    )
    parser.add_argument(
        "--schema",
        default=None,
        help="schema of the actrone tables (default: ACTRONE_POSTGRES_SCHEMA or 'actrone')",
    )
    parser.add_argument(
        "--data-dir",
        default=None,
        help="data directory of the embedded server (default: ACTRONE_POSTGRES_DATA_DIR or "
        "the per-user data directory)",
    )


def postgres_config(args: argparse.Namespace, **overrides: Any) -> MemoryConfig:
    """The ``ACTRONE_*`` settings with the command's ``--dsn``, ``--schema``, ``--data-dir``."""
    overrides.setdefault("backend", "postgres")
    for option, field in (
        ("dsn", "postgres_dsn"),
        ("schema", "postgres_schema"),
        ("data_dir", "postgres_data_dir"),
    ):
        if getattr(args, option, None):
            overrides[field] = getattr(args, option)
    return MemoryConfig(**overrides)  # validates the DSN's shape and the schema name


def resolve(args: argparse.Namespace, *, create: bool = False) -> Target:
    """The DSN (the embedded server's if none is given) and the validated schema.

    ``create=False`` for commands that only read: an embedded data directory without a cluster
    is then a ``ConfigurationError`` naming it, not a new empty server.
    """
    config = postgres_config(args)
    dsn = config.postgres_dsn or start_embedded(config.postgres_data_dir, create=create)
    return Target(dsn, config.postgres_schema, config)


def start_embedded(data_dir: str, *, create: bool) -> str:
    """The embedded server's DSN; says on stderr when this command had to start it.

    The server is left running (the next command starts instantly, and ``psql "$(actrone-pg
    dsn)"`` needs it up); the note tells how to stop it.
    """
    from actrone_pg._embedded import embedded_dsn, server_status

    was_running = server_status(data_dir).running
    dsn = embedded_dsn(data_dir, create=create)
    if not was_running:
        print(
            f"actrone-pg: started the embedded PostgreSQL in {data_dir}; it keeps running "
            f"(`actrone-pg server stop --data-dir {data_dir}` stops it)",
            file=sys.stderr,
        )
    return dsn


@contextmanager
def connection_errors(dsn: str) -> Iterator[None]:
    """psycopg's connection failures (refused, unknown host, bad password) as one line."""
    import psycopg

    try:
        yield
    except psycopg.OperationalError as exc:
        reason = " ".join(str(exc).split())
        raise StoreUnavailableError(
            f"cannot connect to PostgreSQL at {redact(dsn)}: {redact(reason)}; {CONNECT_HINT}"
        ) from None
