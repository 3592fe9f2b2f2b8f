"""The store as the manager calls it: each call's failure typed at the boundary (spec §5).

:class:`GuardedStore` implements the store protocol over the store a manager was given, each
method the store's own inside :func:`actrone_pg._guard.calling`: a failure of the store that is
not an ``ActroneError`` already reaches the manager as a ``StoreError``, its cause chained. A
store that offers ``fetch_context`` is wrapped in :class:`GuardedContextStore`, which offers it
too. The collaborators see only the guarded store (``ManagerContext.store``); the manager's
``store`` attribute is the store itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from actrone_pg._guard import calling
from actrone_pg.filters import MemoryFilter
from actrone_pg.models import Memory, SessionInfo, Turn
from actrone_pg.pipeline import PackedSearch, SearchRequest
from actrone_pg.stores.base import BuildVersion, ContextStore, Fence, MemoryRecord, Store

__all__ = ["GuardedContextStore", "GuardedStore", "guard_store"]

# Every call of the store goes through this one boundary.
_STORE = calling("store")


def guard_store(store: Store) -> GuardedStore:
    """``store`` behind the boundary: a :class:`GuardedContextStore` if it can fetch L1 and L2
    together, else a :class:`GuardedStore`."""
    if isinstance(store, ContextStore):
        return GuardedContextStore(store)
    return GuardedStore(store)


class GuardedStore:
    """The store protocol over ``store``, every failure typed (a ``StoreError``)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        with _STORE:
            self.backend: str = store.backend

    async def setup(self) -> None:
        with _STORE:
            await self.store.setup()

    async def close(self) -> None:
        with _STORE:
            await self.store.close()

    async def append_turn(
        self, turn: Turn, *, max_turns: int, ttl_seconds: float, fence: Fence | None = None
    ) -> None:
        with _STORE:
            await self.store.append_turn(
                turn, max_turns=max_turns, ttl_seconds=ttl_seconds, fence=fence
            )

    async def recent_turns(
        self, agent_id: str, session_id: str, *, limit: int, ttl_seconds: float
    ) -> list[Turn]:
        with _STORE:
            return await self.store.recent_turns(
                agent_id, session_id, limit=limit, ttl_seconds=ttl_seconds
            )

    async def get_session(
        self, agent_id: str, session_id: str, *, ttl_seconds: float
    ) -> SessionInfo | None:
        with _STORE:
            return await self.store.get_session(agent_id, session_id, ttl_seconds=ttl_seconds)

    async def list_sessions(self, agent_id: str, *, ttl_seconds: float) -> list[SessionInfo]:
        with _STORE:
            return await self.store.list_sessions(agent_id, ttl_seconds=ttl_seconds)

    async def set_session_metadata(
        self,
        agent_id: str,
        session_id: str,
        metadata: dict[str, Any],
        *,
        ttl_seconds: float,
        fence: Fence | None = None,
    ) -> None:
        with _STORE:
            await self.store.set_session_metadata(
                agent_id, session_id, metadata, ttl_seconds=ttl_seconds, fence=fence
            )

    async def clear_session(self, agent_id: str, session_id: str) -> None:
        with _STORE:
            await self.store.clear_session(agent_id, session_id)

    async def sweep_expired_sessions(self, *, ttl_seconds: float, limit: int) -> int:
        with _STORE:
            return await self.store.sweep_expired_sessions(ttl_seconds=ttl_seconds, limit=limit)

    async def expired_sessions(self, *, ttl_seconds: float, limit: int) -> list[tuple[str, str]]:
        with _STORE:
            return await self.store.expired_sessions(ttl_seconds=ttl_seconds, limit=limit)

    async def delete_expired_session(
        self, agent_id: str, session_id: str, *, ttl_seconds: float
    ) -> bool:
        with _STORE:
            return await self.store.delete_expired_session(
                agent_id, session_id, ttl_seconds=ttl_seconds
            )

    async def writer_fence(self, agent_id: str) -> Fence:
        with _STORE:
            return await self.store.writer_fence(agent_id)

    async def acquire_lock(self, agent_id: str, name: str, holder: str, ttl_seconds: float) -> bool:
        with _STORE:
            return await self.store.acquire_lock(agent_id, name, holder, ttl_seconds)

    async def release_lock(self, agent_id: str, name: str, holder: str) -> bool:
        with _STORE:
            return await self.store.release_lock(agent_id, name, holder)

    async def upsert_memories(
        self, records: Sequence[MemoryRecord], *, fence: Fence | None = None
    ) -> None:
        with _STORE:
            await self.store.upsert_memories(records, fence=fence)

    async def get_memory(self, agent_id: str, memory_id: str) -> Memory | None:
        with _STORE:
            return await self.store.get_memory(agent_id, memory_id)

    async def update_memory(
        self,
        agent_id: str,
        memory_id: str,
        build: BuildVersion,
        *,
        fence: Fence | None = None,
    ) -> Memory | None:
        # What ``build`` raises (the manager's own, typed) passes through untouched.
        with _STORE:
            return await self.store.update_memory(agent_id, memory_id, build, fence=fence)

    async def memory_history(self, agent_id: str, memory_id: str) -> list[Memory]:
        with _STORE:
            return await self.store.memory_history(agent_id, memory_id)

    async def delete_memory(self, agent_id: str, memory_id: str) -> bool:
        with _STORE:
            return await self.store.delete_memory(agent_id, memory_id)

    async def list_memories(
        self,
        agent_id: str,
        *,
        now: datetime,
        limit: int,
        after: tuple[datetime, str] | None = None,
        filter: MemoryFilter | None = None,
    ) -> list[Memory]:
        with _STORE:
            return await self.store.list_memories(
                agent_id, now=now, limit=limit, after=after, filter=filter
            )

    async def sweep_expired_memories(self, *, limit: int) -> int:
        with _STORE:
            return await self.store.sweep_expired_memories(limit=limit)

    async def count_memories(self, agent_id: str) -> int:
        with _STORE:
            return await self.store.count_memories(agent_id)

    async def erase_agent(self, agent_id: str) -> None:
        with _STORE:
            await self.store.erase_agent(agent_id)

    async def search(self, request: SearchRequest) -> PackedSearch:
        with _STORE:
            return await self.store.search(request)


class GuardedContextStore(GuardedStore):
    """A :class:`GuardedStore` over a store that also fetches L1 and L2 together."""

    async def fetch_context(
        self,
        agent_id: str,
        session_id: str,
        *,
        limit: int,
        ttl_seconds: float,
        request: SearchRequest,
    ) -> tuple[list[Turn], PackedSearch]:
        with _STORE:
            return await cast(ContextStore, self.store).fetch_context(
                agent_id, session_id, limit=limit, ttl_seconds=ttl_seconds, request=request
            )
