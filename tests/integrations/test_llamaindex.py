"""ActroneMemoryBlock against the real llama-index-core Memory: retrieval, budget, flush, errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import Memory
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from actrone_pg import MemoryManager as AsyncMemoryManager
from actrone_pg import ValidationError
from actrone_pg.integrations.llamaindex import ActroneMemoryBlock
from actrone_pg.sync import MemoryManager


@pytest.fixture
def engine(tmp_path: Path) -> AsyncEngine:
    """Memory's chat store: a connection per operation (NullPool), none left open after a test.

    Memory's blocking methods run each call in a new event loop, and its default store keeps an
    in-memory SQLite connection that it never closes.
    """
    return create_async_engine(f"sqlite+aiosqlite:///{tmp_path}/chat.db", poolclass=NullPool)


def system_text(messages: list[ChatMessage]) -> str:
    assert messages[0].role == "system"
    return str(messages[0].content)


async def test_relevant_memories_go_into_the_memory_message(
    amm: AsyncMemoryManager, engine: AsyncEngine
) -> None:
    await amm.inject_memory("a1", "The user is allergic to peanuts")
    await amm.inject_memory("a1", "The office moved to Berlin in May")
    block = ActroneMemoryBlock(manager=amm, agent_id="a1")
    memory = Memory.from_defaults(session_id="s1", memory_blocks=[block], async_engine=engine)
    await memory.aput(ChatMessage(role="user", content="Can I eat peanuts? I am allergic"))
    messages = await memory.aget()
    text = system_text(messages)
    assert "- The user is allergic to peanuts" in text
    assert "Berlin" not in text  # shares no word with the query: not admitted
    assert messages[-1].content == "Can I eat peanuts? I am allergic"


async def test_memories_stay_inside_the_l2_share(amm: AsyncMemoryManager) -> None:
    # 30 memories of 100 characters = 25 tokens each; a 400-token budget has an L2 share of 100
    for i in range(30):
        await amm.inject_memory("a1", f"peanut fact number {i:02d} ".ljust(100, "x"))
    block = ActroneMemoryBlock(manager=amm, agent_id="a1", token_budget=400)
    content = await block.aget([ChatMessage(role="user", content="peanut fact")], session_id="s1")
    lines = content.splitlines()
    assert len(lines) == 4  # floor(0.25 * 400) // 25


async def test_nothing_to_ask_is_an_empty_block(amm: AsyncMemoryManager) -> None:
    await amm.inject_memory("a1", "The user is allergic to peanuts")
    block = ActroneMemoryBlock(manager=amm, agent_id="a1")
    assert await block.aget([], session_id="s1") == ""
    assert await block.aget([ChatMessage(role="system", content="peanuts")]) == ""


async def test_flushed_messages_become_a_long_term_memory(
    amm: AsyncMemoryManager, engine: AsyncEngine
) -> None:
    block = ActroneMemoryBlock(manager=amm, agent_id="a1")
    # a tiny short-term queue: older messages are flushed into the block
    memory = Memory.from_defaults(
        session_id="s1",
        memory_blocks=[block],
        token_limit=60,
        token_flush_size=20,
        async_engine=engine,
    )
    await memory.aput_messages(
        [
            ChatMessage(role="user", content="My sister Ada lives in Lisbon near the river."),
            ChatMessage(role="assistant", content="Noted: Ada lives in Lisbon."),
        ]
        * 3
        + [ChatMessage(role="user", content="Where does Ada live?")]
    )
    assert await amm.count_memories("a1") >= 1
    [hit, *_] = await amm.search_memories("a1", "Ada Lisbon")
    assert hit.content.startswith("user: My sister Ada lives in Lisbon")
    assert (hit.session_id, hit.source, hit.content_type) == ("s1", "llamaindex", "conversation")


async def test_bad_input_is_a_value_error(amm: AsyncMemoryManager) -> None:
    block = ActroneMemoryBlock(manager=amm, agent_id="")
    with pytest.raises(ValidationError, match="agent_id") as info:
        await block.aget([ChatMessage(role="user", content="hi")], session_id="s1")
    assert isinstance(info.value, ValueError)
    bad_budget = ActroneMemoryBlock(manager=amm, agent_id="a1", token_budget=0)
    with pytest.raises(ValueError, match="token_budget"):
        await bad_budget.aget([ChatMessage(role="user", content="hi")], session_id="s1")
    with pytest.raises(TypeError, match="MemoryManager"):
        ActroneMemoryBlock(manager="not a manager", agent_id="a1")


def test_blocking_memory_over_the_sync_manager(mm: MemoryManager, engine: AsyncEngine) -> None:
    mm.inject_memory("a1", "The user is allergic to peanuts")
    memory = Memory.from_defaults(
        session_id="s1",
        memory_blocks=[ActroneMemoryBlock(manager=mm, agent_id="a1")],
        async_engine=engine,
    )
    memory.put(ChatMessage(role="user", content="Are peanuts OK? I am allergic"))
    assert "allergic to peanuts" in system_text(memory.get())
