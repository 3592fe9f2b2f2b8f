"""Erasure wins over a consolidation that is running (spec §8, "Erasure"), on every backend.

A consolidation reads an agent's turns, asks its consolidator, embeds what it keeps and writes
memories and the session's marker; an ``erase_agent`` that lands in the middle must leave
nothing of the agent when the consolidation is done: no memory, statistic, lock or session.
The consolidation here is really running: its embedder waits on a gate while the erase happens
(or yields, for the erase issued at the same moment), in the same manager, in another manager
over the same store (as another process would: it cannot stop the run, only the store can
refuse its writes), and for the background consolidation that ``store_turn`` starts.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from actrone_pg.config import MemoryConfig
from actrone_pg.errors import ConsolidationError
from actrone_pg.manager import MemoryManager
from actrone_pg.stores.base import Store
from tests.erasure import GatedEmbedder, leftovers

AGENT = "erased-agent"
OTHER = "kept-agent"
LINES = [
    "I moved to Oslo last March with my wife Anna.",
    "My daughter Ida starts school on Monday.",
    "I prefer green tea over coffee in the morning.",
    "We adopted a dog named Rex in 2024.",
    "I work as a nurse at the Ullevål hospital.",
    "My brother Per lives in Bergen and visits in June.",
    "I am allergic to peanuts, so no satay for me.",
    "Our flat is on the fourth floor near Grünerløkka.",
    "I play the violin in a small orchestra on Thursdays.",
    "My favourite book is The Wind-Up Bird Chronicle.",
]


async def _manager(store: Store, embedder: GatedEmbedder, **config: Any) -> MemoryManager:
    cfg = MemoryConfig(
        backend=store.backend,  # type: ignore[arg-type]
        embedding_provider="hashing",
        consolidator="extractive",
        consolidate_after_turns=config.pop("consolidate_after_turns", 0),
        consolidate_cooldown_seconds=0,
        **config,
    )
    return await MemoryManager.create(cfg, store=store, embedder=embedder)


async def _talk(mm: MemoryManager, agent: str, turns: int = len(LINES)) -> None:
    for i, line in enumerate(LINES[:turns]):
        await mm.store_turn(agent, "s1", line, "Noted, thank you.", turn_id=f"{agent}-{i}")


async def _assert_erased(store: Store, mm: MemoryManager) -> None:
    left = await leftovers(store, AGENT)
    assert left == dict.fromkeys(left, 0), left
    assert await mm.count_memories(AGENT) == 0
    assert await mm.get_recent_turns(AGENT, "s1") == []
    assert await mm.list_sessions(AGENT) == []
    # The other agent is untouched.
    assert len(await mm.get_recent_turns(OTHER, "s1")) == 2


async def _finish(task: asyncio.Task[Any]) -> None:
    """The consolidation ends with nothing written (``[]``) or a ConsolidationError."""
    try:
        await task
    except ConsolidationError as exc:
        assert "erased" in str(exc) or "lock" in str(exc), exc


@pytest.mark.parametrize("other_manager", [False, True], ids=["same-manager", "other-manager"])
async def test_erase_while_the_consolidation_embeds(store: Store, other_manager: bool) -> None:
    embedder = GatedEmbedder()
    mm = await _manager(store, embedder)
    eraser = await _manager(store, GatedEmbedder()) if other_manager else mm
    await _talk(mm, AGENT)
    await _talk(mm, OTHER, 2)
    embedder.armed = True
    task = asyncio.create_task(mm.consolidate_session(AGENT, "s1"))
    await embedder.entered.wait()
    await eraser.erase_agent(AGENT)
    embedder.release.set()
    await _finish(task)
    await _assert_erased(store, mm)


@pytest.mark.parametrize("other_manager", [False, True], ids=["same-manager", "other-manager"])
async def test_erase_at_the_moment_the_consolidation_starts(
    store: Store, other_manager: bool
) -> None:
    embedder = GatedEmbedder()
    mm = await _manager(store, embedder)
    eraser = await _manager(store, GatedEmbedder()) if other_manager else mm
    await _talk(mm, AGENT)
    await _talk(mm, OTHER, 2)
    task = asyncio.create_task(mm.consolidate_session(AGENT, "s1"))
    await asyncio.sleep(0)  # the consolidation has started; the erase does not wait for it
    await eraser.erase_agent(AGENT)
    await _finish(task)
    await _assert_erased(store, mm)


@pytest.mark.parametrize("other_manager", [False, True], ids=["same-manager", "other-manager"])
async def test_erase_during_a_background_consolidation(store: Store, other_manager: bool) -> None:
    embedder = GatedEmbedder()
    mm = await _manager(store, embedder, consolidate_after_turns=len(LINES))
    eraser = await _manager(store, GatedEmbedder()) if other_manager else mm
    await _talk(mm, OTHER, 2)
    embedder.armed = True
    await _talk(mm, AGENT)  # the last turn starts the background consolidation
    await embedder.entered.wait()
    assert list(mm._consolidation._consolidating) == [(AGENT, "s1")]
    erase = asyncio.create_task(eraser.erase_agent(AGENT))
    if other_manager:
        await erase
        embedder.release.set()
    else:
        # The manager's own erase stops its background run before it deletes.
        await asyncio.sleep(0)
        embedder.release.set()
        await erase
    await asyncio.gather(*mm._consolidation._consolidating.values(), return_exceptions=True)
    await _assert_erased(store, mm)
