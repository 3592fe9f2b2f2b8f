"""The Redis + Qdrant store: one class holding the servers, each call one module's function.

:class:`RedisQdrantStore` keeps the state (:class:`~.connection.Servers`: the clients, settings
and caches) and forwards each method of the store protocol to the module of its concern, so a
traceback names the module that ran: ``sessions`` (L1), ``writes`` (L2 writes, reads by id,
erasure), ``search`` (candidates for the pipeline, listing) and ``index`` (the Redis memory
index and BM25 statistics).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from actrone_pg._forward import forward
from actrone_pg.ranking import Analyzer
from actrone_pg.stores.redis_qdrant import index, registry, search, sessions, writes
from actrone_pg.stores.redis_qdrant.connection import Servers
from actrone_pg.stores.redis_qdrant.settings import RedisQdrantSettings

if TYPE_CHECKING:
    from actrone_pg.config import MemoryConfig

__all__ = ["RedisQdrantStore", "from_config"]


class RedisQdrantStore:
    """L1 in Redis, L2 in Qdrant, ranked by the pipeline like the in-memory reference.

    ``settings`` (:class:`~.settings.RedisQdrantSettings`, the defaults if ``None``) names the
    servers and the prefix; :func:`from_config` (or ``MemoryConfig(backend="redis_qdrant")``)
    makes them from a :class:`~actrone_pg.config.MemoryConfig`. Call :meth:`setup` before use.
    """

    backend = "redis_qdrant"

    def __init__(self, settings: RedisQdrantSettings | None = None) -> None:
        #: The clients, settings and caches every function of the package is given.
        self.servers = Servers(settings if settings is not None else RedisQdrantSettings())

    @property
    def settings(self) -> RedisQdrantSettings:
        """The store's settings (frozen)."""
        return self.servers.settings

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

    append_turn = forward("servers", sessions.append_turn)
    recent_turns = forward("servers", sessions.recent_turns)
    get_session = forward("servers", sessions.get_session)
    list_sessions = forward("servers", sessions.list_sessions)
    set_session_metadata = forward("servers", sessions.set_session_metadata)
    clear_session = forward("servers", sessions.clear_session)
    sweep_expired_sessions = forward("servers", sessions.sweep_expired_sessions)
    expired_sessions = forward("servers", sessions.expired_sessions)
    delete_expired_session = forward("servers", sessions.delete_expired_session)
    writer_fence = forward("servers", sessions.writer_fence)
    acquire_lock = forward("servers", sessions.acquire_lock)
    release_lock = forward("servers", sessions.release_lock)

    # -- L2: writes, reads by id, erasure (writes.py) -------------------------------------------

    upsert_memories = forward("servers", writes.upsert_memories)
    get_memory = forward("servers", writes.get_memory)
    update_memory = forward("servers", writes.update_memory)
    memory_history = forward("servers", writes.memory_history)
    delete_memory = forward("servers", writes.delete_memory)
    sweep_expired_memories = forward("servers", writes.sweep_expired_memories)
    count_memories = forward("servers", writes.count_memories)
    erase_agent = forward("servers", writes.erase_agent)

    # -- L2: listing and search (search.py) -----------------------------------------------------

    list_memories = forward("servers", search.list_memories)
    search = forward("servers", search.search)

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
    return RedisQdrantStore(RedisQdrantSettings.from_config(config))
