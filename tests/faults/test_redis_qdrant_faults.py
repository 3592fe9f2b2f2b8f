"""Redis + Qdrant when Redis loses its data or cannot be reached (issue 13, finding 7).

Each test has a redis-server of its own on a free port (``private_redis``, no persistence), so
that FLUSHALL and restarts never touch the suite's shared Redis. Qdrant is local mode.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from actrone_pg import MemoryConfig, MemoryManager
from actrone_pg.embedders import HashingEmbedder
from actrone_pg.errors import StoreUnavailableError

pytestmark = [pytest.mark.redis, pytest.mark.qdrant]

OLD = {
    "a": ["the cellar door sticks in winter", "peanut allergy, carries an epipen", "likes jazz"],
    "b": ["prefers tea over coffee", "the cellar key is under the mat"],
}


async def manager(redis_url: str, prefix: str) -> MemoryManager:
    config = MemoryConfig(
        backend="redis_qdrant",
        redis_url=redis_url,
        qdrant_url=":memory:",
        qdrant_collection_prefix=prefix,
        redis_timeout=2.0,
    )
    return await MemoryManager.create(config, embedder=HashingEmbedder(64))


@pytest.fixture
async def mm(private_redis: Any) -> AsyncIterator[MemoryManager]:
    m = await manager(private_redis.url, "t" + uuid.uuid4().hex[:12])
    try:
        yield m
    finally:
        await m.close()


async def fill(mm: MemoryManager) -> dict[str, list[str]]:
    return {agent: [await mm.inject_memory(agent, text) for text in texts]
            for agent, texts in OLD.items()}  # fmt: skip


async def flushall(redis_url: str) -> None:
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(redis_url)
    try:
        await client.flushall()  # the test's own server, never the shared one
    finally:
        await client.aclose()


async def test_a_write_first_after_redis_lost_its_data_leaves_every_memory_visible(
    mm: MemoryManager, private_redis: Any
) -> None:
    ids = await fill(mm)
    await flushall(private_redis.url)
    # The first call for each agent after the loss is a write: before the fix it made the
    # agent's index non-empty, and the older memories stayed invisible.
    new_a = await mm.inject_memory("a", "moved to the coast in spring")
    new_b = await mm.inject_memory("b", "allergic to cats")
    for agent, old in ids.items():
        for memory_id in old:
            memory = await mm.get_memory(agent, memory_id)
            assert memory is not None and memory.agent_id == agent
    assert await mm.count_memories("a") == 4
    assert await mm.count_memories("b") == 3
    assert {m.id for m in await mm.search_memories("a", "cellar door")} >= {ids["a"][0]}
    assert {m.id for m in await mm.search_memories("b", "cellar key")} >= {ids["b"][1]}
    assert await mm.get_memory("a", new_a) is not None
    assert await mm.get_memory("b", new_b) is not None
    assert await mm.get_memory("b", ids["a"][0]) is None  # still scoped by agent


async def test_a_redis_restart_without_persistence_is_recovered_by_the_next_call(
    mm: MemoryManager, private_redis: Any
) -> None:
    ids = await fill(mm)
    # In threads, so that the event loop sees the old connections close, as it would while a
    # real server restarts. No call in between: the next call meets the pool's stale
    # connections, and must still succeed (spec §8), and find every memory (finding 7).
    await asyncio.to_thread(private_redis.kill9)
    await asyncio.to_thread(private_redis.start)  # same port, empty: no persistence
    new = await mm.inject_memory("a", "moved to the coast in spring")
    assert await mm.count_memories("a") == 4
    found = {m.id for m in await mm.search_memories("a", "jazz cellar peanut coast", limit=10)}
    assert found == {*ids["a"], new}


async def test_listing_first_after_redis_lost_its_data_lists_every_memory(
    mm: MemoryManager, private_redis: Any
) -> None:
    ids = await fill(mm)
    await flushall(private_redis.url)
    # The listing reads Qdrant points the Redis index names as current: it re-indexes first.
    page = await mm.list_memories("a")
    assert {m.id for m in page.items} == set(ids["a"])


async def test_the_reindexed_statistics_equal_those_of_a_store_that_never_lost_them(
    private_redis: Any,
) -> None:
    lost = await manager(private_redis.url, "t" + uuid.uuid4().hex[:12])
    try:
        await fill(lost)
        await flushall(private_redis.url)
        await lost.inject_memory("a", "the cellar floods in spring")  # first call: a write
        control = await manager(private_redis.url, "t" + uuid.uuid4().hex[:12])
        try:
            await fill(control)
            await control.inject_memory("a", "the cellar floods in spring")
            for query in ("cellar", "cellar door spring", "jazz"):
                got = await lost.search_memories("a", query, explain=True)
                want = await control.search_memories("a", query, explain=True)
                assert [(m.id, m.explain) for m in got] == [(m.id, m.explain) for m in want]
        finally:
            await control.close()
    finally:
        await lost.close()


async def test_a_refused_connection_says_refused_not_timed_out(private_redis: Any) -> None:
    url = private_redis.url
    private_redis.kill9()
    config = MemoryConfig(
        backend="redis_qdrant", redis_url=url, qdrant_url=":memory:", redis_timeout=5.0
    )
    with pytest.raises(StoreUnavailableError, match="refused the connection") as caught:
        await MemoryManager.create(config, embedder=HashingEmbedder(64))
    assert "did not answer" not in str(caught.value)


async def test_a_frozen_redis_says_it_did_not_answer_in_time(
    mm: MemoryManager, private_redis: Any
) -> None:
    await mm.count_memories("a")
    private_redis.freeze()
    try:
        with pytest.raises(StoreUnavailableError, match=r"did not answer within 2 s"):
            await mm.count_memories("a")
    finally:
        private_redis.thaw()
