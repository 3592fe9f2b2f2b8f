"""The Redis + Qdrant store's state: both clients, their lifecycle and error mapping.

:class:`Servers` is the one object the store holds; the other modules of the package are
functions that take it. Every Redis call goes through :meth:`Servers.redis_call` and every
Qdrant call through :meth:`Servers.qdrant_call`, which bound the wait and map connection trouble
onto :class:`~actrone_pg.errors.StoreUnavailableError`.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Sequence
from typing import Any, TypeVar

from actrone_pg.config import redact
from actrone_pg.errors import (
    MissingDependencyError,
    PoolSaturatedError,
    StoreError,
    StoreUnavailableError,
)
from actrone_pg.ranking import analyzer
from actrone_pg.stores._keyed_locks import KeyedLocks
from actrone_pg.stores.redis_qdrant.layout import LAYOUT
from actrone_pg.stores.redis_qdrant.scripts import SCRIPTS
from actrone_pg.stores.redis_qdrant.settings import RedisQdrantSettings

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

__all__ = ["Servers"]

T = TypeVar("T")

#: Seconds past a Redis call's two bounds (the pool's wait, the server's answer; redis_timeout
#: each, enforced by the client) at which asyncio cancels it, should neither have ended it.
_BACKSTOP = 0.5

# Calls for one agent re-index it one at a time (see index.ensure_indexed), under one of these
# many locks.
_REINDEX_LOCKS = 64


class Servers:
    """The store's clients and :attr:`settings`, what this process caches about the servers,
    and the errors the clients raise, mapped.

    :class:`~actrone_pg.stores.redis_qdrant.RedisQdrantStore` holds one; the functions of the
    package's other modules take it as their first argument.
    """

    def __init__(self, settings: RedisQdrantSettings) -> None:
        #: The store's settings (frozen).
        self.settings = settings
        #: How contents and queries become BM25 terms (``MemoryConfig.text_analyzer`` and
        #: ``lexical_dates``; the prefix's recorded one, followed at setup).
        self.analyzer = analyzer(settings.text_analyzer, dates=settings.lexical_dates)
        self._redis_client: aioredis.Redis | None = None
        self._qdrant_client: AsyncQdrantClient | None = None
        self._scripts: dict[str, Any] = {}
        # (agent, memory id) -> this process's queue for the memory's update lock, and how many
        # hold or await it (writes.update_memory)
        self.updating = KeyedLocks()
        # embedder -> dimension, as registered in Redis (never changes once set)
        self.dims: dict[str, int] = {}
        self.collections: set[str] = set()  # created or checked by registry.ensure_collection
        self.known: set[str] = set()  # seen to exist (reads)
        self.reindex_locks = [asyncio.Lock() for _ in range(_REINDEX_LOCKS)]

    @property
    def prefix(self) -> str:
        """The start of every Redis key and Qdrant collection name of this store."""
        return self.settings.prefix

    @property
    def qdrant_url(self) -> str:
        """Qdrant's URL, ``":memory:"`` or a directory (its embedded local mode)."""
        return self.settings.qdrant_url

    @property
    def session_grace_seconds(self) -> float:
        """How long a session's keys outlive its TTL, waiting for a sweeper (sessions.py)."""
        return self.settings.session_grace_seconds

    @property
    def dates_given(self) -> bool:
        """``lexical_dates`` was set: a prefix recorded otherwise is then an error, not
        followed (ranking.follow_recorded)."""
        return self.settings.lexical_dates is not None

    @property
    def is_local_qdrant(self) -> bool:
        """True when Qdrant runs embedded in this process (``":memory:"`` or a path)."""
        return not self.qdrant_url.startswith(("http://", "https://"))

    @property
    def dims_key(self) -> str:
        """Embedder -> dimension, as registered by the first write of each embedder."""
        return f"{self.prefix}:{LAYOUT}:dims"

    @property
    def sessions_key(self) -> str:
        """Every session of this prefix, all agents, scored by its last activity (ms)."""
        return f"{self.prefix}:{LAYOUT}:sessions"

    @property
    def analyzer_key(self) -> str:
        """The analyzer whose terms the index and statistics of this prefix hold."""
        return f"{self.prefix}:{LAYOUT}:analyzer"

    async def open(self) -> None:
        """Create the clients and check that both servers answer (StoreUnavailableError if not)."""
        if self._redis_client is None:
            # A blocking pool: when every connection is busy a caller waits (up to the timeout)
            # instead of failing with "Too many connections", then fails with
            # PoolSaturatedError (see redis_call). One immediate retry on a new
            # connection, for connection errors only: after a Redis restart the pooled
            # connections are dead, and the checkout check misses those whose close the event
            # loop has not processed yet, so without it the first call after the restart
            # failed. A refused retry costs a millisecond; timeouts are not retried, so a caller
            # waits at most redis_timeout for a connection and as long for the answer (see
            # redis_call). Every script and command is
            # safe to replay after a lost reply (writes are idempotent; a replayed lock acquire
            # or release answers False, never admitting a second holder).
            pool = aioredis.BlockingConnectionPool.from_url(
                self.settings.redis_url,
                max_connections=self.settings.redis_pool_size,
                timeout=self.settings.redis_timeout,
                socket_timeout=self.settings.redis_timeout,
                socket_connect_timeout=self.settings.redis_timeout,
                retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
                decode_responses=True,
            )
            self._redis_client = aioredis.Redis.from_pool(pool)
            for name, src in SCRIPTS.items():
                # register_script runs EVALSHA and reloads the script after a server restart.
                self._scripts[name] = self._redis_client.register_script(src)
        if self._qdrant_client is None:
            if self.qdrant_url == ":memory:":
                self._qdrant_client = AsyncQdrantClient(location=":memory:")
            elif self.is_local_qdrant:
                self._qdrant_client = AsyncQdrantClient(path=self.qdrant_url)
            else:
                self._qdrant_client = AsyncQdrantClient(
                    url=self.qdrant_url,
                    api_key=self.settings.qdrant_api_key,
                    timeout=max(1, math.ceil(self.settings.qdrant_timeout)),
                    check_compatibility=False,
                )
        try:
            await self.redis_call(self._redis_client.ping())
            await self.qdrant_call(self._qdrant_client.get_collections())
        except BaseException:
            # Do not keep a half-built store: a local-mode Qdrant on a path holds a file lock.
            await self.close()
            raise

    async def close(self) -> None:
        """Close both clients. Calling it twice is harmless."""
        redis_client, self._redis_client = self._redis_client, None
        qdrant_client, self._qdrant_client = self._qdrant_client, None
        self._scripts.clear()
        if redis_client is not None:
            await redis_client.aclose()
        if qdrant_client is not None:
            await qdrant_client.close()

    def redis(self) -> aioredis.Redis:
        """The Redis client (:class:`StoreError` before :meth:`open` or after :meth:`close`)."""
        if self._redis_client is None:
            raise StoreError("the store is not set up (call setup()) or already closed")
        return self._redis_client

    def qdrant(self) -> AsyncQdrantClient:
        """The Qdrant client (:class:`StoreError` before :meth:`open` or after :meth:`close`)."""
        if self._qdrant_client is None:
            raise StoreError("the store is not set up (call setup()) or already closed")
        return self._qdrant_client

    async def redis_call(self, aw: Awaitable[T]) -> T:
        """Await a Redis call; connection trouble becomes StoreUnavailableError in time.

        The client bounds the wait for a pooled connection and the wait for the answer by
        ``redis_timeout`` each. A pool whose every connection stays busy for the whole wait
        raises :class:`PoolSaturatedError` (load, not an outage). asyncio's timeout only backs
        the two up: one ``redis_timeout`` for both cut off a call that took its connection
        late from a busy pool while a healthy server answered it, and dropped that connection.
        """
        try:
            async with asyncio.timeout(2 * self.settings.redis_timeout + _BACKSTOP):
                return await aw
        except (RedisConnectionError, RedisTimeoutError, TimeoutError, OSError) as exc:
            if _pool_wait_timed_out(exc):
                size, timeout = self.settings.redis_pool_size, self.settings.redis_timeout
                raise PoolSaturatedError(
                    f"the Redis connection pool is saturated: all {size} of its connections "
                    f"(redis_pool_size) stayed in use by other calls for {timeout:g} s "
                    "(redis_timeout); this is load, not an outage: retry later, send fewer "
                    "concurrent calls, or raise redis_pool_size"
                ) from None
            raise StoreUnavailableError(
                redact(
                    _redis_unavailable(self.settings.redis_url, self.settings.redis_timeout, exc)
                )
            ) from None
        except RedisError as exc:
            raise StoreError(redact(f"Redis failed: {exc}")) from exc

    async def qdrant_call(self, aw: Awaitable[T]) -> T:
        """Await a Qdrant call; connection trouble becomes StoreUnavailableError."""
        try:
            async with asyncio.timeout(self.settings.qdrant_timeout):
                return await aw
        except (ResponseHandlingException, TimeoutError, OSError) as exc:
            raise StoreUnavailableError(
                redact(
                    f"Qdrant at {self.qdrant_url} did not answer within "
                    f"{self.settings.qdrant_timeout:g} s ({type(exc).__name__}: {exc}); check that "
                    "it is running and reachable, or raise MemoryConfig.qdrant_timeout"
                )
            ) from None
        except UnexpectedResponse as exc:
            if exc.status_code is not None and exc.status_code >= 500:
                raise StoreUnavailableError(
                    redact(f"Qdrant at {self.qdrant_url} answered {exc.status_code}; retry later")
                ) from None
            raise StoreError(redact(f"Qdrant refused the request: {exc}")) from exc

    async def hget(self, key: str, field: str) -> str | None:
        """One field of a Redis hash, or ``None``."""
        value = await self.redis_call(self.redis().hget(key, field))
        return None if value is None else str(value)

    async def script(self, name: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """Run one of :data:`~actrone_pg.stores.redis_qdrant.scripts.SCRIPTS` by name."""
        self.redis()
        return await self.redis_call(self._scripts[name](keys=list(keys), args=list(args)))


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


def _pool_wait_timed_out(exc: BaseException) -> bool:
    """``BlockingConnectionPool``'s error for a wait that found no free connection in time
    (a ``ConnectionError`` raised from the wait's timeout), not one of the server's."""
    return (
        isinstance(exc, RedisConnectionError)
        and isinstance(exc.__cause__, TimeoutError)
        and str(exc).startswith("No connection available")
    )
