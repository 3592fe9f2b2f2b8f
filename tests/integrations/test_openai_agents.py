"""ActroneSession against the real openai-agents: the Session protocol, its Runner, errors."""

from __future__ import annotations

from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, function_tool
from agents.items import ModelResponse
from agents.memory import Session
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from actrone_pg import MemoryManager as AsyncMemoryManager
from actrone_pg import ValidationError
from actrone_pg.integrations.openai_agents import ActroneSession
from actrone_pg.sync import MemoryManager

ITEMS: list[Any] = [
    {"role": "user", "content": "Weather in Oslo?"},
    {
        "type": "function_call",
        "call_id": "call-1",
        "name": "weather",
        "arguments": '{"city": "Oslo"}',
    },
    {"type": "function_call_output", "call_id": "call-1", "output": "-3 °C, snow"},
    {
        "type": "message",
        "role": "assistant",
        "id": "msg-1",
        "status": "completed",
        "content": [
            {"type": "output_text", "text": "Cold:\n\n-3 °C", "annotations": []},
            {"type": "output_text", "text": " and snow.", "annotations": []},
        ],
    },
]


async def test_is_a_session_and_items_come_back_exactly(amm: AsyncMemoryManager) -> None:
    session = ActroneSession(amm, "a1", "s1")
    assert isinstance(session, Session)  # the SDK's runtime-checkable protocol
    await session.add_items(ITEMS)
    assert await session.get_items() == ITEMS
    assert await session.get_items(limit=2) == ITEMS[-2:]
    # one turn, whose texts are the messages' (what L1 readers and retrieve_context see)
    [turn] = await amm.get_recent_turns("a1", "s1")
    assert turn.user_message == "Weather in Oslo?"
    assert turn.assistant_message == "Cold:\n\n-3 °C\n\n and snow."


async def test_pop_item_and_clear(amm: AsyncMemoryManager) -> None:
    session = ActroneSession(amm, "a1", "s1")
    first = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    await session.add_items(first)
    await session.add_items(ITEMS)
    assert await session.pop_item() == ITEMS[-1]
    assert await session.get_items() == first + ITEMS[:-1]
    assert await session.pop_item() == ITEMS[-2]
    assert await session.pop_item() == ITEMS[-3]
    assert await session.pop_item() == ITEMS[0]
    assert await session.get_items() == first
    assert len(await amm.get_recent_turns("a1", "s1")) == 1
    await session.clear_session()
    assert await session.get_items() == []
    assert await session.pop_item() is None


async def test_turns_from_other_writers_read_as_messages(amm: AsyncMemoryManager) -> None:
    await amm.store_turn("a1", "s1", "Plan dinner?", "Sure, for how many?")
    assert await ActroneSession(amm, "a1", "s1").get_items() == [
        {"role": "user", "content": "Plan dinner?"},
        {"role": "assistant", "content": "Sure, for how many?"},
    ]


async def test_tool_items_alone_are_one_readable_turn(amm: AsyncMemoryManager) -> None:
    session = ActroneSession(amm, "a1", "s1")
    await session.add_items(ITEMS[1:3])
    assert await session.get_items() == ITEMS[1:3]
    [turn] = await amm.get_recent_turns("a1", "s1")
    assert turn.assistant_message == "[function_call, function_call_output]"


async def test_bad_input_is_a_value_error_and_writes_nothing(amm: AsyncMemoryManager) -> None:
    session = ActroneSession(amm, "a1", "s1")
    with pytest.raises(ValidationError, match="item 1: expected a dict"):
        await session.add_items([{"role": "user", "content": "hi"}, "not an item"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="NUL"):
        await session.add_items([{"role": "user", "content": "a\x00b"}])
    with pytest.raises(ValueError, match="JSON"):
        await session.add_items([{"type": "function_call_output", "output": object()}])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="session_id"):
        await ActroneSession(amm, "a1", " ").get_items()
    assert await amm.get_recent_turns("a1", "s1") == []


async def test_over_the_sync_manager(mm: MemoryManager) -> None:
    session = ActroneSession(mm, "a1", "s1")
    await session.add_items(ITEMS)
    assert await session.get_items() == ITEMS


class CountingModel(Model):
    """A stand-in for an LLM: calls the weather tool once, then answers with what it was shown."""

    def __init__(self) -> None:
        self.inputs: list[list[Any]] = []

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kw: Any
    ) -> Any:
        items = input if isinstance(input, list) else [{"role": "user", "content": input}]
        self.inputs.append(items)
        if items[-1].get("role") == "user":
            call = ResponseFunctionToolCall(
                type="function_call",
                call_id=f"c{len(self.inputs)}",
                name="weather",
                arguments='{"city": "Oslo"}',
            )
            return ModelResponse(output=[call], usage=Usage(), response_id=None)
        text = ResponseOutputText(type="output_text", text=f"saw {len(items)}", annotations=[])
        message = ResponseOutputMessage(
            id=f"m{len(self.inputs)}",
            type="message",
            role="assistant",
            status="completed",
            content=[text],
        )
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"-3 °C in {city}"


async def test_runner_keeps_the_conversation_in_the_session(amm: AsyncMemoryManager) -> None:
    model = CountingModel()
    agent = Agent(name="planner", instructions="Be brief.", model=model, tools=[weather])
    session = ActroneSession(amm, "a1", "s1")
    run_config = RunConfig(tracing_disabled=True)
    first = await Runner.run(agent, "Weather?", session=session, run_config=run_config)
    # user, function call, its output: 3 items shown on the second model call
    assert first.final_output == "saw 3"
    second = await Runner.run(agent, "And tomorrow?", session=session, run_config=run_config)
    # the first run's 4 items from the session, the new question, a call and its output
    assert second.final_output == "saw 7"
    items = await session.get_items()
    assert [i.get("role") or i.get("type") for i in items] == [
        "user",
        "function_call",
        "function_call_output",
        "assistant",
    ] * 2
    turns = await amm.get_recent_turns("a1", "s1")
    assert "saw 3" in " ".join(t.assistant_message for t in turns)
