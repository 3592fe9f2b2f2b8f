"""``actrone-pg import FILE [--agent B]``: load an export into the configured store.

The whole file is checked first: a bad line is one error naming its line number, and nothing is
written. Then each memory version is embedded (the configured embedder, or ``--embedder``) and
written with its id, versions and lineage, and each turn into its session; what the agent
already has is left alone, so running it twice writes nothing the second time. Any backend but
the in-process one (``--backend``/``--dsn`` or ``ACTRONE_*``); on PostgreSQL the schema must
exist (``actrone-pg migrate``). ``FILE`` may be ``-`` for stdin. docs/export.md has the format.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from actrone_pg._cli._store import add_store_arguments
from actrone_pg._cli.export import config_from, progress
from actrone_pg.config import EMBEDDING_PROVIDERS

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``actrone-pg import``."""
    parser.description = (
        "Load a file of `actrone-pg export` into the configured store: every version of each "
        "memory (ids, lineage, expiry kept) and the sessions' turns, embedded by the configured "
        "embedder. The whole file is checked first: a bad line is refused with its line number "
        "and nothing is written. What the agent already has is left alone, so a second import "
        "writes nothing; a memory with other content under the same id is refused. The format: "
        "docs/export.md."
    )
    parser.add_argument("file", help="an export of `actrone-pg export` (- reads stdin)")
    parser.add_argument(
        "--agent", help="the agent to import into (default: the agent the file was exported from)"
    )
    add_store_arguments(parser, backend_help="store to write")
    parser.add_argument(
        "--embedder",
        choices=EMBEDDING_PROVIDERS,
        help="embeds the memories (default: ACTRONE_EMBEDDING_PROVIDER or 'local')",
    )


def run(args: argparse.Namespace) -> int:
    """Import the file; say what was found and written on stderr."""
    from actrone_pg.export import import_agent
    from actrone_pg.manager import create_memory_manager

    overrides: dict[str, Any] = {}
    if args.embedder:
        overrides["embedding_provider"] = args.embedder
    config = config_from(args, **overrides)
    source = sys.stdin if args.file == "-" else args.file

    async def load() -> str:
        async with create_memory_manager(config) as mm:
            report = await import_agent(mm, source, agent_id=args.agent, progress=progress)
        return report.summary()

    progress(f"imported {asyncio.run(load())}")
    return 0
