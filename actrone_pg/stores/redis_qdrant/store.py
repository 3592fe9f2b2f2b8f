"""The Redis + Qdrant store: its layers put together."""

from __future__ import annotations

from typing import TYPE_CHECKING

from actrone_pg.stores.redis_qdrant.search import Search
from actrone_pg.stores.redis_qdrant.sessions import Sessions
from actrone_pg.stores.redis_qdrant.writes import Writes

if TYPE_CHECKING:
    from actrone_pg.config import MemoryConfig

__all__ = ["RedisQdrantStore", "from_config"]


class RedisQdrantStore(Sessions, Writes, Search):
    """L1 in Redis, L2 in Qdrant, ranked by the pipeline like the in-memory reference.

    Build it with :func:`from_config` (or ``MemoryConfig(backend="redis_qdrant")``); call
    :meth:`setup` before use. ``qdrant_url`` may be an ``http(s)://`` URL, ``":memory:"`` or a
    directory path (the last two use qdrant-client's embedded local mode). ``prefix`` (from
    ``MemoryConfig.qdrant_collection_prefix``) starts every Redis key and every collection name.
    """

    backend = "redis_qdrant"

    async def setup(self) -> None:
        """Connect, and check that the index holds the configured analyzer's terms."""
        await super().setup()
        try:
            await self._check_text_analyzer()
        except BaseException:
            await self.close()
            raise

    async def reindex(self) -> int:
        """Connect and rebuild the BM25 terms of every memory with the configured analyzer.

        ``actrone-pg reindex``: for a prefix whose recorded analyzer differs (where
        :meth:`setup` refuses). Returns the number of memories indexed.
        """
        await super().setup()
        try:
            return await self._reindex_terms()
        finally:
            await self.close()


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
        session_grace_seconds=config.redis_session_grace_hours * 3600.0,
    )
