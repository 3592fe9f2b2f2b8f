"""A LlamaIndex memory block filled from ``retrieve_context`` (``[llamaindex]`` extra).

from llama_index.core.memory import Memory
from actrone_pg.integrations.llamaindex import ActroneMemoryBlock

block = ActroneMemoryBlock(manager=mm, agent_id="agent-1", token_budget=2000)
memory = Memory.from_defaults(session_id="session-1", memory_blocks=[block])

LlamaIndex's ``Memory`` keeps the recent chat itself and asks each block for its content before a
call. This block asks actrone_pg for the long-term memories relevant to the latest messages, inside
the L2 share of ``token_budget`` (25 % by default), and returns them as text for the memory
template. Messages that ``Memory`` flushes out of its short-term queue are stored as a long-term
memory, so that they can be retrieved later when they are relevant.
"""

from __future__ import annotations

from typing import Any

from actrone_pg.errors import MissingDependencyError
from actrone_pg.integrations._bridge import Bridge

try:
    from llama_index.core.base.llms.types import ChatMessage, MessageRole
    from llama_index.core.bridge.pydantic import Field, PrivateAttr
    from llama_index.core.memory.memory import BaseMemoryBlock
except ImportError:  # pragma: no cover - exercised by installs without the extra
    raise MissingDependencyError("llamaindex", "llama-index-core") from None

__all__ = ["ActroneMemoryBlock"]

_ROLES = (MessageRole.USER, MessageRole.ASSISTANT)


class ActroneMemoryBlock(BaseMemoryBlock[str]):
    """Long-term memories relevant to the conversation, within the L2 share of a token budget.

    ``manager`` is an async ``actrone_pg.MemoryManager`` (for ``Memory.aget``/``aput``) or an
    ``actrone_pg.sync.MemoryManager`` (for those and the blocking ``get``/``put``). The session
    is ``Memory``'s ``session_id`` unless ``session_id`` is set here. Bad input raises the
    library's ``ValidationError``, a ``ValueError``.
    """

    name: str = Field(default="LongTermMemory", description="The name of the memory block.")
    manager: Any = Field(description="An actrone_pg MemoryManager, async or sync.", exclude=True)
    agent_id: str = Field(description="The agent whose memories to retrieve and store.")
    session_id: str | None = Field(
        default=None, description="The session; None: the one the Memory passes."
    )
    token_budget: int = Field(
        default=2000,
        description="The budget given to retrieve_context; memories fill its L2 share.",
    )
    query_messages: int = Field(
        default=1, description="How many of the latest user/assistant messages form the query."
    )
    _bridge: Bridge = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        """Check the manager once, when the block is built."""
        self._bridge = Bridge(self.manager, type(self).__name__)

    def _session(self, block_kwargs: dict[str, Any]) -> str:
        given = block_kwargs.get("session_id")
        session = self.session_id or given
        return session if isinstance(session, str) else ""

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        """The relevant memories, best first, one per line (empty when there are none)."""
        said = [m for m in messages or [] if m.role in _ROLES and (m.content or "").strip()]
        if not said or self.query_messages < 1:
            return ""
        query = "\n".join(str(m.content) for m in said[-self.query_messages :])
        ctx = await self._bridge.acall(
            "retrieve_context",
            self.agent_id,
            self._session(block_kwargs),
            query,
            self.token_budget,
        )
        return "\n".join(f"- {m.content}" for m in ctx.episodic_memories)

    async def _aput(self, messages: list[ChatMessage]) -> None:
        """Keep the flushed messages as one long-term memory of the conversation."""
        lines = [
            f"{m.role.value}: {m.content}"
            for m in messages
            if m.role in _ROLES and (m.content or "").strip()
        ]
        if not lines:
            return
        session = self.session_id or next(
            (m.additional_kwargs.get("session_id") for m in messages), None
        )
        await self._bridge.acall(
            "inject_memory",
            self.agent_id,
            "\n".join(lines),
            session_id=session,
            content_type="conversation",
            source="llamaindex",
        )
