"""The Redis + Qdrant store's base layer: both clients, their lifecycle and error mapping.

Every Redis call goes through :meth:`Connection._redis_call` and every Qdrant call through
:meth:`Connection._qdrant_call`, which bound the wait and map connection trouble onto
:class:`~actrone_pg.errors.StoreUnavailableError`.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Sequence
from typing import Any, TypeVar

from actrone_pg.config import redact
from actrone_pg.errors import MissingDependencyError, StoreError, StoreUnavailableError
from actrone_pg.ranking import DEFAULT_ANALYZER, analyzer
from actrone_pg.stores._keyed_locks import KeyedLocks
from actrone_pg.stores.redis_qdrant.layout import LAYOUT
from actrone_pg.stores.redis_qdrant.scripts import SCRIPTS

try:
    import redis.asyncio as aioredis
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import RedisError
    from redis.exceptions import TimeoutError as RedisTimeoutError
except ImportError:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("redis", "redis") from None
try:
    from qdrant_client import AsyncQdrantClient
    from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse
except ImportError:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("qdrant", "qdrant-client") from None

__all__ = ["Connection"]

T = TypeVar("T")

# Calls for one agent re-index it one at a time (see Index._ensure_indexed), under one of these
# many locks.
_REINDEX_LOCKS = 64


class Connection:
    """The store's clients, their lifecycle, and the errors they map.

    The other layers of :class:`~actrone_pg.stores.redis_qdrant.RedisQdrantStore` build on this.
    """

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
        session_grace_seconds: float = 48 * 3600.0,
    ) -> None:
        #: How contents and queries become BM25 terms (``MemoryConfig.text_analyzer``).
        self.analyzer = analyzer(text_analyzer)
        self._redis_url = redis_url
        self._qdrant_url = qdrant_url
        self._qdrant_api_key = qdrant_api_key
        self._prefix = prefix
        self._redis_timeout = redis_timeout
        self._qdrant_timeout = qdrant_timeout
        self._pool_size = redis_pool_size
        # How long a session's keys outlive its TTL, waiting for a sweeper (Sessions).
        self._session_grace_seconds = session_grace_seconds
        self._redis: aioredis.Redis | None = None
        self._qdrant: AsyncQdrantClient | None = None
        self._scripts: dict[str, Any] = {}
        # (agent, memory id) -> this process's queue for the memory's update lock, and how many
        # hold or await it (Writes.update_memory)
        self._updating = KeyedLocks()
        # embedder -> dimension, as registered in Redis (never changes once set)
        self._dims: dict[str, int] = {}
        self._collections: set[str] = set()  # created or checked by _ensure_collection
        self._known: set[str] = set()  # seen to exist (reads)
        self._reindex_locks = [asyncio.Lock() for _ in range(_REINDEX_LOCKS)]

    @property
    def is_local_qdrant(self) -> bool:
        """True when Qdrant runs embedded in this process (``":memory:"`` or a path)."""
        return not self._qdrant_url.startswith(("http://", "https://"))

    @property
    def _dims_key(self) -> str:
        return f"{self._prefix}:{LAYOUT}:dims"

    @property
    def _sessions_key(self) -> str:
        """Every session of this prefix, all agents, scored by its last activity (ms)."""
        return f"{self._prefix}:{LAYOUT}:sessions"

    @property
    def _analyzer_key(self) -> str:
        """The analyzer whose terms the index and statistics of this prefix hold."""
        return f"{self._prefix}:{LAYOUT}:analyzer"

    async def setup(self) -> None:
        """Create the clients and check that both servers answer (StoreUnavailableError if not)."""
        if self._redis is None:
            # A blocking pool: when every connection is busy a caller waits (up to the timeout)
            # instead of failing with "Too many connections". One immediate retry on a new
            # connection, for connection errors only: after a Redis restart the pooled
            # connections are dead, and the checkout check misses those whose close the event
            # loop has not processed yet, so without it the first call after the restart
            # failed. A refused retry costs a millisecond; timeouts are not retried, so a caller
            # still waits at most redis_timeout (see _r). Every script and command is safe to
            # replay after a lost reply (writes are idempotent; a replayed lock acquire or
            # release answers False, never admitting a second holder).
            pool = aioredis.BlockingConnectionPool.from_url(
                self._redis_url,
                max_connections=self._pool_size,
                timeout=self._redis_timeout,
                socket_timeout=self._redis_timeout,
                socket_connect_timeout=self._redis_timeout,
                retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
                decode_responses=True,
            )
            self._redis = aioredis.Redis.from_pool(pool)
            for name, src in SCRIPTS.items():
                # register_script runs EVALSHA and reloads the script after a server restart.
                self._scripts[name] = self._redis.register_script(src)
        if self._qdrant is None:
            if self._qdrant_url == ":memory:":
                self._qdrant = AsyncQdrantClient(location=":memory:")
            elif self.is_local_qdrant:
                self._qdrant = AsyncQdrantClient(path=self._qdrant_url)
            else:
                self._qdrant = AsyncQdrantClient(
                    url=self._qdrant_url,
                    api_key=self._qdrant_api_key,
                    timeout=max(1, math.ceil(self._qdrant_timeout)),
                    check_compatibility=False,
                )
        try:
            await self._redis_call(self._redis.ping())
            await self._qdrant_call(self._qdrant.get_collections())
        except BaseException:
            # Do not keep a half-built store: a local-mode Qdrant on a path holds a file lock.
            await self.close()
            raise

    async def close(self) -> None:
        """Close both clients. Calling it twice is harmless."""
        redis_client, self._redis = self._redis, None
        qdrant_client, self._qdrant = self._qdrant, None
        self._scripts.clear()
        if redis_client is not None:
            await redis_client.aclose()
        if qdrant_client is not None:
            await qdrant_client.close()

    def _client_r(self) -> aioredis.Redis:
        if self._redis is None:
            raise StoreError("the store is not set up (call setup()) or already closed")
        return self._redis

    def _client_q(self) -> AsyncQdrantClient:
        if self._qdrant is None:
            raise StoreError("the store is not set up (call setup()) or already closed")
        return self._qdrant

    async def _redis_call(self, aw: Awaitable[T]) -> T:
        """Await a Redis call; connection trouble becomes StoreUnavailableError in time."""
        try:
            async with asyncio.timeout(self._redis_timeout):
                return await aw
        except (RedisConnectionError, RedisTimeoutError, TimeoutError, OSError) as exc:
            raise StoreUnavailableError(
                redact(_redis_unavailable(self._redis_url, self._redis_timeout, exc))
            ) from None
        except RedisError as exc:
            raise StoreError(redact(f"Redis failed: {exc}")) from exc

    async def _qdrant_call(self, aw: Awaitable[T]) -> T:
        """Await a Qdrant call; connection trouble becomes StoreUnavailableError."""
        try:
            async with asyncio.timeout(self._qdrant_timeout):
                return await aw
        except (ResponseHandlingException, TimeoutError, OSError) as exc:
            raise StoreUnavailableError(
                redact(
                    f"Qdrant at {self._qdrant_url} did not answer within "
                    f"{self._qdrant_timeout:g} s ({type(exc).__name__}: {exc}); check that it is "
                    "running and reachable, or raise MemoryConfig.qdrant_timeout"
                )
            ) from None
        except UnexpectedResponse as exc:
            if exc.status_code is not None and exc.status_code >= 500:
                raise StoreUnavailableError(
                    redact(f"Qdrant at {self._qdrant_url} answered {exc.status_code}; retry later")
                ) from None
            raise StoreError(redact(f"Qdrant refused the request: {exc}")) from exc

    async def _hget(self, key: str, field: str) -> str | None:
        value = await self._redis_call(self._client_r().hget(key, field))
        return None if value is None else str(value)

    async def _script(self, name: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        self._client_r()
        return await self._redis_call(self._scripts[name](keys=list(keys), args=list(args)))


def _redis_unavailable(url: str, timeout: float, exc: BaseException) -> str:
    """What happened, in words: refused at once, timed out, or a connection lost."""
    if isinstance(exc, (RedisTimeoutError, TimeoutError)):
        return (
            f"Redis at {url} did not answer within {timeout:g} s ({type(exc).__name__}: {exc}); "
            "check that it is reachable and not stalled, or raise MemoryConfig.redis_timeout"
        )
    causes = (exc, exc.__cause__, exc.__context__)
    if any(isinstance(c, ConnectionRefusedError) for c in causes):
        return f"Redis at {url} refused the connection ({exc}); is it running on that port?"
    return f"Redis at {url} could not be reached or dropped the connection ({exc}); is it running?"
