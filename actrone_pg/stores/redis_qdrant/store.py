"""The Redis + Qdrant store: one class holding the servers, each call one module's function.

:class:`RedisQdrantStore` keeps the state (:class:`~.connection.Servers`: the clients, settings
and caches) and forwards each method of the store protocol to the module of its concern, so a
traceback names the module that ran: ``sessions`` (L1), ``writes`` (L2 writes, reads by id,
erasure), ``search`` (candidates for the pipeline, listing) and ``index`` (the Redis memory
index and BM25 statistics).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from actrone_pg.models import Memory, SessionInfo, Turn
from actrone_pg.ranking import DEFAULT_ANALYZER, Analyzer
from actrone_pg.stores.redis_qdrant import index, registry, search, sessions, writes
from actrone_pg.stores.redis_qdrant.connection import Servers

if TYPE_CHECKING:
    from collections.abc import Sequence

    from actrone_pg.config import MemoryConfig
    from actrone_pg.filters import MemoryFilter
    from actrone_pg.pipeline import PackedSearch, SearchRequest
    from actrone_pg.stores.base import BuildVersion, Fence, MemoryRecord

__all__ = ["RedisQdrantStore", "from_config"]


class RedisQdrantStore:
    """L1 in Redis, L2 in Qdrant, ranked by the pipeline like the in-memory reference.

    Build it with :func:`from_config` (or ``MemoryConfig(backend="redis_qdrant")``); call
    :meth:`setup` before use. ``qdrant_url`` may be an ``http(s)://`` URL, ``":memory:"`` or a
    directory path (the last two use qdrant-client's embedded local mode). ``prefix`` (from
    ``MemoryConfig.qdrant_collection_prefix``) starts every Redis key and every collection name.
    """

    backend = "redis_qdrant"

    def __init__(
        self,
        *,
        redis_url: str = "redis://localhost:6379",
        qdrant_url: str = "http://localhost:6333",
        qdrant_api_key: str | None = None,
        prefix: str = "actrone",
        redis_timeout: float = 5.0,
        qdrant_timeout: float = 10.0,
        redis_pool_size: int = 20,
        text_analyzer: str = DEFAULT_ANALYZER,
        lexical_dates: bool | None = None,
        session_grace_seconds: float = 48 * 3600.0,
    ) -> None:
        #: The clients, settings and caches every function of the package is given.
        self.servers = Servers(
            redis_url=redis_url,
            qdrant_url=qdrant_url,
            qdrant_api_key=qdrant_api_key,
            prefix=prefix,
            redis_timeout=redis_timeout,
            qdrant_timeout=qdrant_timeout,
            redis_pool_size=redis_pool_size,
            text_analyzer=text_analyzer,
            lexical_dates=lexical_dates,
            session_grace_seconds=session_grace_seconds,
        )

    @property
    def analyzer(self) -> Analyzer:
        """How contents and queries become BM25 terms (``MemoryConfig.text_analyzer`` and
        ``lexical_dates``)."""
        return self.servers.analyzer

    @property
    def is_local_qdrant(self) -> bool:
        """True when Qdrant runs embedded in this process (``":memory:"`` or a path)."""
        return self.servers.is_local_qdrant

    # -- lifecycle ------------------------------------------------------------------------------

    async def setup(self) -> None:
        """Connect, and check that the index holds the configured analyzer's terms."""
        await self.servers.open()
        try:
            await index.check_text_analyzer(self.servers)
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        """Close both clients. Calling it twice is harmless."""
        await self.servers.close()

    async def reindex(self) -> int:
        """Connect and rebuild the BM25 terms of every memory with the configured analyzer.

        ``actrone-pg reindex``: for a prefix whose recorded analyzer differs (where
        :meth:`setup` refuses). Returns the number of memories indexed.
        """
        await self.servers.open()
        try:
            return await index.reindex_terms(self.servers)
        finally:
            await self.close()

    async def rebuild_index(self, agent_id: str) -> int:
        """Recompute the agent's Redis memory index and BM25 statistics from its Qdrant points
        (:func:`.index.rebuild_index`); returns the number of memories indexed."""
        return await index.rebuild_index(self.servers, agent_id)

    # -- L1: sessions, turns, locks (sessions.py) -----------------------------------------------

    async def append_turn(
        self, turn: Turn, *, max_turns: int, ttl_seconds: float, fence: Fence | None = None
    ) -> None:
        """Append (idempotent by id), trim and refresh the expiry in one Lua script."""
        await sessions.append_turn(
            self.servers, turn, max_turns=max_turns, ttl_seconds=ttl_seconds, fence=fence
        )

    async def recent_turns(
        self, agent_id: str, session_id: str, *, limit: int, ttl_seconds: float
    ) -> list[Turn]:
        """The newest ``limit`` turns of a live session, oldest first."""
        return await sessions.recent_turns(
            self.servers, agent_id, session_id, limit=limit, ttl_seconds=ttl_seconds
        )

    async def get_session(
        self, agent_id: str, session_id: str, *, ttl_seconds: float
    ) -> SessionInfo | None:
        """A live session's turn count, creation, last activity and metadata."""
        return await sessions.get_session(
            self.servers, agent_id, session_id, ttl_seconds=ttl_seconds
        )

    async def list_sessions(self, agent_id: str, *, ttl_seconds: float) -> list[SessionInfo]:
        """The agent's live sessions, by id in code-point order."""
        return await sessions.list_sessions(self.servers, agent_id, ttl_seconds=ttl_seconds)

    async def set_session_metadata(
        self,
        agent_id: str,
        session_id: str,
        metadata: dict[str, Any],
        *,
        ttl_seconds: float,
        fence: Fence | None = None,
    ) -> None:
        """Merge ``metadata`` into the session, creating it if needed."""
        await sessions.set_session_metadata(
            self.servers, agent_id, session_id, metadata, ttl_seconds=ttl_seconds, fence=fence
        )

    async def clear_session(self, agent_id: str, session_id: str) -> None:
        """Delete the session's turns, turn ids and bookkeeping."""
        await sessions.clear_session(self.servers, agent_id, session_id)

    async def sweep_expired_sessions(self, *, ttl_seconds: float, limit: int) -> int:
        """Delete up to ``limit`` sessions idle longer than ``ttl_seconds``."""
        return await sessions.sweep_expired_sessions(
            self.servers, ttl_seconds=ttl_seconds, limit=limit
        )

    async def expired_sessions(self, *, ttl_seconds: float, limit: int) -> list[tuple[str, str]]:
        """Up to ``limit`` sessions idle longer than ``ttl_seconds``, longest idle first."""
        return await sessions.expired_sessions(self.servers, ttl_seconds=ttl_seconds, limit=limit)

    async def delete_expired_session(
        self, agent_id: str, session_id: str, *, ttl_seconds: float
    ) -> bool:
        """Delete the session's keys if it is still idle longer than ``ttl_seconds``."""
        return await sessions.delete_expired_session(
            self.servers, agent_id, session_id, ttl_seconds=ttl_seconds
        )

    async def writer_fence(self, agent_id: str) -> Fence:
        """The agent's write generation (created if it has none; waits for an erase)."""
        return await sessions.writer_fence(self.servers, agent_id)

    async def acquire_lock(self, agent_id: str, name: str, holder: str, ttl_seconds: float) -> bool:
        """``SET NX PX``: one winner among concurrent callers; Redis expires it after the TTL."""
        return await sessions.acquire_lock(self.servers, agent_id, name, holder, ttl_seconds)

    async def release_lock(self, agent_id: str, name: str, holder: str) -> bool:
        """Compare-and-delete: only the holder of a live lock can release it."""
        return await sessions.release_lock(self.servers, agent_id, name, holder)

    # -- L2: writes, reads by id, erasure (writes.py) -------------------------------------------

    async def upsert_memories(
        self, records: Sequence[MemoryRecord], *, fence: Fence | None = None
    ) -> None:
        """Insert or replace, all or none across both servers (:func:`.writes.upsert_memories`)."""
        await writes.upsert_memories(self.servers, records, fence=fence)

    async def get_memory(self, agent_id: str, memory_id: str) -> Memory | None:
        """The agent's current memory ``memory_id``, or ``None``."""
        return await writes.get_memory(self.servers, agent_id, memory_id)

    async def update_memory(
        self,
        agent_id: str,
        memory_id: str,
        build: BuildVersion,
        *,
        fence: Fence | None = None,
    ) -> Memory | None:
        """The new version built from the current one (:func:`.writes.update_memory`)."""
        return await writes.update_memory(self.servers, agent_id, memory_id, build, fence=fence)

    async def memory_history(self, agent_id: str, memory_id: str) -> list[Memory]:
        """Every version of the memory, oldest first."""
        return await writes.memory_history(self.servers, agent_id, memory_id)

    async def delete_memory(self, agent_id: str, memory_id: str) -> bool:
        """Delete the agent's memory; ``False`` if it had none of that id."""
        return await writes.delete_memory(self.servers, agent_id, memory_id)

    async def sweep_expired_memories(self, *, limit: int) -> int:
        """Delete up to ``limit`` expired memories, of every agent."""
        return await writes.sweep_expired_memories(self.servers, limit=limit)

    async def count_memories(self, agent_id: str) -> int:
        """How many current memories the agent has."""
        return await writes.count_memories(self.servers, agent_id)

    async def erase_agent(self, agent_id: str) -> None:
        """Delete every key and point of the agent, and nothing of any other."""
        await writes.erase_agent(self.servers, agent_id)

    # -- L2: search and listing (search.py) -----------------------------------------------------

    async def search(self, request: SearchRequest) -> PackedSearch:
        """The agent's Qdrant candidates, with exact cosines, ranked by the pipeline."""
        return await search.search(self.servers, request)

    async def list_memories(
        self,
        agent_id: str,
        *,
        now: datetime,
        limit: int,
        after: tuple[datetime, str] | None = None,
        filter: MemoryFilter | None = None,
    ) -> list[Memory]:
        """A page of the agent's live memories, newest first."""
        return await search.list_memories(
            self.servers, agent_id, now=now, limit=limit, after=after, filter=filter
        )

    # -- read by benchmarks/faults.py's survivor count; use ``servers`` and the modules instead --

    @property
    def _prefix(self) -> str:
        return self.servers.prefix

    def _client_r(self) -> Any:
        return self.servers.redis()

    def _client_q(self) -> Any:
        return self.servers.qdrant()

    async def _own_collections(self) -> list[tuple[str, int]]:
        return await registry.own_collections(self.servers)


def from_config(config: MemoryConfig) -> RedisQdrantStore:
    """Factory used by :func:`actrone_pg.stores.create_store` (connects on ``setup()``)."""
    return RedisQdrantStore(
        redis_url=config.redis_url,
        qdrant_url=config.qdrant_url,
        qdrant_api_key=config.qdrant_api_key,
        # One namespace for both servers: the Redis index and statistics describe exactly the
        # points of the collections with the same prefix, so the two must never be paired apart.
        prefix=config.qdrant_collection_prefix,
        redis_timeout=config.redis_timeout,
        qdrant_timeout=config.qdrant_timeout,
        redis_pool_size=config.redis_pool_size,
        text_analyzer=config.text_analyzer,
        lexical_dates=config.lexical_dates,
        session_grace_seconds=config.redis_session_grace_hours * 3600.0,
    )
