"""``actrone-pg consolidate``: turn a session's pending turns into long-term memories now.

The same as ``MemoryManager.consolidate_session`` (spec §9.1) for each ``--session``: the
configured consolidator (``ACTRONE_CONSOLIDATOR``, or ``--consolidator``) writes memories with
their lineage, the session remembers which turns are done, and running it again writes nothing
new. It uses the configured backend (``ACTRONE_*`` settings or the options below) and refuses the
``memory`` backend, whose sessions live inside one process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from actrone_pg.config import BACKENDS, CONSOLIDATORS, MemoryConfig
from actrone_pg.errors import ConfigurationError

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``actrone-pg consolidate``."""
    parser.add_argument("--agent", required=True, help="the agent whose sessions to consolidate")
    parser.add_argument(
        "--session",
        action="append",
        required=True,
        help="a session to consolidate; repeat for more",
    )
    parser.add_argument("--backend", choices=BACKENDS, help="store (default: ACTRONE_BACKEND)")
    parser.add_argument("--dsn", help="PostgreSQL DSN (default: ACTRONE_POSTGRES_DSN)")
    parser.add_argument("--schema", help="PostgreSQL schema (default: ACTRONE_POSTGRES_SCHEMA)")
    parser.add_argument(
        "--data-dir",
        help="data directory of the embedded server, without --dsn "
        "(default: ACTRONE_POSTGRES_DATA_DIR or the per-user data directory)",
    )
    parser.add_argument(
        "--consolidator",
        choices=[c for c in CONSOLIDATORS if c != "none"],
        help="default: ACTRONE_CONSOLIDATOR (extractive)",
    )
    parser.add_argument("--json", action="store_true", help="print the memories written as JSON")


def config_from(args: argparse.Namespace) -> MemoryConfig:
    """The configuration the options and the environment give; never the memory backend."""
    overrides: dict[str, Any] = {}
    for option, field in (
        ("backend", "backend"),
        ("dsn", "postgres_dsn"),
        ("schema", "postgres_schema"),
        ("data_dir", "postgres_data_dir"),
        ("consolidator", "consolidator"),
    ):
        if getattr(args, option, None):
            overrides[field] = getattr(args, option)
    config = MemoryConfig(**overrides)
    if config.backend == "memory":
        raise ConfigurationError(
            "backend",
            "the memory backend keeps sessions inside one process, so a command has none to "
            "consolidate; name the store: --backend postgres or --backend redis_qdrant, "
            "or set ACTRONE_BACKEND",
        )
    if config.backend == "postgres":
        from actrone_pg._cli._pg import start_embedded

        dsn = config.postgres_dsn or start_embedded(config.postgres_data_dir, create=False)
        config = config.replace(postgres_dsn=dsn, postgres_auto_migrate=False)
    if config.consolidator == "none":
        raise ConfigurationError(
            "consolidator", "is 'none'; pass --consolidator extractive (or llm with its settings)"
        )
    return config


def run(args: argparse.Namespace) -> int:
    """Consolidate each session; print the memories written."""
    from rich.console import Console
    from rich.table import Table

    from actrone_pg.manager import create_memory_manager
    from actrone_pg.models import memory_to_dict

    config = config_from(args)

    async def consolidate() -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        async with create_memory_manager(config) as mm:
            for session in dict.fromkeys(args.session):
                for memory_id in await mm.consolidate_session(args.agent, session):
                    memory = await mm.get_memory(args.agent, memory_id)
                    if memory is not None:
                        out.append({"session": session, **memory_to_dict(memory)})
        return out

    written = asyncio.run(consolidate())
    if args.json:
        print(json.dumps({"agent_id": args.agent, "memories": written}, indent=2))
        return 0
    console = Console(highlight=False)
    table = Table(title=f"memories written for agent {args.agent!r}")
    for column in ("session", "id", "type", "importance", "source turns", "content"):
        table.add_column(column, overflow="fold")
    for m in written:
        turns = m["source_turn_ids"]
        shown = ", ".join(turns[:3]) + (f" (+{len(turns) - 3})" if len(turns) > 3 else "")
        table.add_row(
            m["session"], m["id"], m["content_type"], f"{m['importance']:.2f}", shown, m["content"]
        )
    console.print(table)
    console.print(f"{len(written)} memor{'y' if len(written) == 1 else 'ies'} written")
    return 0
