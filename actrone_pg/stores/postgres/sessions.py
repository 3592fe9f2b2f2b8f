"""The PostgreSQL store's L1: sessions, their turns, and locks."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from actrone_pg.errors import MissingDependencyError
from actrone_pg.models import SessionInfo, Turn
from actrone_pg.stores.base import WRITE_GENERATION, Fence
from actrone_pg.stores.postgres import lookups, rows
from actrone_pg.stores.postgres.connection import Database, _Conn, jsonb
from actrone_pg.stores.postgres.statements import (
    ACQUIRE_LOCK,
    DELETE_EXPIRED_SESSION,
    DELETE_SESSION,
    EXPIRED_SESSION_IDS,
    INSERT_GENERATION,
    INSERT_TURN,
    LOCK_AGENT_STATS,
    RELEASE_LOCK,
    SELECT_EXPIRED_SESSIONS,
    SELECT_GENERATION,
    SELECT_RECENT_TURNS,
    SELECT_SESSION,
    SELECT_SESSIONS,
    SERVER_CLOCK,
    SWEEP_SESSIONS,
    TRIM_TURNS,
    UPSERT_SESSION,
)

try:
    from psycopg.types.json import Jsonb
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("postgres", exc.name or "psycopg") from None

__all__ = [
    "acquire_lock",
    "append_turn",
    "clear_session",
    "delete_expired_session",
    "expired_sessions",
    "get_session",
    "list_sessions",
    "recent_turns",
    "release_lock",
    "set_session_metadata",
    "sweep_expired_sessions",
    "writer_fence",
]


async def append_turn(
    db: Database, turn: Turn, *, max_turns: int, ttl_seconds: float, fence: Fence | None = None
) -> None:
    """Append a turn (idempotent by id), trim to ``max_turns``, refresh the expiry.

    With ``fence``, under the agent's statistics row, as :func:`set_session_metadata`.
    """
    a, s = turn.agent_id, turn.session_id
    tool = jsonb(turn.tool_results) if turn.tool_results is not None else None
    async with db.conn() as conn, conn.transaction():
        if fence is not None:
            await conn.execute(db.compose(LOCK_AGENT_STATS), (a,))
            await lookups.check_fence(db, conn, a, fence)
        await conn.execute(db.compose(DELETE_EXPIRED_SESSION), (a, s, ttl_seconds))
        await conn.execute(db.compose(UPSERT_SESSION), (a, s, Jsonb({})))
        await conn.execute(
            db.compose(INSERT_TURN),
            {
                "agent": a,
                "session": s,
                "id": turn.id,
                "user_message": turn.user_message,
                "assistant_message": turn.assistant_message,
                "tool_results": tool,
                "created_at": turn.created_at,
                "token_count": turn.token_count,
            },
        )
        await conn.execute(db.compose(TRIM_TURNS), {"agent": a, "session": s, "keep": max_turns})


async def recent_turns(
    db: Database, agent_id: str, session_id: str, *, limit: int, ttl_seconds: float
) -> list[Turn]:
    """The newest ``limit`` turns of a live session, oldest first."""
    async with db.conn() as conn:
        found = await db.fetch(
            conn,
            db.compose(SELECT_RECENT_TURNS),
            {"agent": agent_id, "session": session_id, "ttl": ttl_seconds, "limit": limit},
        )
    return rows.turns(agent_id, session_id, found)


async def get_session(
    db: Database, agent_id: str, session_id: str, *, ttl_seconds: float
) -> SessionInfo | None:
    """The live session's bookkeeping, or ``None``."""
    async with db.conn() as conn:
        found = await db.fetch(
            conn, db.compose(SELECT_SESSION), (agent_id, session_id, ttl_seconds)
        )
    return rows.session(agent_id, session_id, found[0]) if found else None


async def list_sessions(db: Database, agent_id: str, *, ttl_seconds: float) -> list[SessionInfo]:
    """The agent's live sessions, by id in code-point order."""
    async with db.conn() as conn:
        found = await db.fetch(conn, db.compose(SELECT_SESSIONS), (agent_id, ttl_seconds))
    return [rows.session(agent_id, r["session_id"], r) for r in found]


async def set_session_metadata(
    db: Database,
    agent_id: str,
    session_id: str,
    metadata: dict[str, Any],
    *,
    ttl_seconds: float,
    fence: Fence | None = None,
) -> None:
    """Merge ``metadata`` into the session's (creating or restarting the session).

    With ``fence``, under the agent's statistics row, as the fenced memory writes: an
    erase_agent (which takes it first) then either finds the session written or makes
    the check fail, and never lets it be recreated after its delete.
    """
    async with db.conn() as conn, conn.transaction():
        if fence is not None:
            await conn.execute(db.compose(LOCK_AGENT_STATS), (agent_id,))
            await lookups.check_fence(db, conn, agent_id, fence)
        await conn.execute(db.compose(DELETE_EXPIRED_SESSION), (agent_id, session_id, ttl_seconds))
        await conn.execute(db.compose(UPSERT_SESSION), (agent_id, session_id, jsonb(metadata)))


async def clear_session(db: Database, agent_id: str, session_id: str) -> None:
    """Remove the session and (by cascade) its turns."""
    async with db.conn() as conn:
        await conn.execute(db.compose(DELETE_SESSION), (agent_id, session_id))


async def sweep_expired_sessions(db: Database, *, ttl_seconds: float, limit: int) -> int:
    """Delete up to ``limit`` expired sessions; their turns go by cascade."""
    if db.distributed or db.settings.row_security:
        # Citus refuses LIMIT ... FOR UPDATE SKIP LOCKED across shards: the expired sessions
        # are found across shards, then each deleted by its own single-shard statement,
        # re-checked under its row lock (a session a writer revived meanwhile is kept). Under
        # row-level security the same, each deleted under its agent's setting.
        removed = 0
        for agent_id, session_id in await expired_sessions(
            db, ttl_seconds=ttl_seconds, limit=limit
        ):
            with db.serving(agent_id):
                removed += await delete_expired_session(
                    db, agent_id, session_id, ttl_seconds=ttl_seconds
                )
        return removed
    async with db.conn() as conn:
        cur = await conn.execute(db.compose(SWEEP_SESSIONS), (ttl_seconds, limit))
        return max(cur.rowcount, 0)


async def expired_sessions(
    db: Database, *, ttl_seconds: float, limit: int
) -> list[tuple[str, str]]:
    """Up to ``limit`` sessions idle longer than ``ttl_seconds`` (under row-level security,
    listed by the schema's SECURITY DEFINER function, of every agent)."""
    listing = EXPIRED_SESSION_IDS if db.settings.row_security else SELECT_EXPIRED_SESSIONS
    async with db.conn() as conn:
        found = await db.fetch(conn, db.compose(listing), (ttl_seconds, limit))
    return [(r["agent_id"], r["session_id"]) for r in found]


async def delete_expired_session(
    db: Database, agent_id: str, session_id: str, *, ttl_seconds: float
) -> bool:
    """Delete the session (its turns by cascade) if it is still idle past the TTL."""
    async with db.conn() as conn:
        cur = await conn.execute(
            db.compose(DELETE_EXPIRED_SESSION), (agent_id, session_id, ttl_seconds)
        )
        return cur.rowcount > 0


async def writer_fence(db: Database, agent_id: str) -> Fence:
    """The agent's write generation: read, or created if absent (then read again: a
    concurrent writer's row may have won). Creating it waits for an erase under way."""
    async with db.conn() as conn:
        while True:
            found = await db.fetch(
                conn, db.compose(SELECT_GENERATION), (agent_id, WRITE_GENERATION)
            )
            if found:
                return Fence(WRITE_GENERATION, str(found[0]["holder"]))
            await conn.execute(
                db.compose(INSERT_GENERATION), (agent_id, WRITE_GENERATION, str(uuid.uuid4()))
            )


async def acquire_lock(
    db: Database, agent_id: str, name: str, holder: str, ttl_seconds: float
) -> bool:
    """Take the lock in one atomic statement, timed by the server's clock."""
    async with db.conn() as conn:
        now = await _server_now(db, conn)
        cur = await conn.execute(
            db.compose(ACQUIRE_LOCK),
            {"agent": agent_id, "name": name, "holder": holder, "now": now, "ttl": ttl_seconds},
        )
        return await cur.fetchone() is not None


async def release_lock(db: Database, agent_id: str, name: str, holder: str) -> bool:
    """Release the lock if ``holder`` holds a live one."""
    async with db.conn() as conn:
        now = await _server_now(db, conn)
        cur = await conn.execute(
            db.compose(RELEASE_LOCK),
            {"agent": agent_id, "name": name, "holder": holder, "now": now},
        )
        return await cur.fetchone() is not None


async def _server_now(db: Database, conn: _Conn) -> datetime:
    """The clock of the server the store talks to (on Citus, the coordinator's)."""
    cur = await conn.execute(SERVER_CLOCK)
    row = await cur.fetchone()
    assert row is not None
    value: datetime = row[0]
    return value
