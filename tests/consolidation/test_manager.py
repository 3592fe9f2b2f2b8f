"""MemoryManager.consolidate_session, background consolidation, and the sweeper's hook (§9.1)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import pytest

from actrone_pg import ConfigurationError, ConsolidationError, MemoryConfig, MemoryManager
from actrone_pg._manager import consolidating
from actrone_pg.consolidation import ConsolidatedMemory, ConsolidationContext
from actrone_pg.consolidation.run import MARKER, memory_id
from actrone_pg.embedders import HashingEmbedder
from actrone_pg.models import Memory, Turn
from actrone_pg.stores import Store
from actrone_pg.stores.memory import InMemoryStore

CFG = MemoryConfig(backend="memory", embedding_provider="hashing", consolidate_after_turns=0)

FACTS = [
    "I moved to Oslo last March with my wife Anna.",
    "My daughter Ida starts school on Monday.",
    "I prefer green tea over coffee in the morning.",
    "We adopted a dog named Rex in 2024.",
    "I work as a nurse at the Ullevål hospital.",
]


async def make(store: Store | None = None, using: Any = None, **cfg: Any) -> MemoryManager:
    return await MemoryManager.create(
        CFG.replace(**cfg),
        store=store or InMemoryStore(),
        embedder=HashingEmbedder(),
        consolidator=using,
    )


async def talk(mm: MemoryManager, session: str, lines: Sequence[str], agent: str = "ag") -> None:
    for i, line in enumerate(lines):
        await mm.store_turn(
            agent, session, line, "Thanks for telling me.", turn_id=f"{session}-{i}"
        )


async def settle(mm: MemoryManager) -> None:
    """Wait for the background consolidations running now."""
    while mm._consolidation._consolidating:
        await asyncio.gather(*mm._consolidation._consolidating.values(), return_exceptions=True)


async def all_memories(mm: MemoryManager, agent: str = "ag") -> list[Memory]:
    return await mm.search_memories(agent, "user moved tea dog nurse school Oslo", limit=100)


class Flaky:
    """Fails ``failures`` times, then consolidates extractively; records what it was given."""

    name = "flaky"

    def __init__(self, failures: int = 1, gate: asyncio.Event | None = None) -> None:
        from actrone_pg.consolidation import ExtractiveConsolidator

        self.failures = failures
        self.gate = gate
        self.seen: list[list[str]] = []
        self.inner = ExtractiveConsolidator()

    async def consolidate(
        self, turns: Sequence[Turn], context: ConsolidationContext
    ) -> list[ConsolidatedMemory]:
        self.seen.append([t.id for t in turns])
        if self.gate is not None:
            await self.gate.wait()
        if self.failures > 0:
            self.failures -= 1
            raise RuntimeError("model server down")
        return await self.inner.consolidate(turns, context)


async def test_consolidate_session_writes_memories_with_their_lineage() -> None:
    mm = await make()
    await talk(mm, "s", ["Hi!", *FACTS])
    ids = await mm.consolidate_session("ag", "s")
    turns = {t.id: t for t in await mm.get_recent_turns("ag", "s")}
    assert len(ids) == len(FACTS)  # one per informative turn; "Hi!" leaves nothing
    for mid, fact, turn_id in zip(ids, FACTS, [f"s-{i}" for i in range(1, 6)], strict=True):
        m = await mm.get_memory("ag", mid)
        assert m is not None
        assert m.content == f"User: {fact}"
        assert m.source == "consolidated" and m.source_turn_ids == (turn_id,)
        assert m.session_id == "s" and m.created_at == turns[turn_id].created_at
        assert m.metadata == {"consolidator": "extractive"}
        assert mid == memory_id("ag", (turn_id,), m.content)
    session = await mm.get_session("ag", "s")
    assert session is not None and session.metadata[MARKER]["turn_id"] == "s-5"
    await mm.close()


async def test_consolidating_again_never_duplicates() -> None:
    mm = await make()
    await talk(mm, "s", FACTS)
    first = await mm.consolidate_session("ag", "s")
    assert await mm.consolidate_session("ag", "s") == []  # nothing new
    # Forget which turns were done (a marker lost after a crash): same ids, no copies.
    await mm.set_session_metadata("ag", "s", {MARKER: None})
    assert await mm.consolidate_session("ag", "s") == first
    assert await mm.count_memories("ag") == len(FACTS)
    # New turns: only they are consolidated.
    await mm.store_turn("ag", "s", "I'm allergic to peanuts since 2019.", "Noted.", turn_id="new")
    (mid,) = await mm.consolidate_session("ag", "s")
    m = await mm.get_memory("ag", mid)
    assert m is not None and m.source_turn_ids == ("new",)
    assert await mm.count_memories("ag") == len(FACTS) + 1
    await mm.close()


async def test_a_failed_consolidation_loses_nothing_and_is_retried() -> None:
    flaky = Flaky(failures=1)
    mm = await make(using=flaky)
    await talk(mm, "s", FACTS)
    with pytest.raises(ConsolidationError, match="RuntimeError: model server down") as info:
        await mm.consolidate_session("ag", "s")
    assert isinstance(info.value.__cause__, RuntimeError)
    assert await mm.count_memories("ag") == 0
    session = await mm.get_session("ag", "s")
    assert session is not None and MARKER not in session.metadata
    assert len(await mm.consolidate_session("ag", "s")) == len(FACTS)
    assert flaky.seen[0] == flaky.seen[1]  # the same turns were offered again
    await mm.close()


async def test_a_proposal_the_manager_refuses_writes_nothing() -> None:
    class Bad:
        name = "bad"

        async def consolidate(self, turns: Sequence[Turn], context: Any) -> Any:
            return [ConsolidatedMemory("fine"), ConsolidatedMemory("x", tags=("",))]

    mm = await make(using=Bad())
    await talk(mm, "s", FACTS[:1])
    with pytest.raises(ConsolidationError, match="refuses"):
        await mm.consolidate_session("ag", "s")
    assert await mm.count_memories("ag") == 0
    await mm.close()


async def test_the_maintenance_lock_keeps_it_to_one_process() -> None:
    store = InMemoryStore()
    a, b = await make(store), await make(store)
    await talk(a, "s", FACTS)
    token = await b.try_lock("ag")
    assert token is not None
    with pytest.raises(ConsolidationError, match="maintenance lock is held"):
        await a.consolidate_session("ag", "s")
    assert await b.release_lock("ag", token)
    assert len(await a.consolidate_session("ag", "s")) == len(FACTS)
    assert await b.try_lock("ag") is not None  # released again after the run
    await a.close()
    await b.close()


async def test_without_a_consolidator_it_is_a_configuration_error() -> None:
    mm = await make(consolidator="none")
    with pytest.raises(ConfigurationError, match="consolidator"):
        await mm.consolidate_session("ag", "s")
    await mm.close()


async def test_background_consolidation_after_n_turns() -> None:
    mm = await make(consolidate_after_turns=3, consolidate_cooldown_seconds=0)
    await talk(mm, "s", FACTS[:2])
    await settle(mm)
    assert await mm.count_memories("ag") == 0
    await mm.store_turn("ag", "s", FACTS[2], "Nice.", turn_id="s-2")
    await settle(mm)
    assert sorted(m.source_turn_ids for m in await all_memories(mm)) == [
        ("s-0",),
        ("s-1",),
        ("s-2",),
    ]
    await mm.close()


async def test_the_cooldown_holds_the_next_background_run_back() -> None:
    mm = await make(consolidate_after_turns=2, consolidate_cooldown_seconds=3600)
    await talk(mm, "s", FACTS[:2])
    await settle(mm)
    assert await mm.count_memories("ag") == 2
    await mm.store_turn("ag", "s", FACTS[2], "Nice.", turn_id="x2")
    await mm.store_turn("ag", "s", FACTS[3], "Nice.", turn_id="x3")
    await settle(mm)
    assert await mm.count_memories("ag") == 2  # within the cooldown: pending, not lost
    assert len(await mm.consolidate_session("ag", "s")) == 2  # an explicit call is not held
    await mm.close()


async def test_the_cooldown_yields_before_turns_would_be_trimmed() -> None:
    mm = await make(
        consolidate_after_turns=2, consolidate_cooldown_seconds=3600, max_session_turns=4
    )
    await talk(mm, "s", FACTS[:2])
    await settle(mm)
    await talk(mm, "t", [])  # nothing
    for i in (2, 3, 4):
        await mm.store_turn("ag", "s", FACTS[i], "Nice.", turn_id=f"s-{i}")
        await settle(mm)
    assert await mm.count_memories("ag") == 5
    await mm.close()


async def test_a_background_failure_is_logged_and_its_turns_stay_pending(
    caplog: pytest.LogCaptureFixture,
) -> None:
    mm = await make(
        using=Flaky(failures=1), consolidate_after_turns=2, consolidate_cooldown_seconds=0
    )
    caplog.set_level(logging.WARNING, "actrone_pg.manager")
    await talk(mm, "s", FACTS[:2])
    await settle(mm)
    assert "background consolidation of session 's' of agent 'ag' failed" in caplog.text
    assert "model server down" in caplog.text
    assert await mm.count_memories("ag") == 0
    # The retry: the turns are still pending.
    assert len(await mm.consolidate_session("ag", "s")) == 2
    await mm.close()


async def test_store_turn_does_not_wait_for_the_consolidation_and_close_awaits_it() -> None:
    gate = asyncio.Event()
    flaky = Flaky(failures=0, gate=gate)
    mm = await make(using=flaky, consolidate_after_turns=1, consolidate_cooldown_seconds=0)
    await mm.store_turn("ag", "s", FACTS[0], "Nice.", turn_id="t0")  # returns, gate closed
    assert len(mm._consolidation._consolidating) == 1
    asyncio.get_running_loop().call_later(0.05, gate.set)
    await mm.close()  # waits for the run
    assert not mm._consolidation._consolidating
    assert await mm.store.count_memories("ag") == 1


async def test_close_cancels_a_consolidation_that_does_not_finish(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(consolidating, "_CLOSE_GRACE_SECONDS", 0.05)
    flaky = Flaky(failures=0, gate=asyncio.Event())  # never opened
    store = InMemoryStore()
    mm = await make(store, flaky, consolidate_after_turns=1, consolidate_cooldown_seconds=0)
    await mm.store_turn("ag", "s", FACTS[0], "Nice.", turn_id="t0")
    await mm.close()
    assert not mm._consolidation._consolidating
    assert await store.count_memories("ag") == 0
    # The lock was released on cancellation: another manager consolidates the turn.
    other = await make(store)
    assert len(await other.consolidate_session("ag", "s")) == 1
    await other.close()


@pytest.mark.parametrize("value", ["sometimes", ""])
def test_config_checks_the_consolidator(value: str) -> None:
    with pytest.raises(ConfigurationError, match="consolidator"):
        MemoryConfig(consolidator=value)


def test_the_llm_consolidator_needs_its_server_and_hides_its_key() -> None:
    with pytest.raises(ConfigurationError, match="consolidator_api_url"):
        MemoryConfig(consolidator="llm", consolidator_model="m")
    cfg = MemoryConfig(
        consolidator="llm",
        consolidator_model="m",
        consolidator_api_url="http://u:pw@h/v1",
        consolidator_api_key="sk-secret",
    )
    assert "sk-secret" not in repr(cfg) and "pw" not in repr(cfg)
    with pytest.raises(ConfigurationError, match="consolidate_after_turns"):
        MemoryConfig(consolidate_after_turns=-1)
