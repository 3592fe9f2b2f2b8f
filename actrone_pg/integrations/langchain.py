"""LangChain chat history over L1, the session's recent turns (``[langchain]`` extra).

from actrone_pg.sync import MemoryManager
from actrone_pg.integrations.langchain import ActroneChatMessageHistory

history = ActroneChatMessageHistory(MemoryManager.create(config), "agent-1", "session-1")
history.add_messages([HumanMessage("Plan dinner?"), AIMessage("Sure, for how many?")])
history.messages          # [HumanMessage(...), AIMessage(...)]

A human message and the AI answer that follows it are stored as one turn; tool calls and tool
messages between them go into the turn's ``tool_results`` and come back in order. The history is
L1: at most ``max_session_turns`` turns, expiring ``session_ttl_hours`` after the last write.
System messages are refused: the system prompt is the caller's and is never stored.
"""

from __future__ import annotations

from collections.abc import Sequence

from actrone_pg.errors import MissingDependencyError, ValidationError
from actrone_pg.integrations._bridge import AnyManager, Bridge, TurnDraft
from actrone_pg.models import Turn

try:
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
except ImportError:  # pragma: no cover - exercised by installs without the extra
    raise MissingDependencyError("langchain", "langchain-core") from None

__all__ = ["ActroneChatMessageHistory", "messages_to_turns", "turn_to_messages"]


def _text(message: BaseMessage) -> str:
    return message.content if isinstance(message.content, str) else message.text


def messages_to_turns(messages: Sequence[BaseMessage]) -> list[TurnDraft]:
    """Group messages into turns: a human message, the tool traffic, the AI answer.

    A human message starts a turn; an AI message without tool calls ends it. An AI message that
    calls tools, and the tool messages answering it, are kept in the turn's ``tool_results``.
    """
    turns: list[TurnDraft] = []
    current = TurnDraft()
    for i, message in enumerate(messages):
        if isinstance(message, HumanMessage):
            if not current.empty():
                turns.append(current)
            current = TurnDraft(user_message=_text(message))
        elif isinstance(message, AIMessage) and message.tool_calls:
            if current.assistant_message:
                turns.append(current)
                current = TurnDraft()
            calls = [
                {"name": c["name"], "args": c["args"], "id": c["id"]} for c in message.tool_calls
            ]
            current.tool_results.append(
                {"type": "tool_calls", "content": _text(message), "tool_calls": calls}
            )
        elif isinstance(message, ToolMessage):
            current.tool_results.append(
                {
                    "type": "tool",
                    "content": _text(message),
                    "tool_call_id": message.tool_call_id,
                    "name": message.name,
                }
            )
        elif isinstance(message, AIMessage):
            if current.assistant_message:
                turns.append(current)
                current = TurnDraft()
            current.assistant_message = _text(message)
        else:
            raise ValidationError(
                f"message {i}: a {type(message).__name__} is not part of a conversation turn; "
                "the history keeps human, AI and tool messages (the system prompt stays yours)"
            )
    if not current.empty():
        turns.append(current)
    for turn in turns:
        if not (turn.user_message.strip() or turn.assistant_message.strip()):
            raise ValidationError(
                "tool messages need the human or AI message of their turn in the same call"
            )
    return turns


def turn_to_messages(turn: Turn) -> list[BaseMessage]:
    """A stored turn as LangChain messages, in the order they were added."""
    out: list[BaseMessage] = []
    if turn.user_message:
        out.append(HumanMessage(content=turn.user_message, id=f"{turn.id}:user"))
    for i, entry in enumerate(turn.tool_results or []):
        kind = entry.get("type") if isinstance(entry, dict) else None
        if kind == "tool_calls":
            out.append(
                AIMessage(
                    content=entry.get("content", ""),
                    tool_calls=entry["tool_calls"],
                    id=f"{turn.id}:call:{i}",
                )
            )
        elif kind == "tool":
            out.append(
                ToolMessage(
                    content=entry.get("content", ""),
                    tool_call_id=entry["tool_call_id"],
                    name=entry.get("name"),
                    id=f"{turn.id}:tool:{i}",
                )
            )
    if turn.assistant_message:
        out.append(AIMessage(content=turn.assistant_message, id=f"{turn.id}:ai"))
    return out


class ActroneChatMessageHistory(BaseChatMessageHistory):
    """A LangChain ``BaseChatMessageHistory`` over one session's recent turns (L1).

    Give it an ``actrone_pg.sync.MemoryManager`` to use every method, blocking and async, or an
    async ``actrone_pg.MemoryManager`` to use only the async ones (``aget_messages``,
    ``aadd_messages``, ``aclear``). ``max_turns`` caps the turns read (default: the manager's
    ``max_session_turns``). Bad input raises the library's ``ValidationError``, a ``ValueError``.
    """

    def __init__(
        self,
        manager: AnyManager,
        agent_id: str,
        session_id: str,
        *,
        max_turns: int | None = None,
    ) -> None:
        self._bridge = Bridge(manager, type(self).__name__)
        self.agent_id = agent_id
        self.session_id = session_id
        self.max_turns = max_turns

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The session's recent turns as messages, oldest first."""
        turns = self._bridge.call(
            "get_recent_turns", self.agent_id, self.session_id, self.max_turns
        )
        return [m for t in turns for m in turn_to_messages(t)]

    async def aget_messages(self) -> list[BaseMessage]:
        """The session's recent turns as messages, oldest first."""
        turns = await self._bridge.acall(
            "get_recent_turns", self.agent_id, self.session_id, self.max_turns
        )
        return [m for t in turns for m in turn_to_messages(t)]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Store the messages as turns (see :func:`messages_to_turns`)."""
        for turn in messages_to_turns(messages):
            self._bridge.store_turn(self.agent_id, self.session_id, turn)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Store the messages as turns (see :func:`messages_to_turns`)."""
        for turn in messages_to_turns(messages):
            await self._bridge.astore_turn(self.agent_id, self.session_id, turn)

    def clear(self) -> None:
        """Forget the session's turns (the agent's long-term memories stay)."""
        self._bridge.call("clear_session", self.agent_id, self.session_id)

    async def aclear(self) -> None:
        """Forget the session's turns (the agent's long-term memories stay)."""
        await self._bridge.acall("clear_session", self.agent_id, self.session_id)
