"""The manager's L1: a session's turns and bookkeeping, and the sweep of expired sessions."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from actrone_pg import _validation as v
from actrone_pg._manager.consolidating import Consolidation
from actrone_pg._manager.context import ManagerContext, utc_now
from actrone_pg.errors import ActroneError, ValidationError
from actrone_pg.models import SessionInfo, Turn

__all__ = ["SessionTurns"]

logger = logging.getLogger("actrone_pg.manager")


class SessionTurns:
    """Store and read a session's turns; a stored turn may start a consolidation."""

    def __init__(self, ctx: ManagerContext, consolidation: Consolidation) -> None:
        self.ctx = ctx
        self._consolidation = consolidation

    async def store_turn(
        self,
        agent_id: str,
        session_id: str,
        user_message: str,
        assistant_message: str,
        *,
        tool_results: Sequence[Any] | None = None,
        turn_id: str | None = None,
    ) -> Turn:
        """What :meth:`actrone_pg.MemoryManager.store_turn` does (documented there)."""
        limit = self.ctx.config.max_text_chars
        v.check_id("agent_id", agent_id)
        v.check_id("session_id", session_id)
        v.check_text("user_message", user_message, limit, allow_empty=True)
        v.check_text("assistant_message", assistant_message, limit, allow_empty=True)
        if not user_message.strip() and not assistant_message.strip():
            raise ValidationError("a turn needs a user_message or an assistant_message")
        results = None
        if tool_results is not None:
            if isinstance(tool_results, (str, bytes)) or not isinstance(tool_results, Iterable):
                raise ValidationError("tool_results must be a list of JSON-serialisable values")
            results = v.check_json("tool_results", list(tool_results), max_chars=limit)
        if turn_id is None:
            turn_id = str(uuid.uuid4())
        else:
            v.check_id("turn_id", turn_id)
        turn = Turn(
            id=turn_id,
            agent_id=agent_id,
            session_id=session_id,
            user_message=user_message,
            assistant_message=assistant_message,
            tool_results=results,
            created_at=utc_now(),
            token_count=self.ctx.count_turn(user_message, assistant_message, results),
        )
        if self.ctx.consolidator is not None:
            await self._consolidation.consolidate_before_restart(agent_id, session_id)
        await self.ctx.store.append_turn(
            turn,
            max_turns=self.ctx.config.max_session_turns,
            ttl_seconds=self.ctx.config.session_ttl_seconds,
        )
        self._consolidation.mark_live(agent_id, session_id)
        self._consolidation.note_turn(agent_id, session_id)
        return turn

    async def get_recent_turns(
        self, agent_id: str, session_id: str, limit: int | None = None
    ) -> list[Turn]:
        """The session's newest turns (at most ``max_session_turns``), oldest first."""
        v.check_id("agent_id", agent_id)
        v.check_id("session_id", session_id)
        n = self.ctx.config.max_session_turns if limit is None else v.check_limit("limit", limit)
        return await self.ctx.store.recent_turns(
            agent_id, session_id, limit=n, ttl_seconds=self.ctx.config.session_ttl_seconds
        )

    async def get_session(self, agent_id: str, session_id: str) -> SessionInfo | None:
        """The session's bookkeeping, or ``None`` if it does not exist or has expired."""
        v.check_id("agent_id", agent_id)
        v.check_id("session_id", session_id)
        return await self.ctx.store.get_session(
            agent_id, session_id, ttl_seconds=self.ctx.config.session_ttl_seconds
        )

    async def list_sessions(self, agent_id: str) -> list[SessionInfo]:
        """What :meth:`actrone_pg.MemoryManager.list_sessions` does (documented there)."""
        v.check_id("agent_id", agent_id)
        return await self.ctx.store.list_sessions(
            agent_id, ttl_seconds=self.ctx.config.session_ttl_seconds
        )

    async def set_session_metadata(
        self, agent_id: str, session_id: str, metadata: Mapping[str, Any]
    ) -> None:
        """Merge ``metadata`` (a JSON object) into the session's metadata."""
        v.check_id("agent_id", agent_id)
        v.check_id("session_id", session_id)
        data = v.check_metadata(metadata, max_chars=self.ctx.config.max_text_chars)
        await self.ctx.store.set_session_metadata(
            agent_id, session_id, data, ttl_seconds=self.ctx.config.session_ttl_seconds
        )

    async def clear_session(self, agent_id: str, session_id: str) -> None:
        """Forget the session's turns (its memories stay)."""
        v.check_id("agent_id", agent_id)
        v.check_id("session_id", session_id)
        await self.ctx.store.clear_session(agent_id, session_id)
        self._consolidation.forget_session(agent_id, session_id)

    async def sweep_expired_sessions(self, limit: int = 10_000) -> int:
        """What :meth:`actrone_pg.MemoryManager.sweep_expired_sessions` does (documented there)."""
        v.check_limit("limit", limit)
        ttl = self.ctx.config.session_ttl_seconds
        if self.ctx.consolidator is None:
            return await self.ctx.store.sweep_expired_sessions(ttl_seconds=ttl, limit=limit)
        removed = 0
        for agent_id, session_id in await self.ctx.store.expired_sessions(
            ttl_seconds=ttl, limit=limit
        ):
            try:
                await self._consolidation.consolidate_locked(agent_id, session_id, expired=True)
            except ActroneError as exc:
                logger.warning(
                    "kept expired session %r of agent %r: consolidating it failed (%s); "
                    "the next sweep tries again",
                    session_id,
                    agent_id,
                    exc,
                )
                continue
            if await self.ctx.store.delete_expired_session(agent_id, session_id, ttl_seconds=ttl):
                self._consolidation.forget_session(agent_id, session_id)
                removed += 1
        return removed
