"""``actrone-pg sweep``: remove expired sessions and their turns, and expired memories (a job
for cron or a timer).

An expired session already reads as empty; this gives its storage back. It uses the configured
backend (``ACTRONE_BACKEND`` and the other ``ACTRONE_*`` settings, or the options below) and the
configured ``session_ttl_hours``, and deletes in batches until nothing expired is left.

The backend is the one every command defaults to (``actrone_pg._cli._store.default_backend``:
the embedded PostgreSQL unless configured otherwise). It refuses the ``memory`` backend: that
store lives in one process, so a sweep from cron would sweep a new, empty one and report
success. It creates nothing: no embedded cluster in a directory without one, no schema, no
migration.

With a consolidator (``ACTRONE_CONSOLIDATOR``, default ``extractive``) each expired session's
pending turns become long-term memories before the session is deleted, through a
``MemoryManager`` (which builds the configured embedder); a session whose consolidation fails is
kept for the next run. ``--no-consolidate`` deletes without reading.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from actrone_pg._cli._store import add_store_arguments, store_config
from actrone_pg.errors import ValidationError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``actrone-pg sweep``."""
    add_store_arguments(parser, backend_help="store to sweep")
    parser.add_argument(
        "--ttl-hours",
        type=float,
        help="idle time after which a session is expired (default: ACTRONE_SESSION_TTL_HOURS)",
    )
    parser.add_argument(
        "--no-consolidate",
        action="store_true",
        help="delete expired sessions without consolidating them first",
    )
    parser.add_argument(
        "--batch", type=int, default=10_000, help="sessions deleted per statement (default 10,000)"
    )


def run(args: argparse.Namespace) -> int:
    """Sweep in batches; print how many sessions were removed."""
    from actrone_pg.stores import create_store

    if args.batch < 1:
        raise ValidationError("--batch must be at least 1")
    overrides: dict[str, Any] = {}
    if args.ttl_hours is not None:
        overrides["session_ttl_hours"] = args.ttl_hours
    if args.no_consolidate:
        overrides["consolidator"] = "none"
    config = store_config(
        args,
        memory_refusal="the memory backend keeps sessions inside one process, so there is "
        "nothing to sweep; name the store that holds them: --backend postgres (with --dsn or "
        "the embedded server) or --backend redis_qdrant, or set ACTRONE_BACKEND",
        **overrides,
    )

    async def sweep() -> tuple[int, int]:
        from actrone_pg.manager import MemoryManager

        store = create_store(config)
        removed = memories = 0
        try:
            # The manager consolidates each expired session first (unless consolidator="none").
            mm = await MemoryManager.create(config, store=store)
            try:
                while True:
                    n = await mm.sweep_expired_sessions(limit=args.batch)
                    removed += n
                    # Fewer than a batch: nothing expired is left, or what is left was kept
                    # because its consolidation failed (the next run tries it again).
                    if n < args.batch:
                        break
            finally:
                await mm.close()
            # Memories past their expires_at (spec §9.4), statistics kept exact by the store.
            while True:
                n = await store.sweep_expired_memories(limit=args.batch)
                memories += n
                if n < args.batch:
                    return removed, memories
        finally:
            await store.close()

    removed, memories = asyncio.run(sweep())
    print(f"removed {removed:,} expired session(s) from the {config.backend} store")
    print(f"removed {memories:,} expired memory(ies) from the {config.backend} store")
    return 0
