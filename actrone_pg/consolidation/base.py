"""What a consolidator is: turns of a session in, memories to write out.

A consolidator is a small protocol, like the embedder: any object with a ``name`` and an
``async consolidate(turns, context)`` method. It only proposes memories; the manager derives
their ids, embeds and writes them, records their lineage and remembers which turns are done
(``actrone_pg.consolidation.run``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from actrone_pg.models import Memory, Turn

__all__ = ["ConsolidatedMemory", "ConsolidationContext", "Consolidator"]


@dataclass(frozen=True, slots=True)
class ConsolidatedMemory:
    """A memory a consolidator proposes.

    ``source_turn_ids`` are the turns it came from (a subset of the turns consolidated; empty
    means all of them). ``supersedes`` names a current memory of the agent that this one
    replaces (a new version of it, written with ``update_memory``) instead of being added.
    """

    content: str
    content_type: str = "fact"
    importance: float = 0.5
    tags: tuple[str, ...] = ()
    source_turn_ids: tuple[str, ...] = ()
    supersedes: str | None = None


@dataclass(frozen=True, slots=True)
class ConsolidationContext:
    """What a consolidator may know besides the turns: whose they are, and the agent's memory.

    ``search(text, limit)`` returns the agent's current memories nearest to ``text``, best first
    (``MemoryManager.search_memories``), so that a consolidator can update instead of repeating.
    """

    agent_id: str
    session_id: str
    search: Callable[[str, int], Awaitable[list[Memory]]]


@runtime_checkable
class Consolidator(Protocol):
    """Anything that turns a session's turns into long-term memories."""

    #: Short name, recorded in each memory's metadata (``"extractive"``, ``"llm:<model>"``).
    name: str

    async def consolidate(
        self, turns: Sequence[Turn], context: ConsolidationContext
    ) -> list[ConsolidatedMemory]:
        """The memories ``turns`` (oldest first) leave behind; ``[]`` if nothing is worth it.

        Raise :class:`~actrone_pg.errors.ConsolidationError` when it cannot be done now (a model
        service that times out, refuses or answers garbage): nothing is written and the same
        turns are offered again later.
        """
        ...
