"""``actrone-pg memories list|history``: an agent's current memories, or one memory's versions.

Reads through the manager, so the listing is the one ``list_memories`` returns (newest first,
current versions, expired ones left out, the filters as options) on the store every command
defaults to (``actrone_pg._cli._store.default_backend``: the demo's, unless ``--backend``,
``--dsn`` or ``ACTRONE_*`` say otherwise). ``--json`` prints one JSON object instead of a table.
An unknown agent, or a memory the agent does not have, is an error (exit code 2), not an empty
table. Like ``sweep`` it refuses the ``memory`` backend (a new process would list a new, empty
store) and creates nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from rich.text import Text

from actrone_pg._cli._output import console, key_column, short_time, table, text_column
from actrone_pg._cli._store import add_store_arguments, require_agent, store_config
from actrone_pg.config import MemoryConfig
from actrone_pg.errors import MemoryNotFoundError, ValidationError
from actrone_pg.filters import FILTERS
from actrone_pg.models import Memory, memory_to_dict


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``actrone-pg memories``."""
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = sub.add_parser("list", help="an agent's current memories, newest first")
    history = sub.add_parser("history", help="every version of one memory, oldest first")
    for p in (listing, history):
        p.add_argument("--agent", required=True, help="the agent whose memories to read")
        add_store_arguments(p, backend_help="store to read")
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
                if not page.items and args.cursor is None:
                    await require_agent(mm, args.agent)  # a mistyped agent is not "no memories"
                return page.items, page.next_cursor
            versions = await mm.memory_history(args.agent, args.memory_id)
            if not versions:
                await require_agent(mm, args.agent)
                raise MemoryNotFoundError(
                    f"agent {args.agent!r} has no memory {args.memory_id!r} (never had, deleted "
                    f"or expired); `actrone-pg memories list --agent {args.agent}` lists its ids"
                )
            return versions, None
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
    # Two columns, so that the content keeps most of 80 columns: the memory (its id whole, then
    # its version, type, importance, tags and times, one short line each) and its content.
    out = console(highlight=False)
    if args.action == "list":
        t = table(f"memories of {args.agent} (newest first)", leading=1)
        key_column(t, "memory")
    else:
        t = table(f"versions of {args.memory_id} (oldest first)", leading=1)
        key_column(t, "version")
    text_column(t, "content")
    for m in items:
        facts = [f"v{m.version} · {m.content_type} · {m.importance:g}"]
        if args.action == "list":
            facts.insert(0, m.id)
            facts.append(f"created {short_time(m.created_at)}")
        else:
            facts.append(f"from {short_time(m.valid_from)}")
            if m.valid_to:
                facts.append(f"to   {short_time(m.valid_to)}")
        if m.tags:
            facts.append("tags " + ", ".join(m.tags))
        if m.expires_at:
            facts.append(f"expires {short_time(m.expires_at)}")
        t.add_row(Text("\n").join(Text(f) for f in facts), m.content)
    out.print(t)
    if cursor:
        out.print(f"next page: --cursor {cursor}")
    elif not items:
        out.print("no memories")
