"""The manager's consolidation schedule (spec §9.1): sessions' turns become memories, under a lock.

Consolidation runs when asked (:meth:`Consolidation.consolidate_session`), in the background after
``consolidate_after_turns`` turns, before a turn restarts an expired session, and when the
sweeper removes one; the work itself is :mod:`actrone_pg.consolidation.run`'s, which reads and
writes memories through a :class:`~actrone_pg.consolidation.run.MemoryAccess` (the manager).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid

from actrone_pg import _validation as v
from actrone_pg._manager.context import ManagerContext, utc_now, write_fence
from actrone_pg.consolidation import run as consolidation
from actrone_pg.errors import ActroneError, ConfigurationError, ConsolidationError, LockLostError
from actrone_pg.stores.base import FENCED_LOCK, Fence

__all__ = ["Consolidation"]

logger = logging.getLogger("actrone_pg.manager")

# Consolidation holds the agent's maintenance lock (spec §8) this long at most, and writes only
# while it holds it: a run that takes longer (a slow chat model) writes nothing and is retried.
_CONSOLIDATION_LOCK_SECONDS = 600.0
# After a failed or lock-blocked background consolidation, wait this long before trying again.
_CONSOLIDATION_RETRY_SECONDS = 30.0
# close() lets running background consolidations finish this long, then cancels them.
_CLOSE_GRACE_SECONDS = 10.0
# An expired session is read as if its TTL were this long, so the sweeper can consolidate it.
_READ_EXPIRED_TTL = 100 * 365 * 24 * 3600.0
# store_turn trusts that a session it wrote to is still live for its TTL less this margin (a
# share of the TTL, at most a minute): the store's clock decides expiry, not this process's.
_LIVE_MARGIN_SHARE = 0.1
_LIVE_MARGIN_MAX_SECONDS = 60.0
# The per-session bookkeeping is pruned of sessions idle past their TTL (expired here, swept or
# consolidated elsewhere) once it holds this many, then each time it has doubled since: it holds
# the sessions live in this process, never all it has seen, at an amortised constant cost.
_PRUNE_AT_LEAST = 1024


class Consolidation:
    """Consolidate sessions into memories: on request, in the background, and the agents' locks.

    A consolidator searches the agent's memories and its proposals are written through
    ``memories`` (the manager's public ``search_memories``, ``inject_memories`` and
    ``update_memory``, each guarded and traced as a caller's call is).
    """

    def __init__(self, ctx: ManagerContext, memories: consolidation.MemoryAccess) -> None:
        self.ctx = ctx
        self._memories = memories
        # Background consolidation: turns stored through this manager since the session was
        # last consolidated, the running task of each session, and when to look again.
        self._new_turns: dict[tuple[str, str], int] = {}
        self._consolidating: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._not_before: dict[tuple[str, str], float] = {}
        # (agent, session) -> monotonic time until which this process knows the session is live
        # (it wrote a turn less than a TTL before): store_turn then skips the expiry check.
        # Every session of _new_turns and _not_before has an entry here (mark_live comes first).
        self._live_until: dict[tuple[str, str], float] = {}
        # The size of _live_until at which it is pruned next (see _PRUNE_AT_LEAST).
        self._prune_at = _PRUNE_AT_LEAST
        # Set by close(): no new background consolidation starts.
        self._closed = False

    async def consolidate_session(self, agent_id: str, session_id: str) -> list[str]:
        """Turn the session's turns not yet consolidated into long-term memories (spec §9.1).

        Returns the ids of the memories written or updated (``[]`` if there was nothing worth
        keeping or nothing new). Each memory records its ``source_turn_ids`` and
        ``source="consolidated"``; running it again over the same turns writes no duplicate.
        It holds the agent's maintenance lock: if another process holds it, or the consolidator
        fails, this raises :class:`~actrone_pg.errors.ConsolidationError`, nothing is lost and
        the turns stay pending.
        """
        v.check_id("agent_id", agent_id)
        v.check_id("session_id", session_id)
        if self.ctx.consolidator is None:
            raise ConfigurationError(
                "consolidator", "is 'none': set 'extractive' or 'llm' to consolidate sessions"
            )
        ids = await self.consolidate_locked(agent_id, session_id, expired=False)
        self._new_turns.pop((agent_id, session_id), None)
        return ids

    async def try_lock(
        self, agent_id: str, name: str = FENCED_LOCK, *, ttl_seconds: float = 60.0
    ) -> str | None:
        """What :meth:`actrone_pg.MemoryManager.try_lock` does (documented there)."""
        v.check_id("agent_id", agent_id)
        v.check_id("name", name)
        ttl = v.check_ttl("ttl_seconds", ttl_seconds)
        token = str(uuid.uuid4())
        ok = await self.ctx.store.acquire_lock(agent_id, name, token, ttl)
        return token if ok else None

    async def release_lock(self, agent_id: str, token: str, name: str = FENCED_LOCK) -> bool:
        """Release a lock taken by :meth:`try_lock`; ``False`` if it had lapsed or was not yours."""
        v.check_id("agent_id", agent_id)
        v.check_id("token", token)
        v.check_id("name", name)
        return await self.ctx.store.release_lock(agent_id, name, token)

    async def consolidate_locked(
        self, agent_id: str, session_id: str, *, expired: bool, min_turns: int = 1
    ) -> list[str]:
        """Consolidate the session's pending turns under the agent's maintenance lock.

        ``expired``: the session is past its TTL and the sweeper deletes it next: it is read
        whatever its age and its marker is not written. Fewer than ``min_turns`` pending turns:
        nothing.
        """
        assert self.ctx.consolidator is not None
        token = str(uuid.uuid4())
        if not await self.ctx.store.acquire_lock(
            agent_id, FENCED_LOCK, token, _CONSOLIDATION_LOCK_SECONDS
        ):
            raise ConsolidationError(
                f"agent {agent_id!r} is being consolidated or maintained by another process "
                "(its maintenance lock is held); try again later"
            )
        # Every write of the run is fenced by the lock (its memories through the contextvar
        # that inject_memories and update_memory read, its marker here): once erase_agent has
        # deleted the lock, here or in another process, the store refuses them.
        fence = Fence(FENCED_LOCK, token)
        reset = write_fence.set(fence)
        try:
            return await self._consolidate_fenced(agent_id, session_id, fence, expired, min_turns)
        except LockLostError as exc:
            raise ConsolidationError(
                f"agent {agent_id!r} lost its maintenance lock while session {session_id!r} was "
                "being consolidated (the agent was erased, or the run outlasted the lock); "
                "nothing was written"
            ) from exc
        finally:
            write_fence.reset(reset)
            await self.ctx.store.release_lock(agent_id, FENCED_LOCK, token)

    async def _consolidate_fenced(
        self, agent_id: str, session_id: str, fence: Fence, expired: bool, min_turns: int
    ) -> list[str]:
        assert self.ctx.consolidator is not None
        ttl = _READ_EXPIRED_TTL if expired else self.ctx.config.session_ttl_seconds
        info = await self.ctx.store.get_session(agent_id, session_id, ttl_seconds=ttl)
        if info is None:
            return []
        turns = await self.ctx.store.recent_turns(
            agent_id, session_id, limit=max(info.turn_count, 1), ttl_seconds=ttl
        )
        pending = consolidation.pending_turns(turns, info.metadata.get(consolidation.MARKER))
        if len(pending) < min_turns:
            return []
        ids = await consolidation.consolidate_turns(
            self._memories, self.ctx.consolidator, agent_id, session_id, pending
        )
        if not expired:
            marker = consolidation.marker_for(pending[-1], utc_now())
            await self.ctx.store.set_session_metadata(
                agent_id,
                session_id,
                {consolidation.MARKER: marker},
                ttl_seconds=self.ctx.config.session_ttl_seconds,
                fence=fence,
            )
        logger.info(
            "consolidated %d turn(s) of session %r of agent %r into %d memor%s",
            len(pending),
            session_id,
            agent_id,
            len(ids),
            "y" if len(ids) == 1 else "ies",
        )
        return ids

    async def stop_agent(self, agent_id: str) -> None:
        """Cancel (and await) this manager's background runs for the agent, and forget its
        sessions' counts: erase_agent calls it before it deletes."""
        running = [task for (a, _), task in self._consolidating.items() if a == agent_id]
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        for state in (self._new_turns, self._not_before, self._live_until):
            for key in [k for k in state if k[0] == agent_id]:
                del state[key]

    async def consolidate_before_restart(self, agent_id: str, session_id: str) -> None:
        """Consolidate an expired session's pending turns before a new turn restarts it.

        A turn in a session idle longer than its TTL starts the session afresh, and the store
        drops the old turns: without this, a conversation resumed before the sweeper came lost
        what it had not consolidated. Only the first turn this process writes to a session (or
        the first after a TTL of silence) pays the check, one read of the session.
        """
        key = (agent_id, session_id)
        if time.monotonic() < self._live_until.get(key, 0.0):
            return
        info = await self.ctx.store.get_session(agent_id, session_id, ttl_seconds=_READ_EXPIRED_TTL)
        ttl = self.ctx.config.session_ttl_seconds
        if info is None or (utc_now() - info.last_active_at).total_seconds() <= ttl:
            return
        try:
            await self.consolidate_locked(agent_id, session_id, expired=True)
        except ActroneError as exc:
            logger.warning(
                "session %r of agent %r had expired and a new turn restarts it; consolidating "
                "its pending turns first failed (%s), so they are dropped with it",
                session_id,
                agent_id,
                exc,
            )

    def forget_session(self, agent_id: str, session_id: str) -> None:
        """Drop what this manager keeps of the session: it was cleared or swept."""
        self._forget((agent_id, session_id))

    def _forget(self, key: tuple[str, str]) -> None:
        for state in (self._new_turns, self._not_before, self._live_until):
            state.pop(key, None)

    def _prune(self) -> None:
        """Forget the sessions idle past their TTL (less the margin), but those consolidating:
        an expired session's pending turns are the sweeper's, or the next turn's (which
        consolidates them before it restarts the session), not the background count's."""
        now = time.monotonic()
        idle = [k for k, until in self._live_until.items() if until <= now]
        for key in idle:
            if key not in self._consolidating:
                self._forget(key)
        self._prune_at = max(_PRUNE_AT_LEAST, 2 * len(self._live_until))

    def mark_live(self, agent_id: str, session_id: str) -> None:
        """Remember that the session is live for a TTL from now (less a margin for clocks)."""
        if len(self._live_until) >= self._prune_at:
            self._prune()
        ttl = self.ctx.config.session_ttl_seconds
        margin = min(ttl * _LIVE_MARGIN_SHARE, _LIVE_MARGIN_MAX_SECONDS)
        self._live_until[(agent_id, session_id)] = time.monotonic() + ttl - margin

    def note_turn(self, agent_id: str, session_id: str) -> None:
        """Count a stored turn; start a background consolidation when the session is due.

        Due means ``consolidate_after_turns`` new turns, and not within the cooldown of the last
        consolidation — unless the session is about to lose unconsolidated turns to the
        ``max_session_turns`` cap. The count is this process's; the task checks the session's
        marker, shared by every process, before it consolidates.
        """
        after = self.ctx.config.consolidate_after_turns
        if self.ctx.consolidator is None or after == 0 or self._closed:
            return
        key = (agent_id, session_id)
        count = self._new_turns.get(key, 0) + 1
        self._new_turns[key] = count
        trimming = count >= self.ctx.config.max_session_turns - 1
        if count < after or key in self._consolidating:
            return
        if not trimming and time.monotonic() < self._not_before.get(key, 0.0):
            return
        task = asyncio.get_running_loop().create_task(
            self._background_consolidation(key), name=f"actrone-consolidate-{session_id}"
        )
        self._consolidating[key] = task

    async def _background_consolidation(self, key: tuple[str, str]) -> None:
        agent_id, session_id = key
        try:
            info = await self.ctx.store.get_session(
                agent_id, session_id, ttl_seconds=self.ctx.config.session_ttl_seconds
            )
            marker = info.metadata.get(consolidation.MARKER) if info is not None else None
            last = consolidation.last_run(marker)
            cooldown = self.ctx.config.consolidate_cooldown_seconds
            waited = (utc_now() - last).total_seconds() if last is not None else math.inf
            trimming = self._new_turns.get(key, 0) >= self.ctx.config.max_session_turns - 1
            if waited < cooldown and not trimming:
                self._not_before[key] = time.monotonic() + cooldown - waited
                return
            await self.consolidate_locked(
                agent_id,
                session_id,
                expired=False,
                min_turns=min(
                    self.ctx.config.consolidate_after_turns, self.ctx.config.max_session_turns
                ),
            )
            self._new_turns.pop(key, None)
            self._not_before[key] = time.monotonic() + cooldown
        except Exception as exc:
            # Logged, never raised: the caller of store_turn is long gone. The turns stay
            # pending; the next turn after the retry delay starts another attempt.
            logger.warning(
                "background consolidation of session %r of agent %r failed: %s: %s; "
                "retrying after %.0fs",
                session_id,
                agent_id,
                type(exc).__name__,
                exc,
                _CONSOLIDATION_RETRY_SECONDS,
            )
            self._not_before[key] = time.monotonic() + _CONSOLIDATION_RETRY_SECONDS
        finally:
            self._consolidating.pop(key, None)

    async def close(self) -> None:
        """Start no more; let running background consolidations finish (a grace), then cancel."""
        self._closed = True
        tasks = list(self._consolidating.values())
        if not tasks:
            return
        _, late = await asyncio.wait(tasks, timeout=_CLOSE_GRACE_SECONDS)
        for task in late:
            task.cancel()
        if late:
            await asyncio.gather(*late, return_exceptions=True)
