"""A consolidator that asks any OpenAI-compatible chat-completions endpoint (needs httpx).

One request per consolidation asks for JSON: a ``summary`` of the turns and the atomic ``facts``
they state, each with the ids of the turns it came from. Then each fact is compared with the
agent's nearest current memories (``context.search``) and the model decides, in a second
request, whether to ``add`` it, ``update`` one of them (the fact supersedes it: a new version,
not a second memory) or do ``nothing`` (already known).

Failures never write half a result: every answer is parsed and checked before the manager writes
anything. Timeouts, connection errors and HTTP 408/429/5xx are retried with exponential backoff;
an answer that is not the JSON asked for is asked again; after ``retries`` attempts, or at once
for a refusal or another HTTP error, :class:`~actrone_pg.errors.ConsolidationError` is raised and
the turns stay pending, to be consolidated on a later run.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from typing import Any

from actrone_pg.consolidation.base import ConsolidatedMemory, ConsolidationContext
from actrone_pg.errors import ConfigurationError, ConsolidationError, MissingDependencyError
from actrone_pg.models import Memory, Turn

__all__ = ["LLMConsolidator", "chat_completions_url"]

logger = logging.getLogger("actrone_pg.consolidation")

TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})
#: Current memories shown to the model beside each new fact.
NEAREST = 3

EXTRACT_PROMPT = """You turn a conversation between a user and an assistant into long-term memory.
Answer with one JSON object and nothing else:
{"summary": "<two or three sentences: what happened and what was learnt>",
 "facts": [{"content": "<one self-contained fact, with names and dates>",
            "importance": <0..1>, "tags": ["<word>", ...], "turn_ids": ["<id>", ...]}]}
A fact states one thing about the user or their world (preferences, plans, decisions, people,
places, dates). turn_ids are the ids in brackets of the turns the fact comes from.
Leave out small talk. Use "facts": [] if there is nothing to remember."""

DECIDE_PROMPT = """You keep an agent's long-term memory free of duplicates and contradictions.
Given a NEW fact and the EXISTING memories nearest to it, answer with one JSON object:
{"action": "add"} if the new fact is new information;
{"action": "update", "memory_id": "<id of the existing memory>", "content": "<the memory
 rewritten so it is true now>"} if the new fact contradicts or refines that memory;
{"action": "nothing"} if an existing memory already says it."""


def chat_completions_url(base: str) -> str:
    """The ``/chat/completions`` endpoint of ``base`` (a ``/v1`` URL or the endpoint itself)."""
    url = base.rstrip("/")
    return url if url.endswith("/chat/completions") else url + "/chat/completions"


class _Retry(Exception):
    """A failure worth another attempt (timeout, transient status, unusable answer)."""


class LLMConsolidator:
    """Summary and atomic facts from an OpenAI-compatible chat model; contradictions update.

    ``api_url`` is the server's ``/v1`` URL (OpenAI, vLLM, Ollama, llama.cpp...), ``model`` the
    model name, ``api_key`` sent as a bearer token if given. ``timeout`` bounds each request;
    ``retries`` is the number of attempts per request; ``backoff`` the first wait between them
    (doubled each time).
    """

    def __init__(
        self,
        *,
        api_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.5,
    ) -> None:
        if not api_url.strip():
            raise ConfigurationError("consolidator_api_url", "is required for the llm consolidator")
        if not model.strip():
            raise ConfigurationError("consolidator_model", "is required for the llm consolidator")
        if retries < 1:
            raise ConfigurationError("consolidator_retries", f"must be at least 1, got {retries}")
        try:
            import httpx
        except ImportError:
            raise MissingDependencyError("openai", "httpx") from None
        self.name = f"llm:{model}"
        self.model = model
        self.url = chat_completions_url(api_url)
        self.retries = retries
        self.backoff = backoff
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(timeout=timeout, headers=headers)

    def __repr__(self) -> str:
        return f"LLMConsolidator(url={self.url!r}, model={self.model!r})"

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._client.aclose()

    async def consolidate(
        self, turns: Sequence[Turn], context: ConsolidationContext
    ) -> list[ConsolidatedMemory]:
        """The summary and facts of ``turns``; a fact that contradicts a memory supersedes it."""
        if not turns:
            return []
        ids = [t.id for t in turns]
        known = set(ids)
        answer = await self._ask(EXTRACT_PROMPT, _transcript(turns), _check_extraction)
        out: list[ConsolidatedMemory] = []
        summary = answer["summary"].strip()
        if summary:
            out.append(
                ConsolidatedMemory(
                    content=summary,
                    content_type="summary",
                    importance=0.5,
                    tags=("summary",),
                    source_turn_ids=tuple(ids),
                )
            )
        for fact in answer["facts"]:
            sources = tuple(t for t in fact.get("turn_ids", []) if t in known) or tuple(ids)
            content = fact["content"].strip()
            if not content:
                continue
            memory = ConsolidatedMemory(
                content=content,
                content_type="fact",
                importance=_importance(fact.get("importance")),
                tags=tuple(str(t) for t in fact.get("tags", []) if isinstance(t, str) and t)[:16],
                source_turn_ids=sources,
            )
            decided = await self._decide(memory, await context.search(content, NEAREST))
            if decided is not None:
                out.append(decided)
        return out

    async def _decide(
        self, fact: ConsolidatedMemory, nearest: list[Memory]
    ) -> ConsolidatedMemory | None:
        if not nearest:
            return fact
        existing = "\n".join(f"[{m.id}] {m.content}" for m in nearest)
        ids = {m.id for m in nearest}

        def check(data: Any) -> dict[str, Any]:
            if not isinstance(data, dict) or data.get("action") not in ("add", "update", "nothing"):
                raise _Retry("the decision is not {'action': 'add' | 'update' | 'nothing'}")
            if data["action"] == "update" and (
                data.get("memory_id") not in ids
                or not isinstance(data.get("content"), str)
                or not data["content"].strip()
            ):
                raise _Retry("an update must name one of the memories shown and give content")
            return data

        decision = await self._ask(
            DECIDE_PROMPT, f"NEW: {fact.content}\nEXISTING:\n{existing}", check
        )
        if decision["action"] == "nothing":
            return None
        if decision["action"] == "add":
            return fact
        return ConsolidatedMemory(
            content=decision["content"].strip(),
            content_type=fact.content_type,
            importance=fact.importance,
            tags=fact.tags,
            source_turn_ids=fact.source_turn_ids,
            supersedes=decision["memory_id"],
        )

    async def _ask(self, system: str, user: str, check: Any) -> Any:
        """One chat completion parsed as JSON and checked, with retries; else ConsolidationError."""
        body = {
            "model": self.model,
            "temperature": 0,
            "response_format": {"type": "json_object"},
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        }
        delay = self.backoff
        last = "no attempt"
        for attempt in range(1, self.retries + 1):
            try:
                return check(await self._once(body))
            except _Retry as exc:
                last = str(exc)
            if attempt < self.retries:
                logger.warning(
                    "consolidation request to %s failed (%s); attempt %d of %d in %.1fs",
                    self.url,
                    last,
                    attempt + 1,
                    self.retries,
                    delay,
                )
                await asyncio.sleep(delay)
                delay *= 2
        raise ConsolidationError(
            f"the chat model at {self.url} failed {self.retries} times: {last}; "
            "the turns stay pending and are consolidated on a later run"
        )

    async def _once(self, body: dict[str, Any]) -> Any:
        import httpx

        try:
            response = await self._client.post(self.url, json=body)
        except httpx.TimeoutException as exc:
            raise _Retry(f"timed out ({type(exc).__name__})") from None
        except httpx.TransportError as exc:
            raise _Retry(f"{type(exc).__name__}: {exc}") from None
        if response.status_code in TRANSIENT_STATUS:
            raise _Retry(f"HTTP {response.status_code}")
        if response.status_code >= 400:
            raise ConsolidationError(
                f"the chat model at {self.url} answered HTTP {response.status_code}: "
                f"{response.text[:300]}"
            )
        try:
            choice = response.json()["choices"][0]
            message = choice["message"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise _Retry("the response is not a chat completion") from None
        refusal = message.get("refusal") if isinstance(message, dict) else None
        if refusal or choice.get("finish_reason") == "content_filter":
            raise ConsolidationError(
                f"the chat model at {self.url} refused: {refusal or 'content filter'}"
            )
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            raise _Retry("the answer has no text")
        try:
            return json.loads(_strip_fence(content))
        except ValueError:
            raise _Retry(f"the answer is not JSON: {content[:80]!r}") from None


def _check_extraction(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise _Retry("the answer is not a JSON object")
    summary, facts = data.get("summary", ""), data.get("facts", [])
    if not isinstance(summary, str) or not isinstance(facts, list):
        raise _Retry("the answer lacks a 'summary' string or a 'facts' list")
    for fact in facts:
        if not isinstance(fact, dict) or not isinstance(fact.get("content"), str):
            raise _Retry("a fact is not an object with a 'content' string")
        if not isinstance(fact.get("turn_ids", []), list) or not isinstance(
            fact.get("tags", []), list
        ):
            raise _Retry("a fact's 'turn_ids' or 'tags' is not a list")
    return data


def _importance(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return 0.5
    return min(1.0, max(0.0, float(value)))


def _strip_fence(text: str) -> str:
    # Some servers wrap JSON in a Markdown code fence despite response_format.
    text = text.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0]
    return text


def _transcript(turns: Sequence[Turn]) -> str:
    lines = []
    for t in turns:
        lines.append(f"[{t.id}] ({t.created_at.date().isoformat()})")
        if t.user_message.strip():
            lines.append(f"User: {t.user_message}")
        if t.assistant_message.strip():
            lines.append(f"Assistant: {t.assistant_message}")
    return "\n".join(lines)
