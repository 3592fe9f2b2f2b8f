"""``inject_memories`` stores a repeated item once, like two calls would, on every backend."""

from __future__ import annotations

import pytest

from actrone_pg.config import MemoryConfig
from actrone_pg.errors import ValidationError
from actrone_pg.manager import MemoryManager
from actrone_pg.stores.base import Store


async def _manager(store: Store) -> MemoryManager:
    config = MemoryConfig(backend=store.backend, embedding_provider="hashing")
    return await MemoryManager.create(config, store=store)


async def test_identical_items_in_one_batch_store_one_memory(store: Store) -> None:
    mm = await _manager(store)
    ids = await mm.inject_memories("agent", ["Thanks!", "The user lives in Lisbon.", "Thanks!"])
    assert ids[0] == ids[2] != ids[1]
    assert await store.count_memories("agent") == 2
    # the same id two separate calls give, and a later call adds nothing
    assert await mm.inject_memory("agent", "Thanks!") == ids[0]
    assert await store.count_memories("agent") == 2
    hits = await mm.search_memories("agent", "thanks", limit=10)
    assert [h.content for h in hits] == ["Thanks!"]


async def test_the_later_copy_wins_as_a_second_call_would(store: Store) -> None:
    mm = await _manager(store)
    items = [
        {"content": "Prefers tea", "importance": 0.2},
        {"content": "Prefers tea", "importance": 0.9},
    ]
    first, second = await mm.inject_memories("agent", items)
    assert first == second
    got = await mm.get_memory("agent", first)
    assert got is not None and got.importance == 0.9


async def test_one_id_with_two_contents_fails_the_batch_and_writes_nothing(store: Store) -> None:
    mm = await _manager(store)
    items = [
        {"content": "Prefers tea", "memory_id": "m1"},
        {"content": "Prefers coffee", "memory_id": "m1"},
    ]
    with pytest.raises(ValidationError, match="'m1' is given twice"):
        await mm.inject_memories("agent", items)
    assert await store.count_memories("agent") == 0
