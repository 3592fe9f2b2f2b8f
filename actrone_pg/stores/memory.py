"""The in-process store: no server, no dependency beyond numpy; the library's default backend.

It is also the reference backend of the ranking (README, "How retrieval works"): it hands every
vector of the agent to :func:`actrone_pg.pipeline.search` as a candidate, and every other backend
is tested for parity against it. Data lives only as long as the process. All methods but
:meth:`InMemoryStore.update_memory` run to completion without awaiting, so on one event loop each
is atomic; updates of one memory are serialised by a lock of that memory.
"""

from __future__ import annotations

import math
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np

from actrone_pg import pipeline
from actrone_pg.filters import MemoryFilter
from actrone_pg.models import Memory, SessionInfo, Turn, Vector
from actrone_pg.pipeline import Candidates, PackedSearch, SearchRequest
from actrone_pg.ranking import (
    DEFAULT_ANALYZER,
    CorpusStats,
    analyzer,
    code_point_ranks,
    cosines,
    micros,
    recency_places,
)
from actrone_pg.stores._keyed_locks import KeyedLocks
from actrone_pg.stores._memory_index import FilterIndex
from actrone_pg.stores._memory_space import NEVER, Space, aligned_rows
from actrone_pg.stores.base import (
    WRITE_GENERATION,
    BuildVersion,
    Fence,
    MemoryRecord,
    batch_dimensions,
    check_query_dimensions,
    dimension_mismatch,
    lock_lost,
)

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

    def expired(self, now: datetime, ttl_seconds: float) -> bool:
        """Idle longer than ``ttl_seconds`` at ``now``."""
        return now - self.last_active_at > timedelta(seconds=ttl_seconds)


@dataclass
class _Entry:
    memory: Memory
    vector: Vector
    tf: Counter[str]
    length: int


@dataclass
class _Agent:
    entries: dict[str, _Entry] = field(default_factory=dict)
    # memory id -> its replaced versions, oldest first
    history: dict[str, list[Memory]] = field(default_factory=dict)
    doc_freq: Counter[str] = field(default_factory=Counter)
    postings: dict[str, dict[str, int]] = field(default_factory=dict)
    total_length: int = 0
    # embedder name -> arrays; dropped on every write that touches the agent
    spaces: dict[str, Space] = field(default_factory=dict)
    # the filterable fields of every entry as columns; dropped with the spaces
    index: FilterIndex | None = None

    def add(self, entry: _Entry) -> None:
        self.remove(entry.memory.id)
        mid = entry.memory.id
        self.entries[mid] = entry
        self.doc_freq.update(entry.tf.keys())
        for term, count in entry.tf.items():
            self.postings.setdefault(term, {})[mid] = count
        self.total_length += entry.length
        self.spaces.clear()
        self.index = None

    def remove(self, memory_id: str) -> bool:
        old = self.entries.pop(memory_id, None)
        if old is None:
            return False
        self.doc_freq.subtract(old.tf.keys())
        for term in old.tf:
            if self.doc_freq[term] <= 0:
                del self.doc_freq[term]
            posting = self.postings.get(term)
            if posting is not None:
                posting.pop(memory_id, None)
                if not posting:
                    del self.postings[term]
        self.total_length -= old.length
        self.spaces.clear()
        self.index = None
        return True

    def filter_index(self) -> FilterIndex:
        """The entries' filterable fields as columns, rows in the order of ``entries``."""
        if self.index is None:
            entries = list(self.entries.values())
            self.index = FilterIndex.build([e.memory for e in entries], [e.length for e in entries])
        return self.index

    def space(self, embedder: str) -> Space | None:
        cached = self.spaces.get(embedder)
        if cached is None:
            rows = [r for r, e in enumerate(self.entries.values()) if e.memory.embedder == embedder]
            if not rows:
                return None
            every = list(self.entries)
            ids = [every[r] for r in rows]
            entries = [self.entries[i] for i in ids]
            vectors = np.stack([e.vector for e in entries]).astype(np.float32)
            created_us = np.array([micros(e.memory.created_at) for e in entries], dtype=np.int64)
            id_order = code_point_ranks(ids)
            expires_us = np.array(
                [
                    NEVER if e.memory.expires_at is None else micros(e.memory.expires_at)
                    for e in entries
                ],
                dtype=np.int64,
            )
            created_us, id_order, recency, tokens, lengths, slots = aligned_rows(
                created_us,
                id_order,
                recency_places(created_us, id_order),
                np.array([e.memory.token_count for e in entries], dtype=np.int64),
                np.array([e.length for e in entries], dtype=np.int64),
                np.full(len(ids), -1, dtype=np.int64),
            )
            cached = Space(
                ids=ids,
                memories=[e.memory for e in entries],
                matrix=np.ascontiguousarray(vectors.T),
                created_us=created_us,
                id_order=id_order,
                recency=recency,
                lengths=lengths,
                tokens=tokens,
                expires_us=expires_us,
                first_expiry=int(expires_us.min()),
                rows=np.array(rows, dtype=np.intp),
                frequencies=[e.tf for e in entries],
                column={mid: i for i, mid in enumerate(ids)},
                slots=slots,
            )
            self.spaces[embedder] = cached
        return cached


class InMemoryStore:
    """A store that keeps everything in this process's memory."""

    backend = "memory"

    def __init__(
        self, *, text_analyzer: str = DEFAULT_ANALYZER, lexical_dates: bool | None = None
    ) -> None:
        #: How contents become BM25 terms (``MemoryConfig.text_analyzer`` and ``lexical_dates``).
        self.analyzer = analyzer(text_analyzer, dates=lexical_dates)
        self._sessions: dict[tuple[str, str], _Session] = {}
        self._agents: dict[str, _Agent] = {}
        self._locks: dict[tuple[str, str], tuple[str, float]] = {}
        self._dimensions: dict[str, int] = {}
        # (agent, memory id) -> the lock its updates take, and how many hold or await it
        self._updating = KeyedLocks()

    async def setup(self) -> None:
        """Nothing to connect to."""

    async def close(self) -> None:
        """Nothing to release; the data stays until the object is dropped."""

    # -- L1 --
    def _live_session(self, agent_id: str, session_id: str, ttl_seconds: float) -> _Session | None:
        # An expired session is left for the sweeper, which consolidates it before it deletes
        # it: reading it must not lose its turns (as on PostgreSQL and Redis).
        session = self._sessions.get((agent_id, session_id))
        if session is None or session.expired(_now(), ttl_seconds):
            return None
        return session

    def _touch(self, agent_id: str, session_id: str, ttl_seconds: float) -> _Session:
        """The live session (a new one if absent or expired), marked active now."""
        now = _now()
        session = self._live_session(agent_id, session_id, ttl_seconds)
        if session is None:
            session = _Session(created_at=now, last_active_at=now)
            self._sessions[(agent_id, session_id)] = session
        session.last_active_at = now
        return session

    async def sweep_expired_sessions(self, *, ttl_seconds: float, limit: int) -> int:
        """Drop up to ``limit`` sessions idle longer than ``ttl_seconds`` (turns included)."""
        now = _now()
        expired = [k for k, s in self._sessions.items() if s.expired(now, ttl_seconds)][:limit]
        for key in expired:
            del self._sessions[key]
        return len(expired)

    async def expired_sessions(self, *, ttl_seconds: float, limit: int) -> list[tuple[str, str]]:
        """Up to ``limit`` sessions idle longer than ``ttl_seconds``."""
        now = _now()
        return [k for k, s in self._sessions.items() if s.expired(now, ttl_seconds)][:limit]

    async def delete_expired_session(
        self, agent_id: str, session_id: str, *, ttl_seconds: float
    ) -> bool:
        """Drop the session if it is still expired."""
        session = self._sessions.get((agent_id, session_id))
        if session is None or not session.expired(_now(), ttl_seconds):
            return False
        del self._sessions[(agent_id, session_id)]
        return True

    async def append_turn(
        self, turn: Turn, *, max_turns: int, ttl_seconds: float, fence: Fence | None = None
    ) -> None:
        """Append a turn (idempotent by id), trim to ``max_turns`` and refresh the expiry (if
        ``fence`` holds)."""
        self._check_fence(turn.agent_id, fence)
        session = self._touch(turn.agent_id, turn.session_id, ttl_seconds)
        if turn.id in session.turn_ids:
            return
        session.turns.append(turn)
        # Trimmed turns keep their ids, so a late retry of an old turn is still recognised;
        # the set lives as long as the session.
        session.turn_ids.add(turn.id)
        del session.turns[:-max_turns]

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
        return None if session is None else _info(agent_id, session_id, session)

    async def list_sessions(self, agent_id: str, *, ttl_seconds: float) -> list[SessionInfo]:
        """The agent's live sessions by id (Python orders strings by code point)."""
        now = _now()
        live = [
            (key[1], session)
            for key, session in self._sessions.items()
            if key[0] == agent_id and not session.expired(now, ttl_seconds)
        ]
        live.sort(key=lambda pair: pair[0])
        return [_info(agent_id, session_id, session) for session_id, session in live]

    async def set_session_metadata(
        self,
        agent_id: str,
        session_id: str,
        metadata: dict[str, Any],
        *,
        ttl_seconds: float,
        fence: Fence | None = None,
    ) -> None:
        """Merge metadata into the session, creating it if needed (if ``fence`` holds)."""
        self._check_fence(agent_id, fence)
        self._touch(agent_id, session_id, ttl_seconds).metadata.update(metadata)

    async def clear_session(self, agent_id: str, session_id: str) -> None:
        """Forget the session."""
        self._sessions.pop((agent_id, session_id), None)

    async def writer_fence(self, agent_id: str) -> Fence:
        """The agent's write generation (a new one if it has none); an erase, which runs
        without awaiting anything, is never under way here."""
        key = (agent_id, WRITE_GENERATION)
        current = self._locks.get(key)
        if current is None:
            current = self._locks[key] = (str(uuid.uuid4()), math.inf)
        return Fence(WRITE_GENERATION, current[0])

    async def acquire_lock(self, agent_id: str, name: str, holder: str, ttl_seconds: float) -> bool:
        """Take the lock unless it is live (held by anyone, ``holder`` included, as SET NX does)."""
        key = (agent_id, name)
        now = time.monotonic()
        current = self._locks.get(key)
        if current is not None and current[1] > now:
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

    def _check_fence(self, agent_id: str, fence: Fence | None) -> None:
        """Raise :class:`LockLostError` unless ``fence`` is ``None`` or its lock is held."""
        if fence is None:
            return
        current = self._locks.get((agent_id, fence.name))
        if current is None or current[0] != fence.holder or current[1] <= time.monotonic():
            raise lock_lost(agent_id, fence)

    # -- L2 --
    async def upsert_memories(
        self, records: Sequence[MemoryRecord], *, fence: Fence | None = None
    ) -> None:
        """Insert or replace; every record (and the fence) is checked before any is written."""
        for agent_id in {r.memory.agent_id for r in records}:
            self._check_fence(agent_id, fence)
        self._write(records)

    def _write(self, records: Sequence[MemoryRecord]) -> None:
        dims = dict(self._dimensions)
        for name, size in batch_dimensions(records).items():
            if dims.setdefault(name, size) != size:
                raise dimension_mismatch(name, dims[name], size)
        self._dimensions = dims
        for rec in records:
            tf, length = self.analyzer.document_counts(rec.memory.content, rec.memory.created_at)
            vector = np.asarray(rec.vector, dtype=np.float32)
            agent = self._agents.setdefault(rec.memory.agent_id, _Agent())
            agent.add(_Entry(memory=rec.memory, vector=vector, tf=tf, length=length))

    async def get_memory(self, agent_id: str, memory_id: str) -> Memory | None:
        """One memory of the agent."""
        agent = self._agents.get(agent_id)
        entry = agent.entries.get(memory_id) if agent else None
        return entry.memory if entry else None

    async def update_memory(
        self,
        agent_id: str,
        memory_id: str,
        build: BuildVersion,
        *,
        fence: Fence | None = None,
    ) -> Memory | None:
        """The new current version built from the current one, the old one kept; one update of
        a memory at a time (``build`` may await), in the order they came."""
        async with self._updating.hold((agent_id, memory_id)):
            return await self._update(agent_id, memory_id, build, fence)

    async def _update(
        self, agent_id: str, memory_id: str, build: BuildVersion, fence: Fence | None
    ) -> Memory | None:
        while True:
            # The fence first, as PostgreSQL checks it: a writer the erase overtook is told so,
            # not that the memory is missing.
            self._check_fence(agent_id, fence)
            agent = self._agents.get(agent_id)
            entry = agent.entries.get(memory_id) if agent else None
            if agent is None or entry is None:
                return None
            record = await build(entry.memory)
            # Only a write that is not an update (an inject of this id, a delete) can have
            # changed the memory while build awaited: then build again from what is there now.
            if self._agents.get(agent_id) is not agent or agent.entries.get(memory_id) is not entry:
                continue
            m = record.memory
            expected = self._dimensions.get(m.embedder)
            if expected is not None and expected != int(record.vector.shape[0]):
                raise dimension_mismatch(m.embedder, expected, int(record.vector.shape[0]))
            self._check_fence(agent_id, fence)
            old = replace(entry.memory, valid_to=m.valid_from)
            self._write([record])
            agent.history.setdefault(m.id, []).append(old)
            return m

    async def memory_history(self, agent_id: str, memory_id: str) -> list[Memory]:
        """The replaced versions, then the current one."""
        agent = self._agents.get(agent_id)
        entry = agent.entries.get(memory_id) if agent else None
        if agent is None or entry is None:
            return []
        return [*agent.history.get(memory_id, []), entry.memory]

    async def delete_memory(self, agent_id: str, memory_id: str) -> bool:
        """Delete one memory of the agent, with its replaced versions."""
        agent = self._agents.get(agent_id)
        if agent is None:
            return False
        agent.history.pop(memory_id, None)
        return agent.remove(memory_id)

    async def list_memories(
        self,
        agent_id: str,
        *,
        now: datetime,
        limit: int,
        after: tuple[datetime, str] | None = None,
        filter: MemoryFilter | None = None,
    ) -> list[Memory]:
        """Newest first, from ``after`` on (a keyset page)."""
        agent = self._agents.get(agent_id)
        if agent is None:
            return []
        if filter is None:
            memories: list[Memory] = [e.memory for e in agent.entries.values()]
        else:
            index = agent.filter_index()
            memories = [index.memories[i] for i in np.flatnonzero(index.mask(filter)).tolist()]
        found = [
            m
            for m in memories
            if (m.expires_at is None or m.expires_at > now)
            and (after is None or (m.created_at, m.id) < after)
        ]
        found.sort(key=lambda m: (m.created_at, m.id), reverse=True)
        return found[:limit]

    async def sweep_expired_memories(self, *, limit: int) -> int:
        """Delete up to ``limit`` expired memories (all versions), statistics kept exact."""
        now = _now()
        removed = 0
        for agent in self._agents.values():
            expired = [
                mid
                for mid, e in agent.entries.items()
                if e.memory.expires_at is not None and e.memory.expires_at <= now
            ]
            for mid in expired[: limit - removed]:
                agent.history.pop(mid, None)
                agent.remove(mid)
                removed += 1
            if removed >= limit:
                break
        return removed

    async def count_memories(self, agent_id: str) -> int:
        """Number of the agent's memories not expired now."""
        agent = self._agents.get(agent_id)
        if agent is None:
            return 0
        now = _now()
        return sum(
            1
            for e in agent.entries.values()
            if e.memory.expires_at is None or e.memory.expires_at > now
        )

    async def erase_agent(self, agent_id: str) -> None:
        """Drop everything of the agent."""
        self._agents.pop(agent_id, None)
        for key in [k for k in self._sessions if k[0] == agent_id]:
            del self._sessions[key]
        for key in [k for k in self._locks if k[0] == agent_id]:
            del self._locks[key]

    async def search(self, request: SearchRequest) -> PackedSearch:
        """Every vector of the agent under the embedder is a candidate of the pipeline."""
        expected = self._dimensions.get(request.embedder)
        if expected is not None:
            check_query_dimensions(request.embedder, expected, request.vector)
        agent = self._agents.get(request.agent_id)
        space = agent.space(request.embedder) if agent is not None else None
        if agent is None or space is None:
            return PackedSearch(hits=[], candidates_considered=0, tokens=0)
        entries, memories, postings = agent.entries, space.memories, agent.postings
        # Expired memories are never candidates; the check costs nothing when none expires.
        allowed = None
        if space.first_expiry <= micros(request.now):
            allowed = space.expires_us > micros(request.now)
        stats = CorpusStats(len(entries), agent.total_length, agent.doc_freq)
        if request.filter is not None:
            index = agent.filter_index()
            mask = index.mask(request.filter)
            # A filter that every memory passes changes nothing: not even the statistics.
            if not mask.all():
                stats = index.stats(mask, request.terms, postings)
                # Rows are all the agent's memories, columns the embedder's; with one embedder
                # they are the same.
                if space.rows.size != mask.size:
                    mask = mask[space.rows]
                allowed = mask if allowed is None else allowed & mask
        candidates = Candidates(
            cosine=cosines(request.vector.astype(np.float32), space.matrix),
            created_us=space.created_us,
            id_order=space.id_order,
            tokens=space.tokens,
            term_frequencies=space.term_frequencies,
            # Looked up only for the hits built, by column: right after the scan of the matrix
            # each look-up misses the CPU caches, a dict's several times.
            memories=lambda columns: [memories[c] for c in columns],
            allowed=allowed,
            recency=space.recency,
        )
        return pipeline.search(request, candidates, stats)

    async def fetch_context(
        self,
        agent_id: str,
        session_id: str,
        *,
        limit: int,
        ttl_seconds: float,
        request: SearchRequest,
    ) -> tuple[list[Turn], PackedSearch]:
        """L1 and L2 in one call: neither awaits anything, so two concurrent tasks (what the
        manager runs for a store without this method) would only add their scheduling."""
        turns = await self.recent_turns(agent_id, session_id, limit=limit, ttl_seconds=ttl_seconds)
        return turns, await self.search(request)


def from_config(config: MemoryConfig) -> InMemoryStore:
    """Factory used by :func:`actrone_pg.stores.create_store`."""
    return InMemoryStore(text_analyzer=config.text_analyzer, lexical_dates=config.lexical_dates)


def _now() -> datetime:
    return datetime.now(UTC)


def _info(agent_id: str, session_id: str, session: _Session) -> SessionInfo:
    return SessionInfo(
        agent_id=agent_id,
        session_id=session_id,
        turn_count=len(session.turns),
        created_at=session.created_at,
        last_active_at=session.last_active_at,
        metadata=dict(session.metadata),
    )
