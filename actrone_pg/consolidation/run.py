"""How the manager consolidates: which turns are pending, the memories' ids, the writes.

Lineage and idempotence. Each memory records the turns it came from (``source_turn_ids``,
``source="consolidated"``) and takes the time of the newest of them as its ``created_at``. Its id
is a UUID derived from the agent, those turn ids and its content, so consolidating the same turns
again (a retry after a failure half-way, a second process) rewrites the same memories instead of
adding copies. After a successful run the session's metadata remembers the newest turn done
(:data:`MARKER`), and the next run starts after it. A run that fails writes nothing of its own
(the new memories land in one batch, after every proposal was checked), leaves the marker where
it was, and the same turns are offered again next time.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from actrone_pg.consolidation.base import ConsolidatedMemory, ConsolidationContext, Consolidator
from actrone_pg.errors import ConsolidationError, MemoryNotFoundError, ValidationError
from actrone_pg.models import Memory, Turn

__all__ = [
    "MARKER",
    "MemoryAccess",
    "consolidate_turns",
    "marker_for",
    "memory_id",
    "pending_turns",
]

#: The session metadata key that remembers the newest consolidated turn and when that was.
MARKER = "actrone_consolidated"
_NAMESPACE = uuid.UUID("0b6f1c5e-7d54-4b8e-a3c1-5e2d9f7a4c61")


class MemoryAccess(Protocol):
    """What consolidating needs of the agent's memories: the manager's methods of these names.

    They validate, embed and write as a caller's calls do, so a proposal the manager would
    refuse from a caller is refused here too.
    """

    async def search_memories(self, agent_id: str, query: str, limit: int = 10) -> list[Memory]:
        """The agent's memories nearest to ``query``, best first."""
        ...

    async def inject_memories(
        self, agent_id: str, items: Iterable[Mapping[str, Any] | str]
    ) -> list[str]:
        """Write new memories in one batch; their ids."""
        ...

    async def update_memory(
        self,
        agent_id: str,
        memory_id: str,
        *,
        content: str | None = None,
        tags: Iterable[str] | None = None,
        importance: float | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Memory:
        """Write a new version of a current memory (``MemoryNotFoundError`` if there is none)."""
        ...


def pending_turns(turns: Sequence[Turn], marker: Any) -> list[Turn]:
    """The turns (oldest first) after the one the marker names; all of them without a marker.

    If the marked turn has been trimmed from the session, the turns newer than its time are
    pending.
    """
    if not isinstance(marker, dict) or not isinstance(marker.get("turn_id"), str):
        return list(turns)
    for i, turn in enumerate(turns):
        if turn.id == marker["turn_id"]:
            return list(turns[i + 1 :])
    try:
        done = datetime.fromisoformat(str(marker.get("created_at")))
    except ValueError:
        return list(turns)
    return [t for t in turns if t.created_at > done]


def marker_for(last: Turn, ran_at: datetime) -> dict[str, str]:
    """The marker after consolidating up to ``last``, at ``ran_at``."""
    return {
        "turn_id": last.id,
        "created_at": last.created_at.isoformat(),
        "ran_at": ran_at.astimezone(UTC).isoformat(),
    }


def last_run(marker: Any) -> datetime | None:
    """When the marker says the session was last consolidated (``None``: never)."""
    if not isinstance(marker, dict):
        return None
    try:
        return datetime.fromisoformat(str(marker.get("ran_at")))
    except ValueError:
        return None


def memory_id(agent_id: str, source_turn_ids: Sequence[str], content: str) -> str:
    """The id of a consolidated memory: the same agent, turns and content give the same id."""
    key = "\x00".join([agent_id, "\x1f".join(source_turn_ids), content])
    return str(uuid.uuid5(_NAMESPACE, key))


async def consolidate_turns(
    mm: MemoryAccess,
    consolidator: Consolidator,
    agent_id: str,
    session_id: str,
    turns: Sequence[Turn],
) -> list[str]:
    """Consolidate ``turns`` (oldest first) and write the result; the ids of the memories written.

    A consolidator's failure, or a proposal the manager refuses (bad tags, empty content), is a
    :class:`ConsolidationError` and nothing is written.
    """
    if not turns:
        return []
    context = ConsolidationContext(
        agent_id=agent_id,
        session_id=session_id,
        search=lambda text, limit: mm.search_memories(agent_id, text, limit),
    )
    try:
        proposed = await consolidator.consolidate(list(turns), context)
    except ConsolidationError:
        raise
    except Exception as exc:
        raise ConsolidationError(
            f"consolidator {getattr(consolidator, 'name', '?')!r} failed: "
            f"{type(exc).__name__}: {exc}; the turns stay pending"
        ) from exc
    if not isinstance(proposed, list) or not all(
        isinstance(p, ConsolidatedMemory) for p in proposed
    ):
        raise ConsolidationError(
            f"consolidator {getattr(consolidator, 'name', '?')!r} must return a list of "
            "ConsolidatedMemory"
        )
    by_id = {t.id: t for t in turns}
    items: list[dict[str, Any]] = []
    updates: list[tuple[ConsolidatedMemory, tuple[str, ...]]] = []
    for p in proposed:
        sources = tuple(s for s in p.source_turn_ids if s in by_id) or tuple(by_id)
        if p.supersedes is not None:
            updates.append((p, sources))
        else:
            items.append(_item(agent_id, session_id, consolidator.name, p, sources, by_id))
    ids: list[str] = []
    try:
        # Updates first: if a later write fails, the next run's consolidator sees the updated
        # memories and decides "nothing" for them, instead of superseding twice.
        for p, sources in updates:
            assert p.supersedes is not None
            try:
                # The new version's lineage goes in its metadata: update_memory (spec §9.2)
                # keeps the memory's own source_turn_ids, those of its first version.
                await mm.update_memory(
                    agent_id,
                    p.supersedes,
                    content=p.content,
                    importance=p.importance,
                    tags=p.tags,
                    metadata={"consolidator": consolidator.name, "source_turn_ids": list(sources)},
                )
            except MemoryNotFoundError:
                # Deleted or expired since the consolidator saw it: the fact is simply new.
                items.append(_item(agent_id, session_id, consolidator.name, p, sources, by_id))
                continue
            ids.append(p.supersedes)
        if items:
            ids.extend(await mm.inject_memories(agent_id, items))
    except ValidationError as exc:
        raise ConsolidationError(
            f"consolidator {consolidator.name!r} proposed a memory the manager refuses: {exc}"
        ) from exc
    return list(dict.fromkeys(ids))


def _item(
    agent_id: str,
    session_id: str,
    consolidator: str,
    p: ConsolidatedMemory,
    sources: tuple[str, ...],
    by_id: dict[str, Turn],
) -> dict[str, Any]:
    """The ``inject_memories`` item of a new consolidated memory."""
    return {
        "content": p.content,
        "memory_id": memory_id(agent_id, sources, p.content),
        "session_id": session_id,
        "content_type": p.content_type,
        "importance": p.importance,
        "tags": p.tags,
        "source": "consolidated",
        "created_at": max(by_id[s].created_at for s in sources),
        "metadata": {"consolidator": consolidator},
        "source_turn_ids": sources,
    }
