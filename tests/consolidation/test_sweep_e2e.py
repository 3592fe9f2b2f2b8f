"""Done-when of issue 14, item 1, on every backend: a session of 45 turns, swept after its TTL,
leaves its content in long-term memory with lineage. And the sweeper's hook in detail."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import pytest

from actrone_pg import MemoryConfig, MemoryManager
from actrone_pg.consolidation import ConsolidatedMemory
from actrone_pg.consolidation.run import memory_id
from actrone_pg.embedders import HashingEmbedder
from actrone_pg.models import Turn
from actrone_pg.stores import Store
from actrone_pg.stores.memory import InMemoryStore

TTL_SECONDS = 2.0
CFG = MemoryConfig(
    backend="memory",
    embedding_provider="hashing",
    session_ttl_hours=TTL_SECONDS / 3600,
    consolidate_after_turns=20,
    consolidate_cooldown_seconds=0,
)
PEOPLE = ["Anna", "Bjorn", "Carla", "Dmitri", "Elif", "Farid", "Greta", "Hiro", "Ines"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]


def line(i: int) -> str:
    return f"I met my friend {PEOPLE[i % 9]} on {DAYS[i % 5]} to plan trip number {i}."


async def settle(mm: MemoryManager) -> None:
    while mm._consolidation._consolidating:
        await asyncio.gather(*mm._consolidation._consolidating.values(), return_exceptions=True)


async def test_a_session_of_45_turns_swept_after_its_ttl_leaves_its_content_with_lineage(
    store: Store,
) -> None:
    mm = await MemoryManager.create(CFG, store=store, embedder=HashingEmbedder())
    try:
        for i in range(45):
            await mm.store_turn("ag", "long", line(i), "Have fun!", turn_id=f"turn-{i}")
            await settle(mm)  # a conversation's turns come seconds apart
        # Turns 1-40 were consolidated in the background, 20 at a time; 41-45 are pending.
        assert await mm.count_memories("ag") == 40
        await asyncio.sleep(TTL_SECONDS + 0.5)
        await mm.sweep_expired_sessions()  # consolidates 41-45, then deletes the session
        assert await mm.get_recent_turns("ag", "long") == []
        assert await mm.count_memories("ag") == 45
        for i in range(45):
            content = f"User: {line(i)}"
            m = await mm.get_memory("ag", memory_id("ag", (f"turn-{i}",), content))
            assert m is not None, i
            assert (m.content, m.source, m.source_turn_ids) == (
                content,
                "consolidated",
                (f"turn-{i}",),
            )
        found = await mm.search_memories("ag", "friend Carla Wednesday trip", limit=3)
        assert found[0].content == f"User: {line(2)}"
    finally:
        await mm.close()


async def test_a_turn_in_an_expired_session_first_consolidates_what_it_had(store: Store) -> None:
    """A conversation resumed after its session's TTL, before any sweeper came: the new turn
    restarts the session, and the old turns are in long-term memory first, with lineage."""
    mm = await MemoryManager.create(CFG, store=store, embedder=HashingEmbedder())
    try:
        for i in range(3):
            await mm.store_turn("ag", "resumed", line(i), "Noted.", turn_id=f"old-{i}")
        await mm.store_turn("ag", "live", line(7), "Noted.", turn_id="live-0")
        await settle(mm)
        assert await mm.count_memories("ag") == 0  # fewer than consolidate_after_turns
        await asyncio.sleep(TTL_SECONDS + 0.5)
        await mm.store_turn("ag", "resumed", line(10), "Welcome back.", turn_id="new-0")
        assert [t.id for t in await mm.get_recent_turns("ag", "resumed")] == ["new-0"]
        assert await mm.count_memories("ag") == 3
        for i in range(3):
            content = f"User: {line(i)}"
            m = await mm.get_memory("ag", memory_id("ag", (f"old-{i}",), content))
            assert m is not None and m.source_turn_ids == (f"old-{i}",), i
        # A second turn in the restarted session reads nothing again and writes nothing more.
        await mm.store_turn("ag", "resumed", line(11), "Sure.", turn_id="new-1")
        assert await mm.count_memories("ag") == 3
    finally:
        await mm.close()


class Failing:
    name = "failing"

    async def consolidate(self, turns: Sequence[Turn], context: Any) -> list[ConsolidatedMemory]:
        raise RuntimeError("model server down")


async def test_the_sweeper_keeps_a_session_whose_consolidation_failed(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = CFG.replace(consolidate_after_turns=0)
    failing = await MemoryManager.create(
        cfg, store=store, embedder=HashingEmbedder(), consolidator=Failing()
    )
    working = await MemoryManager.create(cfg, store=store, embedder=HashingEmbedder())
    try:
        await failing.store_turn("ag", "s", line(1), "ok", turn_id="a")
        await failing.store_turn("ag", "t", line(2), "ok", turn_id="b")
        await asyncio.sleep(TTL_SECONDS + 0.5)
        caplog.set_level(logging.WARNING, "actrone_pg.manager")
        assert await failing.sweep_expired_sessions() == 0
        assert "kept expired session" in caplog.text and "model server down" in caplog.text
        assert await store.count_memories("ag") == 0
        # The next sweep, with a consolidator that works, keeps the content and removes them.
        assert await working.sweep_expired_sessions() == 2
        assert await working.count_memories("ag") == 2
        assert await store.expired_sessions(ttl_seconds=cfg.session_ttl_seconds, limit=10) == []
    finally:
        await failing.close()
        await working.close()


async def test_a_session_revived_while_it_is_consolidated_is_not_deleted() -> None:
    store = InMemoryStore()
    mm = await MemoryManager.create(
        CFG.replace(consolidate_after_turns=0), store=store, embedder=HashingEmbedder()
    )
    await mm.store_turn("ag", "s", line(1), "ok", turn_id="a")
    await asyncio.sleep(TTL_SECONDS + 0.2)
    assert await store.expired_sessions(ttl_seconds=TTL_SECONDS, limit=10) == [("ag", "s")]
    await mm.store_turn("ag", "s", line(2), "ok", turn_id="b")  # revived
    assert not await store.delete_expired_session("ag", "s", ttl_seconds=TTL_SECONDS)
    assert [t.id for t in await mm.get_recent_turns("ag", "s")] == ["b"]
    await mm.close()


async def test_without_a_consolidator_the_sweeper_deletes_without_reading() -> None:
    store = InMemoryStore()
    mm = await MemoryManager.create(
        CFG.replace(consolidator="none"), store=store, embedder=HashingEmbedder()
    )
    await mm.store_turn("ag", "s", line(1), "ok")
    await asyncio.sleep(TTL_SECONDS + 0.2)
    assert await mm.sweep_expired_sessions() == 1
    assert await store.count_memories("ag") == 0
    await mm.close()
