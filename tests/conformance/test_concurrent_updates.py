"""Concurrent ``update_memory`` of one memory: every update lands, as its own version (§9.2).

Updates of one memory are serialised by the store (a row lock on PostgreSQL, a per-memory lock
on Redis, a lock in memory), and each builds its version from the one before it: none is
refused for having raced another, fields it does not change keep the previous version's values,
and the history is one line of versions. In one process on every backend, and across processes
on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from typing import Any

import pytest

from actrone_pg.config import MemoryConfig
from actrone_pg.manager import MemoryManager
from actrone_pg.models import Memory
from actrone_pg.stores.base import Store
from tests.helpers import FixedEmbedder

UPDATES = 8


def _embedder() -> FixedEmbedder:
    # A model server takes a moment to answer: each update yields while its text is embedded.
    return FixedEmbedder(dimensions=16, name="fixed-slow", delay=0.005)


async def _manager(store: Store) -> MemoryManager:
    cfg = MemoryConfig(backend=store.backend, embedding_provider="hashing", consolidator="none")  # type: ignore[arg-type]
    return await MemoryManager.create(cfg, store=store, embedder=_embedder())


def _change(i: int) -> dict[str, Any]:
    """Update ``i``: even ones change the content, odd ones only the importance and tags."""
    if i % 2 == 0:
        return {"content": f"The user's locker code is {1000 + i}."}
    return {"importance": round(0.01 * i, 2), "tags": [f"tag-{i}"]}


def _assert_linear(history: list[Memory], updates: int) -> None:
    assert [m.version for m in history] == list(range(1, updates + 2))
    for before, after in zip(history, history[1:], strict=False):
        assert before.valid_to is not None and before.valid_to == after.valid_from
        # Built from the version before it: what this update did not change is carried over.
        if after.content != before.content:
            assert after.importance == before.importance and after.tags == before.tags
        else:
            assert after.importance != before.importance or after.tags != before.tags
    assert history[-1].valid_to is None
    # Every update is one version of its own: each content set, each importance set, once.
    changes = [_change(i) for i in range(updates)]
    contents = [m.content for m in history]
    new_contents = [c for k, c in enumerate(contents[1:]) if c != contents[k]]
    assert sorted(new_contents) == sorted(c["content"] for c in changes if "content" in c)
    importances = [m.importance for m in history]
    new_importances = [x for k, x in enumerate(importances[1:]) if x != importances[k]]
    assert sorted(new_importances) == sorted(c["importance"] for c in changes if "importance" in c)


@pytest.mark.parametrize("round_", range(3))
async def test_concurrent_updates_of_one_memory_all_land(store: Store, round_: int) -> None:
    mm = await _manager(store)
    mid = await mm.inject_memory("agent", "The user's locker code is 0000.", importance=0.5)
    results = await asyncio.gather(
        *(mm.update_memory("agent", mid, **_change(i)) for i in range(UPDATES))
    )
    assert sorted(r.version for r in results) == list(range(2, UPDATES + 2))
    history = await mm.memory_history("agent", mid)
    _assert_linear(history, UPDATES)
    current = await mm.get_memory("agent", mid)
    assert current is not None and current.version == UPDATES + 1
    assert current.content == history[-1].content
    assert await mm.count_memories("agent") == 1
    # Search sees the current version only.
    hits = await mm.search_memories("agent", current.content, limit=10)
    assert [(h.id, h.version) for h in hits] == [(mid, UPDATES + 1)]


def _update_in_a_process(dsn: str, schema: str, mid: str, i: int, barrier: Any) -> None:
    async def main() -> None:
        from actrone_pg.stores.postgres import PostgresSettings, PostgresStore

        store = PostgresStore(PostgresSettings(dsn, schema=schema, pool_max_size=2))
        await store.setup()
        try:
            mm = await _manager(store)
            barrier.wait()
            for k in range(3):
                await mm.update_memory("agent", mid, **_change(i + UPDATES * k))
        finally:
            await store.close()

    asyncio.run(main())


@pytest.mark.postgres
@pytest.mark.slow
async def test_concurrent_updates_across_processes_all_land(
    store_postgres: Store, postgres_dsn: str, postgres_schema: str
) -> None:
    mm = await _manager(store_postgres)
    mid = await mm.inject_memory("agent", "The user's locker code is 0000.", importance=0.5)
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(UPDATES)
    procs = [
        ctx.Process(
            target=_update_in_a_process, args=(postgres_dsn, postgres_schema, mid, i, barrier)
        )
        for i in range(UPDATES)
    ]
    for p in procs:
        p.start()
    await asyncio.gather(*(asyncio.to_thread(p.join, 240) for p in procs))
    assert [p.exitcode for p in procs] == [0] * UPDATES
    history = await mm.memory_history("agent", mid)
    _assert_linear(history, 3 * UPDATES)
