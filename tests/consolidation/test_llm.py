"""The LLM consolidator against a real chat-completions server on loopback (``ChatServer``)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from actrone_pg.consolidation import ConsolidatedMemory, ConsolidationContext
from actrone_pg.consolidation.llm import LLMConsolidator, chat_completions_url
from actrone_pg.errors import ConfigurationError, ConsolidationError
from actrone_pg.models import Memory, Turn
from tests.consolidation.chat_server import ChatServer

WHEN = datetime(2026, 5, 4, 12, 0, tzinfo=UTC)


def turn(i: int, user: str, assistant: str = "Noted.") -> Turn:
    return Turn(f"t{i}", "ag", "s", user, assistant, None, WHEN, 10)


def memory(mid: str, content: str) -> Memory:
    return Memory(mid, "ag", None, content, "fact", 0.5, (), "injected", "none", WHEN, {}, "h", 5)


def context(nearest: list[Memory] | None = None) -> ConsolidationContext:
    async def search(text: str, limit: int) -> list[Memory]:
        return list(nearest or [])[:limit]

    return ConsolidationContext("ag", "s", search)


@pytest.fixture
def server() -> Iterator[ChatServer]:
    s = ChatServer()
    yield s
    s.close()


def consolidator(server: ChatServer, **kw: object) -> LLMConsolidator:
    settings: dict[str, object] = {"api_url": server.url, "model": "m", "backoff": 0.01}
    settings.update(kw)
    return LLMConsolidator(**settings)  # type: ignore[arg-type]


TURNS = [turn(1, "I moved to Oslo in March."), turn(2, "My sister Ida lives in Bergen.")]
GOOD = {
    "summary": "The user moved to Oslo; their sister lives in Bergen.",
    "facts": [
        {"content": "The user lives in Oslo since March 2026.", "importance": 0.8,
         "tags": ["home"], "turn_ids": ["t1"]},
        {"content": "The user's sister Ida lives in Bergen.", "turn_ids": ["t2", "unknown"]},
    ],
}  # fmt: skip


def test_the_endpoint_is_found_from_a_v1_url_or_given_whole() -> None:
    assert chat_completions_url("http://h/v1/") == "http://h/v1/chat/completions"
    assert chat_completions_url("http://h/v1/chat/completions") == "http://h/v1/chat/completions"


async def test_good_output_gives_a_summary_and_facts_with_their_turns(server: ChatServer) -> None:
    server.script = [{"json": GOOD}]
    c = consolidator(server, api_key="sk-test")
    try:
        out = await c.consolidate(TURNS, context())
    finally:
        await c.aclose()
    assert out == [
        ConsolidatedMemory(GOOD["summary"], "summary", 0.5, ("summary",), ("t1", "t2")),  # type: ignore[arg-type]
        ConsolidatedMemory(
            "The user lives in Oslo since March 2026.", "fact", 0.8, ("home",), ("t1",)
        ),
        ConsolidatedMemory("The user's sister Ida lives in Bergen.", "fact", 0.5, (), ("t2",)),
    ]
    (request,) = server.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["auth"] == "Bearer sk-test"
    assert request["body"]["model"] == "m"
    assert request["body"]["response_format"] == {"type": "json_object"}
    assert "[t1]" in server.user_messages()[0] and "Bergen" in server.user_messages()[0]


async def test_invalid_json_is_asked_again_then_accepted(server: ChatServer) -> None:
    server.script = [{"text": "Sure! Here are the facts: ..."}, {"json": GOOD}]
    c = consolidator(server)
    try:
        out = await c.consolidate(TURNS, context())
    finally:
        await c.aclose()
    assert len(server.requests) == 2
    assert len(out) == 3


async def test_invalid_json_every_time_is_a_consolidation_error(server: ChatServer) -> None:
    server.script = [{"text": "not json"}, {"json": {"facts": "nope"}}, {"text": "{"}]
    c = consolidator(server, retries=3)
    try:
        with pytest.raises(ConsolidationError, match="failed 3 times"):
            await c.consolidate(TURNS, context())
    finally:
        await c.aclose()
    assert len(server.requests) == 3


async def test_a_timeout_is_retried_then_a_consolidation_error(server: ChatServer) -> None:
    server.script = [{"sleep": 1.0, "json": GOOD}, {"sleep": 1.0, "json": GOOD}]
    c = consolidator(server, timeout=0.2, retries=2)
    try:
        with pytest.raises(ConsolidationError, match="timed out"):
            await c.consolidate(TURNS, context())
    finally:
        await c.aclose()
    assert len(server.requests) == 2


async def test_a_timeout_then_an_answer_succeeds(server: ChatServer) -> None:
    # The second answer has a whole second: under a loaded CI machine 0.2 s was not always
    # enough for a local round trip; the first still times out, sleeping four times as long.
    server.script = [{"sleep": 4.0, "json": GOOD}, {"json": GOOD}]
    c = consolidator(server, timeout=1.0, retries=2)
    try:
        out = await c.consolidate(TURNS, context())
    finally:
        await c.aclose()
    assert [m.content_type for m in out] == ["summary", "fact", "fact"]


async def test_a_refusal_fails_at_once(server: ChatServer) -> None:
    server.script = [{"refusal": "I can't help with that."}, {"json": GOOD}]
    c = consolidator(server)
    try:
        with pytest.raises(ConsolidationError, match="refused: I can't help with that"):
            await c.consolidate(TURNS, context())
    finally:
        await c.aclose()
    assert len(server.requests) == 1


async def test_a_client_error_fails_at_once_and_a_server_error_is_retried(
    server: ChatServer,
) -> None:
    server.script = [{"status": 503}, {"status": 401}]
    c = consolidator(server)
    try:
        with pytest.raises(ConsolidationError, match="HTTP 401"):
            await c.consolidate(TURNS, context())
    finally:
        await c.aclose()
    assert len(server.requests) == 2


async def test_a_contradicting_fact_supersedes_the_memory_it_contradicts(
    server: ChatServer,
) -> None:
    old = memory("m-home", "The user lives in Paris.")
    server.script = [
        {"json": {"summary": "", "facts": [{"content": "The user lives in Oslo.",
                                            "turn_ids": ["t1"]}]}},
        {"json": {"action": "update", "memory_id": "m-home",
                  "content": "The user lives in Oslo (moved from Paris)."}},
    ]  # fmt: skip
    c = consolidator(server)
    try:
        out = await c.consolidate(TURNS[:1], context([old]))
    finally:
        await c.aclose()
    assert out == [
        ConsolidatedMemory(
            "The user lives in Oslo (moved from Paris).", "fact", 0.5, (), ("t1",), "m-home"
        )
    ]
    decide = server.user_messages()[1]
    assert (
        "NEW: The user lives in Oslo." in decide and "[m-home] The user lives in Paris." in decide
    )


async def test_a_known_fact_adds_nothing_and_a_new_one_is_added(server: ChatServer) -> None:
    near = [memory("m1", "The user lives in Oslo.")]
    server.script = [
        {"json": {"summary": "", "facts": [{"content": "The user lives in Oslo."},
                                           {"content": "The user has a cat."}]}},
        {"json": {"action": "nothing"}},
        {"json": {"action": "add"}},
    ]  # fmt: skip
    c = consolidator(server)
    try:
        out = await c.consolidate(TURNS, context(near))
    finally:
        await c.aclose()
    assert [m.content for m in out] == ["The user has a cat."]
    assert out[0].source_turn_ids == ("t1", "t2") and out[0].supersedes is None


async def test_an_update_naming_a_memory_not_shown_is_asked_again(server: ChatServer) -> None:
    near = [memory("m1", "The user lives in Paris.")]
    server.script = [
        {"json": {"summary": "", "facts": [{"content": "The user lives in Oslo."}]}},
        {"json": {"action": "update", "memory_id": "someone-else", "content": "x"}},
        {"json": {"action": "update", "memory_id": "m1", "content": "The user lives in Oslo."}},
    ]  # fmt: skip
    c = consolidator(server)
    try:
        out = await c.consolidate(TURNS, context(near))
    finally:
        await c.aclose()
    assert [m.supersedes for m in out] == ["m1"]


def test_settings_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="consolidator_model"):
        LLMConsolidator(api_url="http://h/v1", model=" ")
    with pytest.raises(ConfigurationError, match="consolidator_retries"):
        LLMConsolidator(api_url="http://h/v1", model="m", retries=0)
