"""What the Redis + Qdrant store is told: one frozen record, no I/O.

:class:`RedisQdrantSettings` goes from :class:`~actrone_pg.config.MemoryConfig`
(:meth:`RedisQdrantSettings.from_config`) through :class:`~.store.RedisQdrantStore` to
:class:`~.connection.Servers`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from actrone_pg.ranking import DEFAULT_ANALYZER

if TYPE_CHECKING:
    from actrone_pg.config import MemoryConfig

__all__ = ["RedisQdrantSettings"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RedisQdrantSettings:
    """The Redis + Qdrant store's settings (``MemoryConfig``'s fields of the same names but
    ``prefix``, which is ``qdrant_collection_prefix``, and ``session_grace_seconds``, which is
    ``redis_session_grace_hours`` in seconds).

    ``qdrant_url`` may be an ``http(s)://`` URL, ``":memory:"`` or a directory path (the last
    two use qdrant-client's embedded local mode). ``prefix`` starts every Redis key and every
    collection name. A Redis call waits at most ``redis_timeout`` for one of the
    ``redis_pool_size`` pooled connections and as long again for the server; a Qdrant call at
    most ``qdrant_timeout``. An expired session's keys are kept ``session_grace_seconds`` for
    the sweeper (docs/redis_qdrant.md).
    """

    redis_url: str = "redis://localhost:6379"
    qdrant_url: str = "http://localhost:6333"
    qdrant_api_key: str | None = None
    prefix: str = "actrone"
    redis_timeout: float = 5.0
    qdrant_timeout: float = 10.0
    redis_pool_size: int = 20
    text_analyzer: str = DEFAULT_ANALYZER
    lexical_dates: bool | None = None
    session_grace_seconds: float = 48 * 3600.0

    @classmethod
    def from_config(cls, config: MemoryConfig) -> RedisQdrantSettings:
        """The settings a :class:`~actrone_pg.config.MemoryConfig` gives the store."""
        return cls(
            redis_url=config.redis_url,
            qdrant_url=config.qdrant_url,
            qdrant_api_key=config.qdrant_api_key,
            # One namespace for both servers: the Redis index and statistics describe exactly
            # the points of the collections with the same prefix, so the two must never be
            # paired apart.
            prefix=config.qdrant_collection_prefix,
            redis_timeout=config.redis_timeout,
            qdrant_timeout=config.qdrant_timeout,
            redis_pool_size=config.redis_pool_size,
            text_analyzer=config.text_analyzer,
            lexical_dates=config.lexical_dates,
            session_grace_seconds=config.redis_session_grace_hours * 3600.0,
        )
