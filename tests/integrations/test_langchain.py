"""ActroneChatMessageHistory against the real langchain-core: round trips, its runnable, errors."""

from __future__ import annotations

import pytest
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.prompt_values import PromptValue
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda

from actrone_pg import MemoryManager as AsyncMemoryManager
from actrone_pg import ValidationError
from actrone_pg.integrations.langchain import ActroneChatMessageHistory
from actrone_pg.sync import MemoryManager


def shape(messages: list[BaseMessage]) -> list[tuple[str, object]]:
    return [(m.type, m.content) for m in messages]


def test_is_a_langchain_history(mm: MemoryManager) -> None:
    assert isinstance(ActroneChatMessageHistory(mm, "a1", "s1"), BaseChatMessageHistory)


def test_messages_round_trip_as_turns(mm: MemoryManager) -> None:
    history = ActroneChatMessageHistory(mm, "a1", "s1")
    history.add_messages([HumanMessage("Plan dinner?"), AIMessage("Sure, for how many?")])
    history.add_user_message("Four")
    history.add_ai_message("Pasta then.")
    assert shape(history.messages) == [
        ("human", "Plan dinner?"),
        ("ai", "Sure, for how many?"),
        ("human", "Four"),
        ("ai", "Pasta then."),
    ]
    # the first call made one turn; the two single messages made one half turn each
    turns = mm.get_recent_turns("a1", "s1")
    assert [(t.user_message, t.assistant_message) for t in turns] == [
        ("Plan dinner?", "Sure, for how many?"),
        ("Four", ""),
        ("", "Pasta then."),
    ]
    history.clear()
    assert history.messages == []


def test_tool_calls_and_results_come_back_in_order(mm: MemoryManager) -> None:
    history = ActroneChatMessageHistory(mm, "a1", "s1")
    call = {"name": "weather", "args": {"city": "Oslo"}, "id": "call-1"}
    history.add_messages(
        [
            HumanMessage("Weather in Oslo?"),
            AIMessage("", tool_calls=[call]),
            ToolMessage("-3 °C, snow", tool_call_id="call-1", name="weather"),
            AIMessage("Cold: -3 °C and snow."),
        ]
    )
    back = history.messages
    assert [m.type for m in back] == ["human", "ai", "tool", "ai"]
    assert isinstance(back[1], AIMessage) and back[1].tool_calls[0]["args"] == {"city": "Oslo"}
    assert isinstance(back[2], ToolMessage) and back[2].tool_call_id == "call-1"
    assert back[3].content == "Cold: -3 °C and snow."
    assert len(mm.get_recent_turns("a1", "s1")) == 1


def test_bad_input_is_a_value_error_and_writes_nothing(mm: MemoryManager) -> None:
    history = ActroneChatMessageHistory(mm, "a1", "s1")
    with pytest.raises(ValidationError, match="SystemMessage") as info:
        history.add_messages([SystemMessage("You are helpful"), HumanMessage("hi")])
    assert isinstance(info.value, ValueError)  # what LangChain callers catch
    with pytest.raises(ValueError, match="NUL"):
        history.add_messages([HumanMessage("a\x00b")])
    with pytest.raises(ValueError, match="session_id"):
        ActroneChatMessageHistory(mm, "a1", "").add_user_message("hi")
    with pytest.raises(ValueError, match="tool messages"):
        history.add_messages([ToolMessage("x", tool_call_id="c")])
    assert history.messages == []


async def test_async_methods_over_the_async_manager(amm: AsyncMemoryManager) -> None:
    history = ActroneChatMessageHistory(amm, "a1", "s1")
    await history.aadd_messages([HumanMessage("hi"), AIMessage("hello")])
    assert shape(await history.aget_messages()) == [("human", "hi"), ("ai", "hello")]
    with pytest.raises(TypeError, match="sync.MemoryManager"):
        _ = history.messages
    await history.aclear()
    assert await history.aget_messages() == []


async def test_async_methods_over_the_sync_manager(mm: MemoryManager) -> None:
    history = ActroneChatMessageHistory(mm, "a1", "s1")
    await history.aadd_messages([HumanMessage("hi"), AIMessage("hello")])
    assert shape(await history.aget_messages()) == [("human", "hi"), ("ai", "hello")]


def test_feeds_a_prompt_and_keeps_the_exchange(mm: MemoryManager) -> None:
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Be brief."), MessagesPlaceholder("history"), ("human", "{question}")]
    )

    def model(value: PromptValue) -> AIMessage:
        # a stand-in for a chat model: says how many messages it was shown
        return AIMessage(f"saw {len(value.to_messages())}")

    chain = prompt | RunnableLambda(model)
    history = ActroneChatMessageHistory(mm, "a1", "s1")
    for question in ["hi", "again"]:
        answer = chain.invoke({"history": history.messages, "question": question})
        history.add_messages([HumanMessage(question), answer])
    # system + question, then system + one exchange + question; the system prompt is not stored
    turns = mm.get_recent_turns("a1", "s1")
    assert [(t.user_message, t.assistant_message) for t in turns] == [
        ("hi", "saw 2"),
        ("again", "saw 4"),
    ]
