"""The records the library reads and returns: turns, memories, explanations and the context."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "DATETIME_FIELDS",
    "MEMORY_FIELD_TYPES",
    "STORED_MEMORY_FIELDS",
    "Explain",
    "Memory",
    "MemoryPage",
    "RetrievedContext",
    "ScoredMemory",
    "SessionInfo",
    "Turn",
    "Vector",
    "memory_from_fields",
    "memory_to_dict",
    "turn_to_dict",
]

#: An embedding: a one-dimensional float32 array (L2-normalised wherever a store receives it).
Vector = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class Turn:
    """One exchange of a session: the user's message and the assistant's reply."""

    id: str
    agent_id: str
    session_id: str
    user_message: str
    assistant_message: str
    tool_results: list[Any] | None
    created_at: datetime
    token_count: int


# Not frozen: a search builds one per admitted candidate (up to 500), and a frozen dataclass is
# about five times slower to construct (docs/notes/benchmarks.md, "Measurements behind the code").
@dataclass(slots=True)
class Explain:
    """Why a memory was ranked where it was.

    Ranks are 1-based; a rank is ``None`` where the memory is absent from that ranking (for example
    ``lexical_rank`` when the memory shares no term with the query). ``fused_score`` is the RRF
    score in hybrid mode and the weighted blend in classic mode.
    Each ranking of :data:`actrone_pg.ranking.CHANNELS` has its rank here, named by its
    ``Channel.field`` (a test checks that every channel has one).
    """

    cosine: float
    dense_rank: int | None
    lexical_rank: int | None
    recency_rank: int | None
    fused_score: float
    rerank_score: float | None = None
    bm25: float | None = None
    #: The score the memory inherited from the one written just before it in its session, where
    #: that placed it higher than its own ``fused_score`` (``neighbour_weight``), else ``None``.
    neighbour_score: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """The explanation as a JSON-ready dict: every field, in field order."""
        return {name: getattr(self, name) for name in _EXPLAIN_FIELDS}


_EXPLAIN_FIELDS = tuple(f.name for f in fields(Explain))


@dataclass(frozen=True, slots=True)
class Memory:
    """A long-term memory of an agent, in one of its versions.

    ``expires_at`` (``None``: never) is the moment from which no read returns the memory.
    ``source_turn_ids`` are the turns a consolidated memory came from (its lineage; empty for an
    injected one). Each :meth:`~actrone_pg.MemoryManager.update_memory` writes a new version under
    the same id: ``version`` counts from 1, ``valid_from`` is when this version was written and
    ``valid_to`` when a newer one replaced it (``None`` for the current version). ``created_at``
    is the memory's own time and stays the same across versions.
    """

    id: str
    agent_id: str
    session_id: str | None
    content: str
    content_type: str
    importance: float
    tags: tuple[str, ...]
    source: str
    sensitivity: str
    created_at: datetime
    metadata: dict[str, Any]
    embedder: str
    token_count: int
    expires_at: datetime | None = None
    source_turn_ids: tuple[str, ...] = ()
    version: int = 1
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    explain: Explain | None = None


#: The fields a store keeps for a memory, in declaration order: all but the explanation, which a
#: search attaches. The stores' columns, payloads and decoders derive from this one list.
STORED_MEMORY_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Memory) if f.name != "explain")
#: Each stored field's type as :class:`Memory` declares it (``"str | None"``, ``"datetime"``, …).
MEMORY_FIELD_TYPES: dict[str, str] = {
    f.name: str(f.type) for f in fields(Memory) if f.name in STORED_MEMORY_FIELDS
}
# How a stored value becomes a field of its declared type (a database or JSON value may be an
# int for a float, a list for a tuple); other fields are taken as they are.
_COERCE: dict[str, Callable[[Any], Any]] = {
    "float": float,
    "int": int,
    "tuple[str, ...]": tuple,
    "dict[str, Any]": dict,
    "datetime": lambda value: _utc(value),
    "datetime | None": lambda value: None if value is None else _utc(value),
}
_DECODE = tuple((name, _COERCE.get(MEMORY_FIELD_TYPES[name])) for name in STORED_MEMORY_FIELDS)
# Fields added after the first release: a row or payload written before them holds none.
_LATER_DEFAULTS: dict[str, Any] = {
    f.name: f.default
    for f in fields(Memory)
    if f.name in ("expires_at", "source_turn_ids", "version", "valid_from", "valid_to")
}


def _utc(value: datetime | str) -> datetime:
    # A database returns its session's time zone, a payload an ISO 8601 string: both become UTC.
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.astimezone(UTC)


#: The stored fields that hold a datetime (ISO 8601 strings in JSON and payloads).
DATETIME_FIELDS: tuple[str, ...] = tuple(
    name for name, kind in MEMORY_FIELD_TYPES.items() if kind.startswith("datetime")
)


def memory_from_fields(values: Mapping[str, Any], **given: Any) -> Memory:
    """A stored memory from its fields by name, each coerced to the type :class:`Memory` declares.

    ``values`` is a row read by column name or a payload; ``given`` supplies the fields a store
    keeps elsewhere or converts itself (``agent_id`` when the query named the agent, a timestamp).
    """
    out: dict[str, Any] = {}
    for name, coerce in _DECODE:
        if name in given:
            value = given[name]
        elif name in values:
            value = values[name]
        else:
            value = _LATER_DEFAULTS[name]
        out[name] = value if coerce is None else coerce(value)
    return Memory(**out)


@dataclass(frozen=True, slots=True)
class MemoryPage:
    """One page of :meth:`~actrone_pg.MemoryManager.list_memories`: current memories, newest
    first, and the cursor of the next page (``None`` after the last one)."""

    items: list[Memory]
    next_cursor: str | None


@dataclass(slots=True)
class ScoredMemory:
    """A memory as a store's search returns it: the memory, its explanation, best first."""

    memory: Memory
    #: ``None`` where the search was asked for no explanations (``SearchRequest.explain``).
    explain: Explain | None


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """What a store knows about a session (L1)."""

    agent_id: str
    session_id: str
    turn_count: int
    created_at: datetime
    last_active_at: datetime
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RetrievedContext:
    """The memory part of a prompt, assembled inside a token budget.

    ``session_budget`` and ``episodic_budget`` are the shares of ``token_budget`` given to recent
    turns (L1) and to long-term memories (L2); the rest is the caller's. ``session_tokens`` and
    ``episodic_tokens`` are what was used of each; neither ever exceeds its share.
    """

    agent_id: str
    session_id: str
    query: str
    recent_turns: list[Turn]
    episodic_memories: list[Memory]
    token_budget: int
    session_budget: int
    episodic_budget: int
    session_tokens: int
    episodic_tokens: int
    retrieval_ms: float
    relevance_threshold: float
    candidates_considered: int = 0

    @property
    def total_tokens(self) -> int:
        """Tokens used by both shares together."""
        return self.session_tokens + self.episodic_tokens

    @property
    def reserved_budget(self) -> int:
        """The part of the budget left for the caller's system prompt and current turn."""
        return self.token_budget - self.session_budget - self.episodic_budget

    def to_dict(self) -> dict[str, Any]:
        """The context as a JSON-ready dict (datetimes as ISO 8601 strings)."""

        return {
            "agent_id": self.agent_id,
            "session_id": self.session_id,
            "query": self.query,
            "token_budget": self.token_budget,
            "session_budget": self.session_budget,
            "episodic_budget": self.episodic_budget,
            "reserved_budget": self.reserved_budget,
            "session_tokens": self.session_tokens,
            "episodic_tokens": self.episodic_tokens,
            "retrieval_ms": self.retrieval_ms,
            "relevance_threshold": self.relevance_threshold,
            "candidates_considered": self.candidates_considered,
            "recent_turns": [turn_to_dict(t) for t in self.recent_turns],
            "episodic_memories": [memory_to_dict(m) for m in self.episodic_memories],
        }


def memory_to_dict(m: Memory) -> dict[str, Any]:
    """A memory as a JSON-ready dict: every field, tags as a list, the time as ISO 8601."""
    out = {name: getattr(m, name) for name in STORED_MEMORY_FIELDS}
    out["tags"] = list(m.tags)
    out["source_turn_ids"] = list(m.source_turn_ids)
    for name in DATETIME_FIELDS:
        value = out[name]
        out[name] = None if value is None else value.isoformat()
    out["explain"] = m.explain.as_dict() if m.explain else None
    return out


def turn_to_dict(t: Turn) -> dict[str, Any]:
    """A turn as a JSON-ready dict: every field but the agent's id, the time as ISO 8601."""
    out = {f.name: getattr(t, f.name) for f in fields(Turn) if f.name != "agent_id"}
    out["created_at"] = t.created_at.isoformat()
    return out
