"""``actrone-pg memories list|history``: an agent's current memories, or one memory's versions.

Reads through the manager, so the listing is the one ``list_memories`` returns (newest first,
current versions, expired ones left out, the filters of spec §9.3 as options) on whichever
backend is configured (``ACTRONE_BACKEND`` and the other ``ACTRONE_*`` settings, or the options
below). ``--json`` prints one JSON object instead of a table. Like ``sweep`` it refuses the
``memory`` backend (a new process would list a new, empty store) and creates nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from actrone_pg._cli._store import add_store_arguments, store_config
from actrone_pg.config import MemoryConfig
from actrone_pg.errors import ValidationError
from actrone_pg.filters import FILTERS
from actrone_pg.models import Memory, memory_to_dict


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``actrone-pg memories``."""
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = sub.add_parser("list", help="an agent's current memories, newest first")
    history = sub.add_parser("history", help="every version of one memory, oldest first")
    for p in (listing, history):
        p.add_argument("--agent", required=True, help="the agent whose memories to read")
        add_store_arguments(
            p, backend_help="store to read (default: postgres with --dsn, else ACTRONE_BACKEND)"
        )
        p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    history.add_argument("memory_id", help="the memory's id")
    listing.add_argument("--limit", type=int, default=20, help="memories per page (default 20)")
    listing.add_argument("--cursor", help="next_cursor of the previous page")
    # One option per filter key that has one (actrone_pg.filters).
    for key in FILTERS.values():
        if key.cli is not None:
            action = "append" if key.cli.repeat else "store"
            listing.add_argument(key.cli.flag, action=action, dest=key.name, help=key.cli.help)


def filters_of(args: argparse.Namespace) -> dict[str, Any] | None:
    """The ``filters`` mapping the options name (validated by the manager)."""
    out: dict[str, Any] = {}
    for key in FILTERS.values():
        value = getattr(args, key.name, None)
        if key.cli is None or value is None:
            continue
        convert = key.cli.convert
        try:
            out[key.name] = [convert(v) for v in value] if key.cli.repeat else convert(value)
        except ValueError as exc:
            raise ValidationError(f"{key.cli.flag}: {exc}") from None
    return out or None


def _config(args: argparse.Namespace) -> MemoryConfig:
    overrides: dict[str, Any] = {"embedding_provider": "hashing"}  # reading embeds nothing
    if args.dsn and not args.backend:
        overrides["backend"] = "postgres"  # a DSN names a PostgreSQL store
    return store_config(
        args,
        memory_refusal="the memory backend lives inside one process, so a new one holds nothing "
        "to list; name the store: --backend postgres (with --dsn or the embedded server) or "
        "--backend redis_qdrant, or set ACTRONE_BACKEND",
        **overrides,
    )


def run(args: argparse.Namespace) -> int:
    """List or show the history, as a table or JSON."""
    from actrone_pg.manager import MemoryManager

    config = _config(args)
    flt = filters_of(args) if args.action == "list" else None

    async def read() -> tuple[list[Memory], str | None]:
        mm = await MemoryManager.create(config)
        try:
            if args.action == "list":
                page = await mm.list_memories(
                    args.agent, filters=flt, limit=args.limit, cursor=args.cursor
                )
                return page.items, page.next_cursor
            return await mm.memory_history(args.agent, args.memory_id), None
        finally:
            await mm.close()

    items, cursor = asyncio.run(read())
    if args.json:
        key = "items" if args.action == "list" else "versions"
        out: dict[str, Any] = {key: [memory_to_dict(m) for m in items]}
        if args.action == "list":
            out["next_cursor"] = cursor
        print(json.dumps(out, ensure_ascii=False, indent=2))
        return 0
    _table(args, items, cursor)
    return 0


def _table(args: argparse.Namespace, items: list[Memory], cursor: str | None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if args.action == "list":
        table = Table(title=f"memories of {args.agent} (newest first)")
        columns = ["id", "created_at", "v", "type", "importance", "tags", "expires_at", "content"]
    else:
        table = Table(title=f"versions of {args.memory_id} (oldest first)")
        columns = ["v", "valid_from", "valid_to", "type", "importance", "tags", "content"]
    for column in columns:
        table.add_column(column, overflow="fold")
    for m in items:
        cells = {
            "id": m.id,
            "created_at": m.created_at.isoformat(timespec="seconds"),
            "v": str(m.version),
            "type": m.content_type,
            "importance": f"{m.importance:g}",
            "tags": ", ".join(m.tags),
            "expires_at": m.expires_at.isoformat(timespec="seconds") if m.expires_at else "",
            "valid_from": m.valid_from.isoformat(timespec="seconds") if m.valid_from else "",
            "valid_to": m.valid_to.isoformat(timespec="seconds") if m.valid_to else "",
            "content": m.content,
        }
        table.add_row(*(cells[c] for c in columns))
    console.print(table)
    if cursor:
        console.print(f"next page: --cursor {cursor}")
    elif not items:
        console.print("no memories")
