"""The LLM consolidator through the manager, against a real chat-completions server on loopback:
a contradiction supersedes the memory it contradicts; a failure writes nothing and is retried."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from actrone_pg import ConsolidationError, MemoryConfig, MemoryManager
from actrone_pg.consolidation.run import MARKER
from actrone_pg.embedders import HashingEmbedder
from actrone_pg.stores.memory import InMemoryStore
from tests.consolidation.chat_server import ChatServer


@pytest.fixture
def server() -> Iterator[ChatServer]:
    s = ChatServer()
    yield s
    s.close()


@pytest.fixture
async def mm(server: ChatServer) -> AsyncIterator[MemoryManager]:
    config = MemoryConfig(
        backend="memory",
        embedding_provider="hashing",
        relevance_threshold=0.1,
        consolidate_after_turns=0,
        consolidator="llm",
        consolidator_api_url=server.url,
        consolidator_model="test-model",
        consolidator_api_key="sk-test",
        consolidator_retries=2,
    )
    manager = await MemoryManager.create(config, store=InMemoryStore(), embedder=HashingEmbedder())
    manager.consolidator.backoff = 0.01  # type: ignore[union-attr]
    yield manager
    await manager.close()


async def test_a_contradicting_fact_updates_the_memory_instead_of_adding_one(
    mm: MemoryManager, server: ChatServer
) -> None:
    await mm.inject_memory("ag", "The user lives in Paris.", memory_id="m-home")
    await mm.store_turn("ag", "s", "I moved to Oslo last month.", "Welcome!", turn_id="t1")
    server.script = [
        {"json": {"summary": "", "facts": [{"content": "The user lives in Oslo.",
                                            "importance": 0.7, "turn_ids": ["t1"]}]}},
        {"json": {"action": "update", "memory_id": "m-home",
                  "content": "The user lives in Oslo (moved from Paris)."}},
    ]  # fmt: skip
    assert await mm.consolidate_session("ag", "s") == ["m-home"]
    assert await mm.count_memories("ag") == 1  # superseded, not added
    current = await mm.get_memory("ag", "m-home")
    assert current is not None
    assert current.content == "The user lives in Oslo (moved from Paris)."
    assert current.version == 2 and current.importance == 0.7
    assert current.metadata == {"consolidator": "llm:test-model", "source_turn_ids": ["t1"]}
    history = await mm.memory_history("ag", "m-home")
    assert [m.content for m in history] == [
        "The user lives in Paris.",
        "The user lives in Oslo (moved from Paris).",
    ]
    decide = server.user_messages()[1]
    assert "[m-home] The user lives in Paris." in decide
    assert server.requests[0]["auth"] == "Bearer sk-test"


async def test_a_new_fact_and_the_summary_are_added_with_their_lineage(
    mm: MemoryManager, server: ChatServer
) -> None:
    await mm.store_turn("ag", "s", "My cat Mia is 4.", "Cute!", turn_id="t1")
    await mm.store_turn("ag", "s", "I play chess on Sundays.", "Nice.", turn_id="t2")
    server.script = [
        {"json": {"summary": "The user talked about their cat and chess.",
                  "facts": [{"content": "The user plays chess on Sundays.",
                             "turn_ids": ["t2"]}]}},
    ]  # fmt: skip
    ids = await mm.consolidate_session("ag", "s")
    memories = [await mm.get_memory("ag", i) for i in ids]
    assert [(m.content_type, m.source_turn_ids, m.source) for m in memories if m] == [
        ("summary", ("t1", "t2"), "consolidated"),
        ("fact", ("t2",), "consolidated"),
    ]
    assert len(server.requests) == 1  # no memory near the fact: no decision asked


async def test_invalid_json_writes_nothing_and_the_turns_are_retried(
    mm: MemoryManager, server: ChatServer
) -> None:
    await mm.store_turn("ag", "s", "I moved to Oslo last month.", "Welcome!", turn_id="t1")
    server.script = [{"text": "I think the user moved."}, {"text": "{'facts': []"}]
    with pytest.raises(ConsolidationError, match="not JSON"):
        await mm.consolidate_session("ag", "s")
    assert await mm.count_memories("ag") == 0
    session = await mm.get_session("ag", "s")
    assert session is not None and MARKER not in session.metadata
    server.script = [{"json": {"summary": "The user moved to Oslo.", "facts": []}}]
    (mid,) = await mm.consolidate_session("ag", "s")
    m = await mm.get_memory("ag", mid)
    assert m is not None and m.source_turn_ids == ("t1",)


async def test_a_refusal_is_a_consolidation_error_and_nothing_is_written(
    mm: MemoryManager, server: ChatServer
) -> None:
    await mm.store_turn("ag", "s", "Something sensitive.", "Ok.", turn_id="t1")
    server.script = [{"refusal": "I can't help with that."}]
    with pytest.raises(ConsolidationError, match="refused"):
        await mm.consolidate_session("ag", "s")
    assert await mm.count_memories("ag") == 0
