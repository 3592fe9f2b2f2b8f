"""Shared by the sub-commands that open the configured store (consolidate, memories, reindex,
sweep): the store options, and the configuration they give.

Each refuses the ``memory`` backend, whose data lives inside one process (a new one holds
nothing), and never creates or migrates a PostgreSQL schema: a wrong one is a ``SchemaError``
naming it.
"""

from __future__ import annotations

import argparse
from typing import Any

from actrone_pg.config import BACKENDS, MemoryConfig
from actrone_pg.errors import ConfigurationError

__all__ = ["add_store_arguments", "store_config"]

# Each store option and the MemoryConfig field it sets.
_OPTIONS = (
    ("backend", "backend"),
    ("dsn", "postgres_dsn"),
    ("schema", "postgres_schema"),
    ("data_dir", "postgres_data_dir"),
)


def add_store_arguments(parser: argparse.ArgumentParser, *, backend_help: str) -> None:
    """``--backend``, ``--dsn``, ``--schema`` and ``--data-dir``, defaulting to ACTRONE_*."""
    parser.add_argument("--backend", choices=BACKENDS, help=backend_help)
    parser.add_argument("--dsn", help="PostgreSQL DSN (default: ACTRONE_POSTGRES_DSN)")
    parser.add_argument("--schema", help="PostgreSQL schema (default: ACTRONE_POSTGRES_SCHEMA)")
    parser.add_argument(
        "--data-dir",
        help="data directory of the embedded server, without --dsn "
        "(default: ACTRONE_POSTGRES_DATA_DIR or the per-user data directory)",
    )


def store_config(
    args: argparse.Namespace, *, memory_refusal: str, **overrides: Any
) -> MemoryConfig:
    """The ``ACTRONE_*`` settings with ``overrides`` and the store options given.

    ``memory_refusal`` says why the command has nothing to do on the ``memory`` backend and what
    to pass instead. On PostgreSQL without a DSN, the embedded server of the data directory is
    started (never created) and its DSN used.
    """
    for option, field in _OPTIONS:
        if getattr(args, option, None):
            overrides[field] = getattr(args, option)
    config = MemoryConfig(**overrides)
    if config.backend == "memory":
        raise ConfigurationError("backend", memory_refusal)
    if config.backend == "postgres":
        from actrone_pg._cli._pg import start_embedded

        dsn = config.postgres_dsn or start_embedded(config.postgres_data_dir, create=False)
        config = config.replace(postgres_dsn=dsn, postgres_auto_migrate=False)
    return config
