"""Fixtures for the Redis + Qdrant backend.

Redis: ``ACTRONE_TEST_REDIS_URL`` (default ``redis://127.0.0.1:6379``). Qdrant:
``ACTRONE_TEST_QDRANT_URL`` if set, a container with ``ACTRONE_TEST_QDRANT=container``, else
qdrant-client's local mode in memory (``tests/servers.py``). Every store gets
its own key prefix and collection prefix, so tests never see each other's data; its keys and
collections are removed afterwards. Nothing connects at import time, and the drivers are imported
inside the fixtures so that the suite still collects without the extras.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import pytest

from tests.servers import qdrant_url

if TYPE_CHECKING:
    from actrone_pg.stores.redis_qdrant import RedisQdrantStore

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379"


def redis_url() -> str:
    """The Redis server the tests use."""
    return os.environ.get("ACTRONE_TEST_REDIS_URL") or DEFAULT_REDIS_URL


def unique_prefix() -> str:
    """A key/collection prefix no other test uses (letters and digits only: glob-safe)."""
    return "t" + uuid.uuid4().hex[:16]


def redis_qdrant_settings(prefix: str, **overrides: Any) -> dict[str, Any]:
    """``MemoryConfig`` keywords for a redis_qdrant store isolated under ``prefix``."""
    settings: dict[str, Any] = {
        "backend": "redis_qdrant",
        "redis_url": redis_url(),
        "qdrant_url": qdrant_url(),
        "qdrant_collection_prefix": prefix,
        "redis_timeout": 5.0,
        "qdrant_timeout": 10.0,
    }
    settings.update(overrides)
    return settings


async def cleanup(prefix: str) -> None:
    """Delete every Redis key and Qdrant collection under ``prefix``."""
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(redis_url())
    try:
        # The prefix is ours and made of [a-z0-9]: safe to use as a SCAN pattern.
        keys = [k async for k in client.scan_iter(match=f"{prefix}:*", count=1000)]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()
    url = qdrant_url()
    if url.startswith(("http://", "https://")):
        from qdrant_client import AsyncQdrantClient

        q = AsyncQdrantClient(url=url, check_compatibility=False)
        try:
            for c in (await q.get_collections()).collections:
                if c.name.startswith(prefix + "_"):
                    await q.delete_collection(c.name)
        finally:
            await q.close()


@asynccontextmanager
async def isolated_store(**overrides: Any) -> AsyncIterator[RedisQdrantStore]:
    """A connected store of ``redis_qdrant_settings`` with ``overrides``, under a prefix of its
    own, closed and cleaned up afterwards."""
    from actrone_pg.config import MemoryConfig
    from actrone_pg.stores.redis_qdrant import from_config

    prefix = unique_prefix()
    store = from_config(MemoryConfig(**redis_qdrant_settings(prefix, **overrides)))
    await store.setup()
    try:
        yield store
    finally:
        await store.close()
        await cleanup(prefix)


@pytest.fixture
async def store_redis_qdrant() -> AsyncIterator[RedisQdrantStore]:
    """A fresh, connected, empty Redis + Qdrant store (own key and collection prefix)."""
    from actrone_pg.config import MemoryConfig
    from actrone_pg.errors import StoreUnavailableError
    from actrone_pg.stores.redis_qdrant import from_config

    prefix = unique_prefix()
    store = from_config(MemoryConfig(**redis_qdrant_settings(prefix)))
    try:
        await store.setup()
    except StoreUnavailableError as exc:
        pytest.fail(
            f"{exc}\nStart Redis (redis-server --daemonize yes --port 6379) or point "
            "ACTRONE_TEST_REDIS_URL at one.",
            pytrace=False,
        )
    try:
        yield store
    finally:
        await store.close()
        await cleanup(prefix)
