"""``actrone-pg consolidate``: turn sessions' pending turns into long-term memories now.

The same as ``MemoryManager.consolidate_session`` (spec §9.1) for each ``--session``, or, without
``--session``, for every live session of the agent that has turns not yet consolidated
(``MemoryManager.list_sessions``): the configured consolidator (``ACTRONE_CONSOLIDATOR``, or
``--consolidator``) writes memories with their lineage, the session remembers which turns are
done, and running it again writes nothing new. A session that fails (its agent's maintenance lock
is held, the consolidator fails) is reported, the others go on, and the exit code is 1. It uses
the configured backend (``ACTRONE_*`` settings or the options below) and refuses the ``memory``
backend, whose sessions live inside one process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from actrone_pg._cli._store import add_store_arguments, require_agent, store_config
from actrone_pg.config import CONSOLIDATORS, MemoryConfig
from actrone_pg.errors import ConfigurationError, ValidationError

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``actrone-pg consolidate``."""
    parser.add_argument("--agent", required=True, help="the agent whose sessions to consolidate")
    parser.add_argument(
        "--session",
        action="append",
        help="a session to consolidate; repeat for more (default: every live session of the "
        "agent with turns not yet consolidated)",
    )
    add_store_arguments(parser, backend_help="store")
    parser.add_argument(
        "--consolidator",
        choices=[c for c in CONSOLIDATORS if c != "none"],
        help="default: ACTRONE_CONSOLIDATOR (extractive)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the sessions consolidated and the memories written as JSON",
    )


def config_from(args: argparse.Namespace) -> MemoryConfig:
    """The configuration the options and the environment give; never the memory backend."""
    overrides: dict[str, Any] = {}
    if args.consolidator:
        overrides["consolidator"] = args.consolidator
    config = store_config(
        args,
        memory_refusal="the memory backend keeps sessions inside one process, so a command has "
        "none to consolidate; name the store: --backend postgres or --backend redis_qdrant, "
        "or set ACTRONE_BACKEND",
        **overrides,
    )
    if config.consolidator == "none":
        raise ConfigurationError(
            "consolidator", "is 'none'; pass --consolidator extractive (or llm with its settings)"
        )
    return config


def run(args: argparse.Namespace) -> int:
    """Consolidate each session; print the sessions done and the memories written."""
    from actrone_pg._cli._output import console, key_column, table, text_column
    from actrone_pg.consolidation import run as consolidation
    from actrone_pg.errors import ConsolidationError
    from actrone_pg.manager import create_memory_manager
    from actrone_pg.models import memory_to_dict

    config = config_from(args)
    progress = console(stderr=True, highlight=False)
    sessions: list[dict[str, Any]] = []
    written: list[dict[str, Any]] = []

    async def consolidate() -> None:
        async with create_memory_manager(config) as mm:
            await require_agent(mm, args.agent)
            if args.session:
                todo = list(dict.fromkeys(args.session))
                for session in todo:
                    if await mm.get_session(args.agent, session) is None:
                        raise ValidationError(
                            f"agent {args.agent!r} has no live session {session!r}; "
                            f"`actrone-pg inspect --agent {args.agent}` lists its sessions"
                        )
            else:
                todo = []
                for info in await mm.list_sessions(args.agent):
                    turns = await mm.get_recent_turns(
                        args.agent, info.session_id, limit=max(info.turn_count, 1)
                    )
                    if consolidation.pending_turns(turns, info.metadata.get(consolidation.MARKER)):
                        todo.append(info.session_id)
                if not args.json:
                    progress.print(f"{len(todo)} session(s) of agent {args.agent!r} to consolidate")
            for n, session in enumerate(todo, 1):
                done: dict[str, Any] = {"session": session, "memories": 0, "error": None}
                try:
                    ids = await mm.consolidate_session(args.agent, session)
                except ConsolidationError as exc:
                    done["error"] = str(exc)
                    ids = []
                for memory_id in ids:
                    memory = await mm.get_memory(args.agent, memory_id)
                    if memory is not None:
                        written.append({"session": session, **memory_to_dict(memory)})
                done["memories"] = len(ids)
                sessions.append(done)
                if len(todo) > 1 and not args.json:
                    what = f"failed: {done['error']}" if done["error"] else f"{len(ids)} memories"
                    progress.print(f"[{n}/{len(todo)}] {session}: {what}")

    asyncio.run(consolidate())
    failed = [s for s in sessions if s["error"]]
    if args.json:
        print(
            json.dumps(
                {"agent_id": args.agent, "sessions": sessions, "memories": written}, indent=2
            )
        )
        return 1 if failed else 0
    out = console(highlight=False)
    t = table(f"memories written for agent {args.agent!r}", leading=1)
    key_column(t, "memory")
    text_column(t, "content")
    for m in written:
        turns = m["source_turn_ids"]
        shown = ", ".join(turns[:3]) + (f" (+{len(turns) - 3})" if len(turns) > 3 else "")
        facts = [m["id"], f"{m['content_type']} · {m['importance']:.2f}", f"session {m['session']}"]
        if shown:
            facts.append(f"from {shown}")
        t.add_row("\n".join(facts), m["content"])
    out.print(t)
    summary = table("sessions")
    key_column(summary, "session")
    text_column(summary, "memories written")
    for done in sessions:
        summary.add_row(
            done["session"], f"failed: {done['error']}" if done["error"] else str(done["memories"])
        )
    if sessions:
        out.print(summary)
    out.print(
        f"{len(sessions) - len(failed)} session(s) consolidated, {len(written)} "
        f"memor{'y' if len(written) == 1 else 'ies'} written"
        + (f", {len(failed)} session(s) failed (run again later)" if failed else "")
    )
    return 1 if failed else 0
