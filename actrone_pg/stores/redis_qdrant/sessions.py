"""The Redis + Qdrant store's L1: sessions, their turns, and locks, each change one Lua script."""

from __future__ import annotations

import json
from typing import Any

from actrone_pg.models import SessionInfo, Turn
from actrone_pg.stores.redis_qdrant.connection import Connection
from actrone_pg.stores.redis_qdrant.layout import (
    TURN_IDS_KEPT,
    AgentKeys,
    dec,
    enc,
    micros_to_dt,
    ttl_ms,
    turn_from_json,
    turn_to_json,
)

__all__ = ["Sessions"]


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


class Sessions(Connection):
    """Turns and sessions in Redis (expired by Redis itself), and per-agent locks."""

    async def append_turn(self, turn: Turn, *, max_turns: int, ttl_seconds: float) -> None:
        """Append (idempotent by id), trim and refresh the expiry in one Lua script."""
        keys, member = AgentKeys.of(self._prefix, turn.agent_id).session_keys(turn.session_id)
        await self._script(
            "append",
            keys,
            [
                turn.id,
                turn_to_json(turn),
                max_turns,
                ttl_ms(ttl_seconds),
                member,
                max(TURN_IDS_KEPT, 4 * max_turns),
            ],
        )

    async def recent_turns(
        self, agent_id: str, session_id: str, *, limit: int, ttl_seconds: float
    ) -> list[Turn]:
        """The newest ``limit`` turns of a live session, oldest first."""
        keys, _ = AgentKeys.of(self._prefix, agent_id).session_keys(session_id)
        raw = await self._script("recent", [keys[0], keys[2]], [limit, ttl_ms(ttl_seconds)])
        return [turn_from_json(t) for t in raw]

    async def get_session(
        self, agent_id: str, session_id: str, *, ttl_seconds: float
    ) -> SessionInfo | None:
        """Turn count, creation and last activity (Redis's clock) and metadata of a live session."""
        keys, _ = AgentKeys.of(self._prefix, agent_id).session_keys(session_id)
        raw = await self._script("get_session", [keys[0], keys[2]], [ttl_ms(ttl_seconds)])
        if not raw:
            return None
        return _session_info(agent_id, session_id, raw[0], raw[1:])

    async def list_sessions(self, agent_id: str, *, ttl_seconds: float) -> list[SessionInfo]:
        """The agent's live sessions, from its keyset, by id in code-point order."""
        ak = AgentKeys.of(self._prefix, agent_id)
        raw = await self._script("list_sessions", [ak.keyset], [ak.base, ttl_ms(ttl_seconds)])
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
        self, agent_id: str, session_id: str, metadata: dict[str, Any], *, ttl_seconds: float
    ) -> None:
        """Merge ``metadata`` into the session (one hash field per key), creating it if needed."""
        keys, member = AgentKeys.of(self._prefix, agent_id).session_keys(session_id)
        args: list[Any] = [ttl_ms(ttl_seconds), member]
        for k, val in metadata.items():
            args.extend(["m:" + k, json.dumps(val, ensure_ascii=False)])
        await self._script("set_meta", keys, args)

    async def clear_session(self, agent_id: str, session_id: str) -> None:
        """Delete the session's turns, turn ids and bookkeeping."""
        keys, member = AgentKeys.of(self._prefix, agent_id).session_keys(session_id)
        await self._script("clear", keys, [member])

    async def sweep_expired_sessions(self, *, ttl_seconds: float, limit: int) -> int:
        """Nothing to do: every key of a session carries its TTL and Redis removes it."""
        return 0

    #: Redis removes an idle session by itself at its TTL, so no sweeper sees it first: the
    #: manager consolidates such a session shortly before its TTL instead (docs/lifecycle.md).
    sessions_expire_by_themselves = True

    async def expired_sessions(self, *, ttl_seconds: float, limit: int) -> list[tuple[str, str]]:
        """None: an expired session's keys are gone already (Redis removed them at their TTL)."""
        return []

    async def delete_expired_session(
        self, agent_id: str, session_id: str, *, ttl_seconds: float
    ) -> bool:
        """Nothing to delete: Redis removed the session's keys at their TTL."""
        return False

    async def acquire_lock(self, agent_id: str, name: str, holder: str, ttl_seconds: float) -> bool:
        """``SET NX PX``: one winner among concurrent callers; Redis expires it after the TTL."""
        ak = AgentKeys.of(self._prefix, agent_id)
        n = enc(name)
        got = await self._script(
            "acquire", [ak.lock(n), ak.keyset], [holder, ttl_ms(ttl_seconds), "l:" + n]
        )
        return bool(int(got))

    async def release_lock(self, agent_id: str, name: str, holder: str) -> bool:
        """Compare-and-delete: only the holder of a live lock can release it."""
        ak = AgentKeys.of(self._prefix, agent_id)
        n = enc(name)
        done = await self._script("release", [ak.lock(n), ak.keyset], [holder, "l:" + n])
        return bool(int(done))
