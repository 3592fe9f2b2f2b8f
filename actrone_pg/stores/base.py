"""The store protocol: what every backend implements, and the records that cross it.

The manager talks to a store only through :class:`Store`. A store owns persistence and, for L2,
candidate search: a Python store hands its candidates and the agent's BM25 statistics to
:func:`actrone_pg.pipeline.search`, PostgreSQL ranks in SQL exactly as the pipeline does (the
conformance and parity suites check this). Every method is scoped by ``agent_id``: no method
reads, changes or deletes another agent's data, whatever ids it is given.

Inputs arrive validated (ids non-blank, no NUL bytes, finite L2-normalised float32 vectors of the
embedder's dimension); a store need not validate them again, but must still refuse to mix
vectors of different dimensions under one embedder name (:class:`DimensionMismatchError`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from actrone_pg.errors import DimensionMismatchError, LockLostError
from actrone_pg.filters import MemoryFilter
from actrone_pg.models import Memory, SessionInfo, Turn, Vector
from actrone_pg.pipeline import (
    PackedSearch,
    SearchRequest,
    pack_hits,
    stored_tokens,
)

__all__ = [
    "BuildVersion",
    "ContextStore",
    "FENCED_LOCK",
    "Fence",
    "WRITE_GENERATION",
    "MemoryRecord",
    "PackedSearch",
    "SearchRequest",
    "Store",
    "Vector",
    "batch_dimensions",
    "check_query_dimensions",
    "dimension_mismatch",
    "lock_lost",
    "pack_hits",
    "stored_tokens",
]


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    """A memory to write, with its L2-normalised embedding."""

    memory: Memory
    vector: Vector


#: The lock fenced writes are made under (a consolidation's): ``erase_agent`` keeps it from
#: being taken while it erases, where a store needs that to be told (PostgreSQL's erase).
FENCED_LOCK = "maintenance"

#: The name under which a store keeps the agent's write generation (:meth:`Store.writer_fence`)
#: among its locks. Empty: a name no caller's lock can have (``try_lock`` refuses a blank name).
WRITE_GENERATION = ""


@dataclass(frozen=True, slots=True)
class Fence:
    """The lock a write is made under: the agent's lock ``name``, held by ``holder``.

    A store given a fence writes only if ``holder`` still holds that live lock of the written
    agent, checked atomically with the write (the same transaction or script); otherwise it
    raises :class:`~actrone_pg.errors.LockLostError` and writes nothing. ``erase_agent`` deletes
    the agent's locks, so a consolidation that was running when the erase came (here or in
    another process) cannot write the erased agent back.
    """

    name: str
    holder: str

    @property
    def erased_only(self) -> bool:
        """Whether only an erasure ends this fence (a write generation, not a lock that lapses)."""
        return self.name == WRITE_GENERATION


#: What :meth:`Store.update_memory` is given: the current version in, the new record out.
BuildVersion = Callable[[Memory], Awaitable[MemoryRecord]]


@runtime_checkable
class Store(Protocol):
    """Persistence for L1 (turns, sessions, locks) and L2 (memories, vectors, search)."""

    #: Short backend name ("memory", "postgres", "redis_qdrant").
    backend: str

    async def setup(self) -> None:
        """Connect (and migrate, where the backend does); called once before first use."""

    async def close(self) -> None:
        """Release connections. Calling it twice is harmless."""

    # -- L1 --
    async def append_turn(
        self, turn: Turn, *, max_turns: int, ttl_seconds: float, fence: Fence | None = None
    ) -> None:
        """Append ``turn`` to its session, keeping the newest ``max_turns``.

        Idempotent by ``turn.id``: appending the same turn twice stores it once. The session's
        expiry moves to ``ttl_seconds`` from now; a session already expired starts empty. With
        ``fence``, only while its lock is held (:class:`Fence`).
        """

    async def recent_turns(
        self, agent_id: str, session_id: str, *, limit: int, ttl_seconds: float
    ) -> list[Turn]:
        """The newest ``limit`` turns of a live session, oldest first; ``[]`` if none or expired."""

    async def get_session(
        self, agent_id: str, session_id: str, *, ttl_seconds: float
    ) -> SessionInfo | None:
        """The session's bookkeeping, or ``None`` if it does not exist or has expired."""

    async def list_sessions(self, agent_id: str, *, ttl_seconds: float) -> list[SessionInfo]:
        """The agent's live sessions (idle at most ``ttl_seconds``), by ``session_id`` in
        code-point order; an expired session is not listed, even before it is swept."""

    async def set_session_metadata(
        self,
        agent_id: str,
        session_id: str,
        metadata: dict[str, Any],
        *,
        ttl_seconds: float,
        fence: Fence | None = None,
    ) -> None:
        """Merge ``metadata`` into the session's metadata (creating the session if needed).

        With ``fence``, only while its lock is held (:class:`Fence`).
        """

    async def clear_session(self, agent_id: str, session_id: str) -> None:
        """Remove the session and all its turns."""

    async def sweep_expired_sessions(self, *, ttl_seconds: float, limit: int) -> int:
        """Remove up to ``limit`` sessions idle longer than ``ttl_seconds``, with their turns.

        The one maintenance call that spans agents: it removes only what no read can return any
        more (an expired session reads as empty). Returns how many sessions were removed.
        """

    async def expired_sessions(self, *, ttl_seconds: float, limit: int) -> list[tuple[str, str]]:
        """Up to ``limit`` ``(agent_id, session_id)`` of sessions idle longer than ``ttl_seconds``.

        The sweeper consolidates each (reading it with a longer TTL) before it deletes it with
        :meth:`delete_expired_session`, so a store keeps an expired session (reads see none)
        until then: for ever, or a long grace period (Redis, ``redis_session_grace_hours``).
        """

    async def delete_expired_session(
        self, agent_id: str, session_id: str, *, ttl_seconds: float
    ) -> bool:
        """Remove the session and its turns if it is still idle longer than ``ttl_seconds``.

        ``False`` if it is gone or was revived meanwhile (a new turn): then it is kept.
        """

    async def writer_fence(self, agent_id: str) -> Fence:
        """The fence of a write that starts now: the agent's current write generation.

        Erasure wins over every writer (spec §8): a writer (an inject, an update, an import)
        takes this before it reads or writes anything of the agent and passes it to each of
        its writes; :meth:`erase_agent` ends the generation, so every write fenced by it from
        then on raises :class:`~actrone_pg.errors.LockLostError` and writes nothing. The
        generation is kept among the agent's locks, under :data:`WRITE_GENERATION`, with no
        expiry, and created here if the agent has none; one that starts while an erase of the
        agent is under way waits for it (a writer that began after the erase is not refused).
        """

    async def acquire_lock(self, agent_id: str, name: str, holder: str, ttl_seconds: float) -> bool:
        """Take the named lock for ``holder`` unless someone else holds a live one.

        Exactly one of many concurrent callers succeeds; the lock lapses ``ttl_seconds`` after it
        was taken, measured by the server's clock.
        """

    async def release_lock(self, agent_id: str, name: str, holder: str) -> bool:
        """Release the lock if ``holder`` holds it; ``False`` otherwise."""

    # -- L2 --
    async def upsert_memories(
        self, records: Sequence[MemoryRecord], *, fence: Fence | None = None
    ) -> None:
        """Insert or replace memories (keyed by agent and id), all or none.

        With ``fence``, only while its lock is held (:class:`Fence`).
        """

    async def get_memory(self, agent_id: str, memory_id: str) -> Memory | None:
        """The current version of one memory of the agent, or ``None``."""

    async def update_memory(
        self,
        agent_id: str,
        memory_id: str,
        build: BuildVersion,
        *,
        fence: Fence | None = None,
    ) -> Memory | None:
        """Write a new current version of the memory, serialised with every other update of it.

        Under a lock of the memory that every updater takes (a row lock, a per-memory lock),
        the current version is read, ``build`` turns it into the new record, and that record
        replaces it: concurrent updates of one memory all land, one after the other, each as
        its own version (none is refused or retried for having raced another). The replaced
        version is kept, with ``valid_to`` set to the new version's ``valid_from``, for
        :meth:`memory_history`; it leaves search and the BM25 statistics, which hold current
        versions only. Returns the new version, or ``None`` (nothing written) if the agent has
        no such memory; if ``build`` raises, nothing is written. With ``fence``, only while its
        lock is held (:class:`Fence`).
        """

    async def memory_history(self, agent_id: str, memory_id: str) -> list[Memory]:
        """Every version of the memory, oldest first (the current one last); ``[]`` if none."""

    async def delete_memory(self, agent_id: str, memory_id: str) -> bool:
        """Delete one memory of the agent, every version; ``False`` if it has no such memory."""

    async def list_memories(
        self,
        agent_id: str,
        *,
        now: datetime,
        limit: int,
        after: tuple[datetime, str] | None = None,
        filter: MemoryFilter | None = None,
    ) -> list[Memory]:
        """The agent's current memories not expired at ``now`` that ``filter`` matches, newest
        first (``created_at`` descending, then id descending), at most ``limit``; with ``after``
        (a ``(created_at, id)`` key), only those that come after it in that order."""

    async def sweep_expired_memories(self, *, limit: int) -> int:
        """Delete up to ``limit`` memories whose ``expires_at`` has passed, every version, with
        the BM25 statistics updated exactly as :meth:`delete_memory` does; spans agents (like
        :meth:`sweep_expired_sessions`). Returns how many were deleted."""

    async def count_memories(self, agent_id: str) -> int:
        """How many memories the agent has (all embedders), those expired by now left out
        (as every read leaves them out, before the sweeper deletes them)."""

    async def erase_agent(self, agent_id: str) -> None:
        """Remove every turn, session, memory, statistic and lock of the agent."""

    async def search(self, request: SearchRequest) -> PackedSearch:
        """The agent's admitted memories as :func:`actrone_pg.pipeline.search` ranks and packs them.

        Only the hits that fit ``request.budget`` and ``request.max_hits`` are returned (both
        ``None``: every ranked memory), best first, each with its explanation in
        ``ScoredMemory.explain`` (``ScoredMemory.memory.explain`` may be left ``None``: the
        manager attaches it to the memories it returns). A store may skip building, or reading,
        the memories not chosen (PostgreSQL fetches only their rows).
        """


@runtime_checkable
class ContextStore(Protocol):
    """A store that can fetch L1 and L2 together (spec §3.2: one statement, one round trip).

    Optional: the manager uses it when the store has it (``isinstance(store, ContextStore)``),
    and otherwise calls :meth:`Store.recent_turns` and :meth:`Store.search` concurrently.
    """

    async def fetch_context(
        self,
        agent_id: str,
        session_id: str,
        *,
        limit: int,
        ttl_seconds: float,
        request: SearchRequest,
    ) -> tuple[list[Turn], PackedSearch]:
        """What :meth:`Store.recent_turns` and :meth:`Store.search` return for the same
        arguments, read together."""


def dimension_mismatch(embedder: str, stored: int, got: int) -> DimensionMismatchError:
    """The error for a vector of ``got`` dimensions under an embedder storing ``stored``."""
    return DimensionMismatchError(
        f"embedder {embedder!r} stores {stored}-dimensional vectors; got one of {got} "
        "(a new model needs a new embedder name)"
    )


def lock_lost(agent_id: str, fence: Fence) -> LockLostError:
    """The error for a write whose fence's lock is no longer held."""
    if fence.erased_only:
        return LockLostError(
            f"agent {agent_id!r} was erased while this write was under way; nothing more was "
            "written, and nothing it wrote before the erase is kept"
        )
    return LockLostError(
        f"agent {agent_id!r} no longer holds its {fence.name!r} lock (the agent was erased, or "
        "the lock lapsed and passed to another holder); nothing was written"
    )


def batch_dimensions(records: Sequence[MemoryRecord]) -> dict[str, int]:
    """Each embedder's vector size in a batch; a batch holding two sizes for one embedder is
    refused (:class:`DimensionMismatchError`) before anything is written."""
    dims: dict[str, int] = {}
    for rec in records:
        name, size = rec.memory.embedder, int(rec.vector.shape[0])
        if dims.setdefault(name, size) != size:
            raise DimensionMismatchError(
                f"embedder {name!r}: one batch holds vectors of {dims[name]} and {size} dimensions"
            )
    return dims


def check_query_dimensions(embedder: str, stored: int, query: Vector) -> None:
    """Refuse a query vector whose size differs from the embedder's stored vectors."""
    size = int(query.shape[0])
    if size != stored:
        raise DimensionMismatchError(
            f"embedder {embedder!r} stores {stored}-dimensional vectors; "
            f"the query vector has {size}"
        )
