"""Shared by the PostgreSQL sub-commands: the ``--dsn``/``--schema`` options and DSN resolution."""

from __future__ import annotations

import argparse
import os
from typing import Any

from actrone_pg.config import MemoryConfig


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    """``--dsn``, ``--schema`` and ``--data-dir``, defaulting to the ACTRONE_* settings."""
    parser.add_argument(
        "--dsn",
        default=os.environ.get("ACTRONE_POSTGRES_DSN"),
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


def resolve(args: argparse.Namespace) -> tuple[str, str]:
    """The DSN (starting the embedded server if none is given) and the validated schema."""
    overrides: dict[str, Any] = {"backend": "postgres"}
    if args.schema:
        overrides["postgres_schema"] = args.schema
    if args.data_dir:
        overrides["postgres_data_dir"] = args.data_dir
    config = MemoryConfig(**overrides)
    dsn = args.dsn or config.postgres_dsn
    if not dsn:
        from actrone_pg._embedded import embedded_dsn

        dsn = embedded_dsn(config.postgres_data_dir)
    return dsn, config.postgres_schema
