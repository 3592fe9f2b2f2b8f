"""The Redis + Qdrant store's L1: sessions, their turns, and locks, each change one Lua script.

Sessions expire as in every other store: idle longer than the TTL, a session reads as absent and
a new turn starts it afresh. Its keys stay in Redis for ``session_grace_seconds`` more, listed in
the prefix's sessions set by last activity, so that the manager's sweeper (of any process)
consolidates the expired session and then deletes it, as it does on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
import uuid
from typing import Any

from actrone_pg.errors import StoreError
from actrone_pg.models import SessionInfo, Turn
from actrone_pg.stores.base import WRITE_GENERATION, Fence, lock_lost
from actrone_pg.stores.redis_qdrant.connection import Servers
from actrone_pg.stores.redis_qdrant.layout import (
    LAYOUT,
    TURN_IDS_KEPT,
    AgentKeys,
    dec,
    enc,
    micros_to_dt,
    ttl_ms,
    turn_from_json,
    turn_to_json,
)

__all__ = [
    "ERASE_MARK_SECONDS",
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

#: How long an erase's mark keeps writers from starting a generation (it is removed when the erase
#: ends; this bounds the wait if the eraser dies half-way).
ERASE_MARK_SECONDS = 60.0
# How often a writer waiting for an erase asks Redis again.
_ERASE_POLL_SECONDS = 0.01


def _session_info(agent_id: str, session_id: str, turn_count: str, flat: list[str]) -> SessionInfo:
    """A session from its turn count and its hash (``c``, ``a``, ``n``, ``m:<key>`` fields)."""
    fields = dict(zip(flat[0::2], flat[1::2], strict=True))
    metadata = {k[2:]: json.loads(v) for k, v in fields.items() if k.startswith("m:")}
    return SessionInfo(
        agent_id=agent_id,
        session_id=session_id,
        turn_count=int(turn_count),
        created_at=micros_to_dt(fields["c"]),
        last_active_at=micros_to_dt(fields["a"]),
        metadata=metadata,
    )


def _session(sv: Servers, agent_id: str, session_id: str) -> tuple[list[str], str, str]:
    """The session's keys (turns, tids, sess, keyset, sessions set), its keyset member and
    its sessions-set member."""
    keys, member = AgentKeys.of(sv.prefix, agent_id).session_keys(session_id)
    return [*keys, sv.sessions_key], member, f"{enc(agent_id)}:{enc(session_id)}"


def _grace_ms(sv: Servers) -> int:
    return math.ceil(sv.session_grace_seconds * 1000.0)


async def append_turn(
    sv: Servers, turn: Turn, *, max_turns: int, ttl_seconds: float, fence: Fence | None = None
) -> None:
    """Append (idempotent by id), trim and refresh the expiry in one Lua script; with
    ``fence``, the same script checks the lock first."""
    keys, member, active = _session(sv, turn.agent_id, turn.session_id)
    args: list[Any] = [
        turn.id,
        turn_to_json(turn),
        max_turns,
        ttl_ms(ttl_seconds),
        member,
        max(TURN_IDS_KEPT, 4 * max_turns),
        _grace_ms(sv),
        active,
    ]
    if fence is None:
        await sv.script("append", keys, args)
        return
    lock = AgentKeys.of(sv.prefix, turn.agent_id).lock(enc(fence.name))
    if await sv.script("fenced_append", [*keys, lock], [*args, fence.holder]) is None:
        raise lock_lost(turn.agent_id, fence)


async def recent_turns(
    sv: Servers, agent_id: str, session_id: str, *, limit: int, ttl_seconds: float
) -> list[Turn]:
    """The newest ``limit`` turns of a live session, oldest first."""
    keys, _ = AgentKeys.of(sv.prefix, agent_id).session_keys(session_id)
    raw = await sv.script("recent", [keys[0], keys[2]], [limit, ttl_ms(ttl_seconds)])
    return [turn_from_json(t) for t in raw]


async def get_session(
    sv: Servers, agent_id: str, session_id: str, *, ttl_seconds: float
) -> SessionInfo | None:
    """Turn count, creation and last activity (Redis's clock) and metadata of a live session."""
    keys, _ = AgentKeys.of(sv.prefix, agent_id).session_keys(session_id)
    raw = await sv.script("get_session", [keys[0], keys[2]], [ttl_ms(ttl_seconds)])
    if not raw:
        return None
    return _session_info(agent_id, session_id, raw[0], raw[1:])


async def list_sessions(sv: Servers, agent_id: str, *, ttl_seconds: float) -> list[SessionInfo]:
    """The agent's live sessions, from its keyset, by id in code-point order."""
    ak = AgentKeys.of(sv.prefix, agent_id)
    raw = await sv.script("list_sessions", [ak.keyset], [ak.base, ttl_ms(ttl_seconds)])
    out = []
    at = 0
    while at < len(raw):
        name, count, size = raw[at], raw[at + 1], int(raw[at + 2])
        at += 3
        out.append(_session_info(agent_id, dec(name), count, raw[at : at + size]))
        at += size
    # The keyset orders by expiry and the encoded names differ in order from the ids.
    out.sort(key=lambda info: info.session_id)
    return out


async def set_session_metadata(
    sv: Servers,
    agent_id: str,
    session_id: str,
    metadata: dict[str, Any],
    *,
    ttl_seconds: float,
    fence: Fence | None = None,
) -> None:
    """Merge ``metadata`` into the session (one hash field per key), creating it if needed;
    with ``fence``, the same script checks the lock first."""
    keys, member, active = _session(sv, agent_id, session_id)
    args: list[Any] = [ttl_ms(ttl_seconds), member, _grace_ms(sv), active]
    if fence is not None:
        keys = [*keys, AgentKeys.of(sv.prefix, agent_id).lock(enc(fence.name))]
        args.append(fence.holder)
    for k, val in metadata.items():
        args.extend(["m:" + k, json.dumps(val, ensure_ascii=False)])
    if fence is None:
        await sv.script("set_meta", keys, args)
    elif await sv.script("fenced_set_meta", keys, args) is None:
        raise lock_lost(agent_id, fence)


async def clear_session(sv: Servers, agent_id: str, session_id: str) -> None:
    """Delete the session's turns, turn ids and bookkeeping."""
    keys, member, active = _session(sv, agent_id, session_id)
    await sv.script("clear", keys, [member, active])


async def sweep_expired_sessions(sv: Servers, *, ttl_seconds: float, limit: int) -> int:
    """Delete up to ``limit`` sessions idle longer than ``ttl_seconds`` (in their grace)."""
    removed = 0
    for agent_id, session_id in await expired_sessions(sv, ttl_seconds=ttl_seconds, limit=limit):
        if await delete_expired_session(sv, agent_id, session_id, ttl_seconds=ttl_seconds):
            removed += 1
    return removed


async def expired_sessions(sv: Servers, *, ttl_seconds: float, limit: int) -> list[tuple[str, str]]:
    """Up to ``limit`` sessions idle longer than ``ttl_seconds``, longest idle first, from
    the sessions set (no ``SCAN``); only those whose keys are still in their grace."""
    raw = await sv.script(
        "expired_sessions",
        [sv.sessions_key],
        [f"{sv.prefix}:{LAYOUT}:", ttl_ms(ttl_seconds), limit],
    )
    out = []
    for member in raw:
        agent, _, session = member.partition(":")
        out.append((dec(agent), dec(session)))
    return out


async def delete_expired_session(
    sv: Servers, agent_id: str, session_id: str, *, ttl_seconds: float
) -> bool:
    """Delete the session's keys if it is still idle longer than ``ttl_seconds``."""
    keys, member, active = _session(sv, agent_id, session_id)
    done = await sv.script("delete_expired", keys, [ttl_ms(ttl_seconds), member, active])
    return bool(int(done))


async def writer_fence(sv: Servers, agent_id: str) -> Fence:
    """The agent's write generation (created if it has none); while an erase of the agent is
    under way (its first pass marked the generation), wait for it to finish."""
    ak = AgentKeys.of(sv.prefix, agent_id)
    n = enc(WRITE_GENERATION)
    deadline = time.monotonic() + ERASE_MARK_SECONDS + 1.0
    while True:
        token = await sv.script(
            "writer_generation", [ak.lock(n), ak.keyset], [str(uuid.uuid4()), "l:" + n]
        )
        if token is not None:
            return Fence(WRITE_GENERATION, str(token))
        if time.monotonic() > deadline:
            raise StoreError(
                f"agent {agent_id!r} has been being erased for {ERASE_MARK_SECONDS:g} s; "
                "try again once the erase is done"
            )
        await asyncio.sleep(_ERASE_POLL_SECONDS)


async def acquire_lock(
    sv: Servers, agent_id: str, name: str, holder: str, ttl_seconds: float
) -> bool:
    """``SET NX PX``: one winner among concurrent callers; Redis expires it after the TTL."""
    ak = AgentKeys.of(sv.prefix, agent_id)
    n = enc(name)
    got = await sv.script(
        "acquire", [ak.lock(n), ak.keyset], [holder, ttl_ms(ttl_seconds), "l:" + n]
    )
    return bool(int(got))


async def release_lock(sv: Servers, agent_id: str, name: str, holder: str) -> bool:
    """Compare-and-delete: only the holder of a live lock can release it."""
    ak = AgentKeys.of(sv.prefix, agent_id)
    n = enc(name)
    done = await sv.script("release", [ak.lock(n), ak.keyset], [holder, "l:" + n])
    return bool(int(done))
