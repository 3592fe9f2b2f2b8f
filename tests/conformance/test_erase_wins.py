"""Erasure wins over every writer (spec §8, "Erasure"), on every backend.

Each writer is held at a point of its work (its embedding, or a store call of its) while
``erase_agent`` runs, from the same manager or from another one over the same store (as another
process would). Once the erase has returned nothing of the agent may be left, and the writer it
overtook raises :class:`LockLostError` instead of reporting success. Consolidation's own cases are
in ``test_erase_during_consolidation.py``.
"""

from __future__ import annotations

import asyncio
import io
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from actrone_pg.config import MemoryConfig
from actrone_pg.errors import LockLostError
from actrone_pg.export import export_agent, import_agent
from actrone_pg.manager import MemoryManager
from actrone_pg.stores.base import Store
from actrone_pg.stores.memory import InMemoryStore
from tests.erasure import Gate, GatedEmbedder, leftovers

AGENT = "erased-agent"
OTHER = "kept-agent"
ERASERS = pytest.mark.parametrize(
    "other_manager", [False, True], ids=["same-manager", "other-manager"]
)


async def _manager(store: Store, embedder: GatedEmbedder, **config: Any) -> MemoryManager:
    cfg = MemoryConfig(
        backend=store.backend,  # type: ignore[arg-type]
        embedding_provider="hashing",
        **config,
    )
    return await MemoryManager.create(cfg, store=store, embedder=embedder)


async def _managers(store: Store, other_manager: bool) -> tuple[MemoryManager, MemoryManager]:
    """The writer's manager and the eraser's (the same one, or another over the same store)."""
    mm = await _manager(store, GatedEmbedder())
    eraser = await _manager(store, GatedEmbedder()) if other_manager else mm
    await mm.inject_memory(OTHER, "a note of the agent that stays", memory_id="kept")
    await mm.store_turn(OTHER, "s1", "hello", "hi", turn_id="kept-turn")
    return mm, eraser


async def _assert_erased(store: Store, mm: MemoryManager) -> None:
    left = await leftovers(store, AGENT)
    assert left == dict.fromkeys(left, 0), left
    assert await mm.count_memories(AGENT) == 0
    assert await mm.list_sessions(AGENT) == []
    # The other agent is untouched.
    assert await mm.get_memory(OTHER, "kept") is not None
    assert [t.id for t in await mm.get_recent_turns(OTHER, "s1")] == ["kept-turn"]


async def _export() -> list[str]:
    """An export of an agent: 6 memories (one of 3 versions), 2 sessions of 10 turns."""
    async with await _manager(InMemoryStore(), GatedEmbedder()) as source:
        await source.inject_memories("source", [f"fact number {i}" for i in range(5)])
        await source.inject_memory("source", "lives in Lisbon", memory_id="home")
        await source.update_memory("source", "home", content="lives in Porto")
        await source.update_memory("source", "home", importance=0.9)
        for s in ("s1", "s2"):
            for i in range(10):
                await source.store_turn("source", s, f"question {i}", f"answer {i}")
        await source.set_session_metadata("source", "s2", {"channel": "web"})
        out = io.StringIO()
        await export_agent(source, "source", out)
    return out.getvalue().splitlines()


@ERASERS
@pytest.mark.parametrize(
    ("method", "at"),
    [("upsert_memories", 1), ("update_memory", 2), ("append_turn", 5)],
    ids=["first-versions", "later-versions", "turns"],
)
async def test_erase_during_an_import(
    store: Store, other_manager: bool, method: str, at: int
) -> None:
    lines = await _export()
    mm, eraser = await _managers(store, other_manager)
    # Held before its at-th call of the method: the writes before it have landed.
    gate = Gate(store, method, at)
    task = asyncio.create_task(import_agent(mm, lines, agent_id=AGENT))
    await gate.entered.wait()
    await eraser.erase_agent(AGENT)
    gate.release.set()
    with pytest.raises(LockLostError, match="erased while it was being imported"):
        await task
    await _assert_erased(store, mm)


@ERASERS
async def test_erase_during_an_import_that_embeds(store: Store, other_manager: bool) -> None:
    lines = await _export()
    mm, eraser = await _managers(store, other_manager)
    assert isinstance(mm.embedder, GatedEmbedder)
    mm.embedder.armed = True
    task = asyncio.create_task(import_agent(mm, lines, agent_id=AGENT))
    await mm.embedder.entered.wait()
    await eraser.erase_agent(AGENT)
    mm.embedder.release.set()
    with pytest.raises(LockLostError):
        await task
    await _assert_erased(store, mm)


@ERASERS
async def test_erase_during_an_inject(store: Store, other_manager: bool) -> None:
    mm, eraser = await _managers(store, other_manager)
    await mm.inject_memory(AGENT, "written before the erase")
    assert isinstance(mm.embedder, GatedEmbedder)
    mm.embedder.armed = True
    task = asyncio.create_task(mm.inject_memories(AGENT, ["first", "second", "third"]))
    await mm.embedder.entered.wait()
    await eraser.erase_agent(AGENT)
    mm.embedder.release.set()
    with pytest.raises(LockLostError, match="erased while this write was under way"):
        await task
    await _assert_erased(store, mm)


@ERASERS
async def test_erase_during_an_update(store: Store, other_manager: bool) -> None:
    mm, eraser = await _managers(store, other_manager)
    await mm.inject_memory(AGENT, "lives in Lisbon", memory_id="home")
    assert isinstance(mm.embedder, GatedEmbedder)
    mm.embedder.armed = True
    task = asyncio.create_task(mm.update_memory(AGENT, "home", content="lives in Porto"))
    await mm.embedder.entered.wait()
    await eraser.erase_agent(AGENT)
    mm.embedder.release.set()
    with pytest.raises(LockLostError):
        await task
    await _assert_erased(store, mm)


async def test_a_writer_that_starts_after_the_erase_is_not_refused(store: Store) -> None:
    mm, _ = await _managers(store, False)
    await mm.inject_memory(AGENT, "before", memory_id="m1")
    await mm.erase_agent(AGENT)
    await mm.inject_memory(AGENT, "after", memory_id="m2")
    updated = await mm.update_memory(AGENT, "m2", content="after, updated")
    assert (updated.version, await mm.count_memories(AGENT)) == (2, 1)
    await mm.erase_agent(AGENT)
    await _assert_erased(store, mm)


async def test_erase_during_the_session_sweep(store: Store) -> None:
    # The sweeper lists the expired session, the erase comes, then the sweeper consolidates
    # (under the maintenance lock, fenced) and deletes it: nothing of the agent comes back.
    mm = await _manager(store, GatedEmbedder(), session_ttl_hours=0.3 / 3600)
    for i in range(3):
        await mm.store_turn(AGENT, "s1", f"I like tea number {i}", "Noted.")
    await asyncio.sleep(0.5)
    gate = Gate(store, "expired_sessions")
    task = asyncio.create_task(mm.sweep_expired_sessions())
    await gate.entered.wait()
    await mm.erase_agent(AGENT)
    gate.release.set()
    assert await task == 0
    left = await leftovers(store, AGENT)
    assert left == dict.fromkeys(left, 0), left


async def test_erase_beside_the_sweep_of_expired_memories(store: Store) -> None:
    mm = await _manager(store, GatedEmbedder())
    soon = datetime.now(UTC) + timedelta(seconds=0.3)
    await mm.inject_memories(
        AGENT, [{"content": f"fact {i}", "expires_at": soon} for i in range(3)] + ["stays"]
    )
    await asyncio.sleep(0.5)
    await asyncio.gather(mm.sweep_expired(), mm.erase_agent(AGENT))
    await mm.sweep_expired()
    left = await leftovers(store, AGENT)
    assert left == dict.fromkeys(left, 0), left


async def test_delete_of_an_erased_agents_memory_leaves_nothing(store: Store) -> None:
    mm = await _manager(store, GatedEmbedder())
    await mm.inject_memory(AGENT, "a fact", memory_id="m1")
    await mm.erase_agent(AGENT)
    assert await mm.delete_memory(AGENT, "m1") is False
    assert await mm.delete_memory(AGENT, "never-there") is False
    left = await leftovers(store, AGENT)
    assert left == dict.fromkeys(left, 0), left
