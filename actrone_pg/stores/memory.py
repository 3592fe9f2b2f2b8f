"""The in-process store: no server, no dependency beyond numpy; the library's default backend.

It is also the reference implementation of spec §3: it ranks with :mod:`actrone_pg.ranking`
directly, and every other backend is tested for parity against it. Data lives only as long as
the process. All methods run to completion without awaiting, so on one event loop each is atomic.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np

from actrone_pg.errors import DimensionMismatchError
from actrone_pg.models import Memory, ScoredMemory, SessionInfo, Turn
from actrone_pg.ranking import Candidate, CorpusStats, admit, bm25_score, rank, term_counts
from actrone_pg.stores.base import MemoryRecord, SearchRequest, Vector

if TYPE_CHECKING:
    from actrone_pg.config import MemoryConfig

__all__ = ["InMemoryStore", "from_config"]


@dataclass
class _Session:
    created_at: datetime
    last_active_at: datetime
    turns: list[Turn] = field(default_factory=list)
    turn_ids: set[str] = field(default_factory=set)
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Entry:
    memory: Memory
    vector: Vector
    tf: Counter[str]
    length: int


@dataclass
class _Agent:
    entries: dict[str, _Entry] = field(default_factory=dict)
    doc_freq: Counter[str] = field(default_factory=Counter)
    total_length: int = 0
    # embedder name -> (ids, matrix); dropped on every write that touches the agent
    matrices: dict[str, tuple[list[str], Vector]] = field(default_factory=dict)

    def add(self, entry: _Entry) -> None:
        self.remove(entry.memory.id)
        self.entries[entry.memory.id] = entry
        self.doc_freq.update(entry.tf.keys())
        self.total_length += entry.length
        self.matrices.clear()

    def remove(self, memory_id: str) -> bool:
        old = self.entries.pop(memory_id, None)
        if old is None:
            return False
        self.doc_freq.subtract(old.tf.keys())
        for term in old.tf:
            if self.doc_freq[term] <= 0:
                del self.doc_freq[term]
        self.total_length -= old.length
        self.matrices.clear()
        return True

    def matrix(self, embedder: str) -> tuple[list[str], Vector]:
        cached = self.matrices.get(embedder)
        if cached is None:
            ids = [i for i, e in self.entries.items() if e.memory.embedder == embedder]
            if ids:
                mat = np.stack([self.entries[i].vector for i in ids]).astype(np.float32)
            else:
                mat = np.zeros((0, 0), dtype=np.float32)
            cached = (ids, mat)
            self.matrices[embedder] = cached
        return cached


class InMemoryStore:
    """A store that keeps everything in this process's memory."""

    backend = "memory"

    def __init__(self) -> None:
        self._sessions: dict[tuple[str, str], _Session] = {}
        self._agents: dict[str, _Agent] = {}
        self._locks: dict[tuple[str, str], tuple[str, float]] = {}
        self._dimensions: dict[str, int] = {}

    async def setup(self) -> None:
        """Nothing to connect to."""

    async def close(self) -> None:
        """Nothing to release; the data stays until the object is dropped."""

    # -- L1 --
    def _live_session(self, agent_id: str, session_id: str, ttl_seconds: float) -> _Session | None:
        key = (agent_id, session_id)
        session = self._sessions.get(key)
        if session is None:
            return None
        if _now() - session.last_active_at > timedelta(seconds=ttl_seconds):
            del self._sessions[key]
            return None
        return session

    async def append_turn(self, turn: Turn, *, max_turns: int, ttl_seconds: float) -> None:
        """Append a turn (idempotent by id), trim to ``max_turns`` and refresh the expiry."""
        now = _now()
        session = self._live_session(turn.agent_id, turn.session_id, ttl_seconds)
        if session is None:
            session = _Session(created_at=now, last_active_at=now)
            self._sessions[(turn.agent_id, turn.session_id)] = session
        session.last_active_at = now
        if turn.id in session.turn_ids:
            return
        session.turns.append(turn)
        session.turn_ids.add(turn.id)
        if len(session.turns) > max_turns:
            dropped = session.turns[: len(session.turns) - max_turns]
            del session.turns[: len(dropped)]
            # Keep dropped ids so a late retry of an old turn is still recognised.
            # (The set is bounded by the session's lifetime.)

    async def recent_turns(
        self, agent_id: str, session_id: str, *, limit: int, ttl_seconds: float
    ) -> list[Turn]:
        """The newest ``limit`` turns, oldest first."""
        session = self._live_session(agent_id, session_id, ttl_seconds)
        if session is None:
            return []
        return list(session.turns[-limit:])

    async def get_session(
        self, agent_id: str, session_id: str, *, ttl_seconds: float
    ) -> SessionInfo | None:
        """Bookkeeping of a live session."""
        session = self._live_session(agent_id, session_id, ttl_seconds)
        if session is None:
            return None
        return SessionInfo(
            agent_id=agent_id,
            session_id=session_id,
            turn_count=len(session.turns),
            created_at=session.created_at,
            last_active_at=session.last_active_at,
            metadata=dict(session.metadata),
        )

    async def set_session_metadata(
        self, agent_id: str, session_id: str, metadata: dict[str, Any], *, ttl_seconds: float
    ) -> None:
        """Merge metadata into the session, creating it if needed."""
        now = _now()
        session = self._live_session(agent_id, session_id, ttl_seconds)
        if session is None:
            session = _Session(created_at=now, last_active_at=now)
            self._sessions[(agent_id, session_id)] = session
        session.metadata.update(metadata)
        session.last_active_at = now

    async def clear_session(self, agent_id: str, session_id: str) -> None:
        """Forget the session."""
        self._sessions.pop((agent_id, session_id), None)

    async def acquire_lock(self, agent_id: str, name: str, holder: str, ttl_seconds: float) -> bool:
        """Take the lock unless another holder has a live one."""
        key = (agent_id, name)
        now = time.monotonic()
        current = self._locks.get(key)
        if current is not None and current[1] > now and current[0] != holder:
            return False
        if current is not None and current[1] > now and current[0] == holder:
            return False
        self._locks[key] = (holder, now + ttl_seconds)
        return True

    async def release_lock(self, agent_id: str, name: str, holder: str) -> bool:
        """Release the lock if ``holder`` holds a live one."""
        key = (agent_id, name)
        current = self._locks.get(key)
        if current is None or current[0] != holder or current[1] <= time.monotonic():
            return False
        del self._locks[key]
        return True

    # -- L2 --
    async def upsert_memories(self, records: Sequence[MemoryRecord]) -> None:
        """Insert or replace; every record is checked before any is written."""
        dims = dict(self._dimensions)
        for rec in records:
            name = rec.memory.embedder
            size = int(rec.vector.shape[0])
            if dims.setdefault(name, size) != size:
                raise DimensionMismatchError(
                    f"embedder {name!r} stores {dims[name]}-dimensional vectors; "
                    f"got one of {size} (a new model needs a new embedder name)"
                )
        self._dimensions = dims
        for rec in records:
            tf, length = term_counts(rec.memory.content)
            vector = np.asarray(rec.vector, dtype=np.float32)
            agent = self._agents.setdefault(rec.memory.agent_id, _Agent())
            agent.add(_Entry(memory=rec.memory, vector=vector, tf=tf, length=length))

    async def get_memory(self, agent_id: str, memory_id: str) -> Memory | None:
        """One memory of the agent."""
        agent = self._agents.get(agent_id)
        entry = agent.entries.get(memory_id) if agent else None
        return entry.memory if entry else None

    async def delete_memory(self, agent_id: str, memory_id: str) -> bool:
        """Delete one memory of the agent."""
        agent = self._agents.get(agent_id)
        return agent.remove(memory_id) if agent else False

    async def count_memories(self, agent_id: str) -> int:
        """Number of the agent's memories."""
        agent = self._agents.get(agent_id)
        return len(agent.entries) if agent else 0

    async def erase_agent(self, agent_id: str) -> None:
        """Drop everything of the agent."""
        self._agents.pop(agent_id, None)
        for key in [k for k in self._sessions if k[0] == agent_id]:
            del self._sessions[key]
        for key in [k for k in self._locks if k[0] == agent_id]:
            del self._locks[key]

    async def search(self, request: SearchRequest) -> list[ScoredMemory]:
        """Admission, BM25 and ranking exactly as :mod:`actrone_pg.ranking` defines them."""
        expected = self._dimensions.get(request.embedder)
        size = int(request.vector.shape[0])
        if expected is not None and expected != size:
            raise DimensionMismatchError(
                f"embedder {request.embedder!r} stores {expected}-dimensional vectors; "
                f"the query vector has {size}"
            )
        agent = self._agents.get(request.agent_id)
        if agent is None:
            return []
        ids, mat = agent.matrix(request.embedder)
        if not ids:
            return []
        cos = (mat @ request.vector.astype(np.float32)).astype(np.float64)
        idx = np.flatnonzero(cos >= request.threshold)
        if idx.size > request.limit:
            # Keep everything tied with the limit-th cosine; admit() then breaks ties exactly.
            kth = np.partition(cos[idx], idx.size - request.limit)[idx.size - request.limit]
            idx = idx[cos[idx] >= kth]
        stats = CorpusStats(
            n_docs=len(agent.entries), total_length=agent.total_length, doc_freq=agent.doc_freq
        )
        candidates = []
        for i in idx.tolist():
            entry = agent.entries[ids[i]]
            candidates.append(
                Candidate(
                    id=entry.memory.id,
                    created_at=entry.memory.created_at,
                    cosine=float(cos[i]),
                    bm25=bm25_score(request.terms, entry.tf, entry.length, stats),
                    item=entry.memory,
                )
            )
        admitted = admit(candidates, request.threshold, request.limit)
        return [
            ScoredMemory(memory=replace(c.item, explain=e), explain=e)
            for c, e in rank(admitted, request.params, request.now)
        ]


def from_config(config: MemoryConfig) -> InMemoryStore:
    """Factory used by :func:`actrone_pg.stores.create_store`."""
    del config
    return InMemoryStore()


def _now() -> datetime:
    return datetime.now(UTC)
