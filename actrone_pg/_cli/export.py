"""``actrone-pg export --agent A [--out FILE]``: an agent's memories and sessions as JSON Lines.

Every version of every current memory (lineage, expiry, ids) and every live session with its
turns, after a versioned header line (docs/export.md). Without ``--out`` the file goes to stdout;
progress and the summary go to stderr. It reads the configured backend (``ACTRONE_*`` settings or
the options) and, like ``memories``, refuses the ``memory`` backend and creates nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING, Any

from actrone_pg._cli._store import add_store_arguments, require_agent, store_config
from actrone_pg.config import MemoryConfig

if TYPE_CHECKING:
    from actrone_pg.export import TransferReport

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``actrone-pg export``."""
    parser.description = (
        "Write an agent's memories (every version, with lineage and expiry; ids kept) and its "
        "live sessions (their turns) as JSON Lines after a versioned header, for `actrone-pg "
        "import` into any backend. Progress and a summary go to stderr. The format: "
        "docs/export.md."
    )
    parser.add_argument("--agent", required=True, help="the agent to export")
    parser.add_argument(
        "--out", help="file to write (replaced whole once complete; default: stdout)"
    )
    add_store_arguments(parser, backend_help="store to read")


def config_from(args: argparse.Namespace, **overrides: Any) -> MemoryConfig:
    """The store the options and the environment name; never the in-process one."""
    return store_config(
        args,
        memory_refusal="the memory backend lives inside one process, so a new one holds nothing "
        "to transfer; name the store: --backend postgres (with --dsn or the embedded server) "
        "or --backend redis_qdrant, or set ACTRONE_BACKEND",
        **overrides,
    )


def progress(message: str) -> None:
    """Progress of a long run, on stderr (stdout may be the export itself)."""
    print(f"actrone-pg: {message}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    """Export the agent; say what was written on stderr."""
    from actrone_pg.export import export_agent
    from actrone_pg.manager import create_memory_manager

    config = config_from(args, embedding_provider="hashing")  # an export embeds nothing

    async def export() -> TransferReport:
        async with create_memory_manager(config) as mm:
            await require_agent(mm, args.agent)  # a mistyped agent writes no empty export
            out = args.out if args.out else sys.stdout
            return await export_agent(mm, args.agent, out, progress=progress)

    r = asyncio.run(export())
    progress(
        f"exported agent {r.agent_id!r}: {r.memories} memories ({r.versions} versions), "
        f"{r.sessions} sessions, {r.turns} turns" + (f" to {args.out}" if args.out else "")
    )
    return 0
