"""An OpenAI Agents SDK ``Session`` over L1, the session's recent turns (``[openai-agents]``).

from actrone_pg import MemoryManager
from actrone_pg.integrations.openai_agents import ActroneSession

session = ActroneSession(mm, "agent-1", "session-1")
result = await Runner.run(agent, "Plan dinner?", session=session)

Each ``add_items`` call is stored as one turn, so it lands whole or not at all: the text of its
user messages becomes the turn's ``user_message``, the text of its assistant messages the
``assistant_message`` (what ``retrieve_context`` and the SQL views show), and the items
themselves, without that text, its ``tool_results``. ``get_items`` puts the text back and returns
the items exactly as they were added. Turns written by other code (``store_turn``) read as one
user and one assistant message. The session is L1: at most ``max_session_turns`` turns (calls of
``add_items``), expiring ``session_ttl_hours`` after the last write.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from actrone_pg.errors import MissingDependencyError, ValidationError
from actrone_pg.integrations._bridge import AnyManager, Bridge, TurnDraft
from actrone_pg.models import Turn

try:
    from agents.memory.session_settings import SessionSettings
except ImportError:  # pragma: no cover - exercised by installs without the extra
    raise MissingDependencyError("openai-agents", "openai-agents") from None

if TYPE_CHECKING:
    from agents.items import TResponseInputItem

__all__ = ["ActroneSession", "items_to_turn", "turn_to_items"]

# tool_results of a turn written by this adapter: [{_ITEM: item}, ...]; a message's text is
# replaced by _TEXT: {"side": "user" | "assistant", "lengths": [...]}, the lengths of its text
# parts as joined with _SEP into the turn's user_message or assistant_message.
_ITEM = "openai_agents_item"
_TEXT = "actrone_text"
_SEP = "\n\n"
_SIDES = ("user", "assistant")


def _strip_text(item: Mapping[str, Any], texts: list[str]) -> dict[str, Any]:
    """The message without its text, which is appended to ``texts``; its lengths are noted."""
    stub = dict(item)
    lengths: list[int] = []
    content = item.get("content")
    if isinstance(content, str):
        texts.append(content)
        lengths.append(len(content))
        stub["content"] = ""
    elif isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                texts.append(part["text"])
                lengths.append(len(part["text"]))
                part = {**part, "text": ""}
            parts.append(part)
        stub["content"] = parts
    stub[_TEXT] = {"side": item["role"], "lengths": lengths}
    return stub


def items_to_turn(items: Sequence[Mapping[str, Any]]) -> TurnDraft:
    """One ``add_items`` call as one turn (see the module docstring)."""
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Sequence):
        raise ValidationError("items must be a list of input items (dicts)")
    texts: dict[str, list[str]] = {side: [] for side in _SIDES}
    entries: list[dict[str, Any]] = []
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise ValidationError(f"item {i}: expected a dict, got {type(item).__name__}")
        if _TEXT in item:
            raise ValidationError(f"item {i}: the key {_TEXT!r} is reserved")
        role = item.get("role")
        if role in _SIDES and item.get("type", "message") == "message":
            entries.append({_ITEM: _strip_text(item, texts[cast(str, role)])})
        else:
            entries.append({_ITEM: dict(item)})
    user = _SEP.join(texts["user"])
    assistant = _SEP.join(texts["assistant"])
    if not (user.strip() or assistant.strip()):
        # Tool calls and their outputs alone: name them, so the turn reads as something in L1
        # (the names are after the texts' recorded lengths, so get_items ignores them).
        kinds = [str(e[_ITEM].get("type") or e[_ITEM].get("role") or "item") for e in entries]
        assistant += ("" if not assistant else _SEP) + "[" + ", ".join(kinds) + "]"
    return TurnDraft(user, assistant, entries)


def _fill(stub: dict[str, Any], text: str, offset: int) -> tuple[dict[str, Any], int]:
    marker = stub.pop(_TEXT)
    lengths = iter(marker["lengths"])

    def take() -> str:
        nonlocal offset
        n = next(lengths)
        piece = text[offset : offset + n]
        offset += n + len(_SEP)
        return piece

    if isinstance(stub.get("content"), str):
        stub["content"] = take()
    elif isinstance(stub.get("content"), list):
        stub["content"] = [
            {**p, "text": take()}
            if isinstance(p, Mapping) and isinstance(p.get("text"), str)
            else p
            for p in stub["content"]
        ]
    return stub, offset


def turn_to_items(turn: Turn) -> list[dict[str, Any]]:
    """A stored turn as input items, in the order they were added."""
    results = turn.tool_results or []
    ours = bool(results) and all(isinstance(e, dict) and set(e) == {_ITEM} for e in results)
    if not ours:
        out: list[dict[str, Any]] = []
        if turn.user_message:
            out.append({"role": "user", "content": turn.user_message})
        if turn.assistant_message:
            out.append({"role": "assistant", "content": turn.assistant_message})
        return out
    texts = {"user": turn.user_message, "assistant": turn.assistant_message}
    offsets = {"user": 0, "assistant": 0}
    items = []
    for entry in copy.deepcopy(results):
        item = entry[_ITEM]
        if _TEXT in item:
            side = item[_TEXT]["side"]
            item, offsets[side] = _fill(item, texts[side], offsets[side])
        items.append(item)
    return items


class ActroneSession:
    """An OpenAI Agents SDK ``Session`` (the protocol) over one session's recent turns (L1).

    Pass it to ``Runner.run(..., session=...)``. Works over an async ``actrone_pg.MemoryManager``
    or an ``actrone_pg.sync.MemoryManager``. Bad input raises the library's ``ValidationError``
    (a ``ValueError``) and writes nothing. ``pop_item`` rewrites the session's turns; do not run
    it while another writer adds to the same session.
    """

    def __init__(
        self,
        manager: AnyManager,
        agent_id: str,
        session_id: str,
        *,
        session_settings: SessionSettings | None = None,
    ) -> None:
        self._bridge = Bridge(manager, type(self).__name__)
        self.agent_id = agent_id
        self.session_id = session_id
        self.session_settings = session_settings

    async def _turns(self) -> list[Turn]:
        turns: list[Turn] = await self._bridge.acall(
            "get_recent_turns", self.agent_id, self.session_id
        )
        return turns

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The session's items, oldest first; with ``limit``, the latest ``limit`` of them."""
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            raise ValidationError("limit must be a whole number or None")
        items = [item for turn in await self._turns() for item in turn_to_items(turn)]
        if limit is not None:
            items = items[-limit:] if limit > 0 else []
        return cast("list[TResponseInputItem]", items)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Store the items as one turn (nothing for an empty list)."""
        if isinstance(items, list) and not items:
            return
        draft = items_to_turn(cast("Sequence[Mapping[str, Any]]", items))
        await self._store(draft)

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the most recent item, or ``None`` if the session is empty."""
        turns = await self._turns()
        if not turns:
            return None
        last = turn_to_items(turns[-1])
        # The store has no "remove the last turn": rewrite the session without it.
        await self._bridge.acall("clear_session", self.agent_id, self.session_id)
        for turn in turns[:-1]:
            await self._store(
                TurnDraft(turn.user_message, turn.assistant_message, turn.tool_results or [])
            )
        if not last:
            return None
        popped = last.pop()
        if last:
            await self._store(items_to_turn(last))
        return cast("TResponseInputItem", popped)

    async def clear_session(self) -> None:
        """Forget every item of the session (the agent's long-term memories stay)."""
        await self._bridge.acall("clear_session", self.agent_id, self.session_id)

    async def _store(self, draft: TurnDraft) -> None:
        await self._bridge.astore_turn(self.agent_id, self.session_id, draft)
