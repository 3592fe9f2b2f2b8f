"""MemoryManager: the orchestrator between the caller, the embedder, the store and the budget.

It validates every argument before touching a store, runs the L1 read concurrently with query
embedding and L2 search, optionally reranks, and packs both shares of the token budget. It
depends only on the store protocol, never on a concrete store.

The manager holds one collaborator per concern, each a private module of
:mod:`actrone_pg._manager`, all sharing one :class:`~actrone_pg._manager.context.ManagerContext`
(the components and the rules derived from the config):

* ``sessions`` — L1: turns and sessions, and the sweep of expired sessions;
* ``memories`` — L2 writes and the memories' lifecycle (versions, expiry, listing, erasure);
* ``retrieval`` — L2 search and :meth:`MemoryManager.retrieve_context` within the budget;
* ``consolidating`` — consolidation, in the background and on request, and locks;
* this module — :class:`MemoryManager`, which builds, owns and closes the components. Each
  public method is written here with its signature and docstring and hands the call to its
  collaborator; :func:`~actrone_pg._guard.guarded` gives the caller only ``ActroneError``
  (the components' own failures are typed where they are called, :mod:`actrone_pg._guard`) and
  :func:`~actrone_pg._telemetry.traced` gives the call its span.

:mod:`actrone_pg.sync` is generated from this module (``scripts/async_to_sync.py``): run the
script after changing a public method's signature or docstring.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

from actrone_pg._guard import Component, calling, guarded, guarded_sync
from actrone_pg._manager.consolidating import Consolidation
from actrone_pg._manager.context import ManagerContext
from actrone_pg._manager.guarded_store import guard_store
from actrone_pg._manager.memories import Memories
from actrone_pg._manager.retrieval import Retrieval
from actrone_pg._manager.sessions import SessionTurns
from actrone_pg._telemetry import Telemetry, traced, traced_constructor
from actrone_pg.config import MemoryConfig
from actrone_pg.consolidation import Consolidator, create_consolidator
from actrone_pg.embedders import Embedder, create_embedder
from actrone_pg.errors import ActroneError, ConfigurationError
from actrone_pg.models import Memory, MemoryPage, RetrievedContext, SessionInfo, Turn
from actrone_pg.rerankers import Reranker
from actrone_pg.stores import Store, create_store
from actrone_pg.stores.base import FENCED_LOCK
from actrone_pg.tokens import TokenCounter

__all__ = ["MemoryManager", "create_memory_manager"]

logger = logging.getLogger("actrone_pg.manager")


class MemoryManager:
    """Stores turns and memories for agents and assembles their context inside a token budget.

    Build one with :meth:`create` (or :func:`create_memory_manager`), not with the constructor.
    Every public method raises only :class:`~actrone_pg.errors.ActroneError` subclasses, the
    original exception chained as ``__cause__``.
    """

    def __init__(self, ctx: ManagerContext, store: Store) -> None:
        # create() builds the context; the collaborators are built here, in one place.
        self._ctx = ctx
        # The components, for callers (the CLI, the integrations); collaborators use ctx's,
        # whose store is ``store`` behind the error boundary (_manager.guarded_store).
        self.config = ctx.config
        self.store = store
        self.embedder = ctx.embedder
        self.reranker = ctx.reranker
        self.consolidator = ctx.consolidator
        self._retrieval = Retrieval(ctx)
        self._memories = Memories(ctx)
        # Consolidation writes through this manager's public (guarded, traced) methods.
        self._consolidation = Consolidation(ctx, self)
        self._memories.before_erase = self._consolidation.stop_agent
        self._sessions = SessionTurns(ctx, self._consolidation)
        self._closed = False
        # What create() built, in build order: close() closes these and nothing else.
        self._built: list[tuple[Component, object]] = []

    # -- L1: turns and sessions (SessionTurns) --
    @traced
    @guarded
    async def store_turn(
        self,
        agent_id: str,
        session_id: str,
        user_message: str,
        assistant_message: str,
        *,
        tool_results: Sequence[Any] | None = None,
        turn_id: str | None = None,
    ) -> Turn:
        """Append a turn to the session and return it.

        A turn counts ``user_message`` and ``assistant_message`` (and the JSON of ``tool_results``,
        if any) together. Pass the same ``turn_id`` when retrying after a timeout: the store keeps
        one copy.
        """
        return await self._sessions.store_turn(
            agent_id,
            session_id,
            user_message,
            assistant_message,
            tool_results=tool_results,
            turn_id=turn_id,
        )

    @traced
    @guarded
    async def get_recent_turns(
        self, agent_id: str, session_id: str, limit: int | None = None
    ) -> list[Turn]:
        """The session's newest turns (at most ``max_session_turns``), oldest first."""
        return await self._sessions.get_recent_turns(agent_id, session_id, limit)

    @traced
    @guarded
    async def get_session(self, agent_id: str, session_id: str) -> SessionInfo | None:
        """The session's bookkeeping, or ``None`` if it does not exist or has expired."""
        return await self._sessions.get_session(agent_id, session_id)

    @traced
    @guarded
    async def list_sessions(self, agent_id: str) -> list[SessionInfo]:
        """The agent's live sessions (idle less than ``session_ttl_hours``), by ``session_id``.

        An expired session is not listed, even before the sweeper removes it.
        """
        return await self._sessions.list_sessions(agent_id)

    @traced
    @guarded
    async def set_session_metadata(
        self, agent_id: str, session_id: str, metadata: Mapping[str, Any]
    ) -> None:
        """Merge ``metadata`` (a JSON object) into the session's metadata."""
        await self._sessions.set_session_metadata(agent_id, session_id, metadata)

    @traced
    @guarded
    async def clear_session(self, agent_id: str, session_id: str) -> None:
        """Forget the session's turns (its memories stay)."""
        await self._sessions.clear_session(agent_id, session_id)

    @traced
    @guarded
    async def sweep_expired_sessions(self, limit: int = 10_000) -> int:
        """Remove up to ``limit`` sessions idle longer than ``session_ttl_hours``, with their turns.

        An expired session already reads as empty; this reclaims its storage (PostgreSQL and the
        in-memory store keep it until then; Redis keeps it ``redis_session_grace_hours`` past its
        TTL, then drops it by itself, consolidated or not). It spans every agent and every
        process's sessions, so run it from a scheduled job (``actrone-pg sweep``). Returns the
        number of sessions removed; call again while it returns ``limit``.

        With a consolidator (the default), each expired session's pending turns become memories
        first, and a session is deleted only once that succeeded: a session whose consolidation
        fails (or whose agent's maintenance lock is held) stays, and the next sweep tries again.
        """
        return await self._sessions.sweep_expired_sessions(limit)

    # -- L2: memories and their lifecycle (Memories) --
    @traced
    @guarded
    async def inject_memory(
        self,
        agent_id: str,
        content: str,
        *,
        session_id: str | None = None,
        content_type: str = "injected",
        importance: float = 0.5,
        tags: Iterable[str] = (),
        source: str = "injected",
        sensitivity: str = "none",
        created_at: datetime | None = None,
        metadata: Mapping[str, Any] | None = None,
        memory_id: str | None = None,
        expires_at: datetime | None = None,
        source_turn_ids: Iterable[str] = (),
        embedding_context: str | None = None,
    ) -> str:
        """Store one long-term memory and return its id.

        Without ``memory_id`` the id is derived from the agent, session and content, so injecting
        the same content again (for example a retry after a timeout) replaces rather than
        duplicates it. With ``memory_id`` an existing memory of this agent is replaced.

        ``expires_at`` (timezone-aware) is when the memory stops being returned; one that is not
        in the future is refused (:class:`~actrone_pg.errors.ValidationError`, nothing written):
        storing what no read may return is a caller's mistake, not a request. ``source_turn_ids``
        records the turns the memory came from (consolidation sets it, with
        ``source="consolidated"``).

        ``embedding_context`` is text embedded together with the content, before it, and not
        stored: it gives a short memory the sense its surroundings give it (a reply such as "Yes!
        It was amazing." embedded after the question it answers). The memory's content, terms
        and token count stay those of ``content``; only its vector carries the context (and
        :meth:`update_memory` with a new content embeds that content alone). Measured on
        conversations: docs/notes/quality.md, "Turn context".
        """
        return await self._memories.inject_memory(
            agent_id,
            content,
            session_id=session_id,
            content_type=content_type,
            importance=importance,
            tags=tags,
            source=source,
            sensitivity=sensitivity,
            created_at=created_at,
            metadata=metadata,
            memory_id=memory_id,
            expires_at=expires_at,
            source_turn_ids=source_turn_ids,
            embedding_context=embedding_context,
        )

    @traced
    @guarded
    async def inject_memories(
        self, agent_id: str, items: Iterable[Mapping[str, Any] | str]
    ) -> list[str]:
        """Store many memories at once: all land or none does. Returns their ids in order.

        Each item is a string (the content) or a mapping with the keyword arguments of
        :meth:`inject_memory` (``content`` required). An item repeated in the batch is stored
        once and its positions get the same id; one ``memory_id`` with two different contents
        raises :class:`~actrone_pg.errors.ValidationError`.
        """
        return await self._memories.inject_memories(agent_id, items)

    @traced
    @guarded
    async def get_memory(self, agent_id: str, memory_id: str) -> Memory | None:
        """The current version of one of the agent's memories, or ``None`` (also once expired)."""
        return await self._memories.get_memory(agent_id, memory_id)

    @traced
    @guarded
    async def update_memory(
        self,
        agent_id: str,
        memory_id: str,
        *,
        content: str | None = None,
        tags: Iterable[str] | None = None,
        importance: float | None = None,
        metadata: Mapping[str, Any] | None = None,
        content_type: str | None = None,
        expires_at: datetime | None = None,
        clear_expiry: bool = False,
    ) -> Memory:
        """Write a new version of a memory and return it; the replaced version is kept.

        The memory keeps its id; fields not passed (``None``) keep their values, and so do
        ``session_id``, ``source``, ``sensitivity``, ``created_at`` and ``source_turn_ids``.
        The new version's ``version`` is one more, its ``valid_from`` now; the replaced one's
        ``valid_to`` becomes now, and :meth:`memory_history` returns it. Searches, counts and the
        BM25 statistics see the current version only. The content is embedded again (by the
        current embedder). An expired memory, like a missing one, raises
        :class:`~actrone_pg.errors.MemoryNotFoundError`; ``expires_at`` must be in the future.

        ``expires_at=None`` keeps the current expiry; ``clear_expiry=True`` removes it (the new
        version never expires; the replaced one keeps its expiry in the history). Passing both
        is a :class:`~actrone_pg.errors.ValidationError` and writes nothing.
        """
        return await self._memories.update_memory(
            agent_id,
            memory_id,
            content=content,
            tags=tags,
            importance=importance,
            metadata=metadata,
            content_type=content_type,
            expires_at=expires_at,
            clear_expiry=clear_expiry,
        )

    @traced
    @guarded
    async def memory_history(self, agent_id: str, memory_id: str) -> list[Memory]:
        """Every version of the memory, oldest first, the current one last.

        ``[]`` if the agent has no such memory, or it has expired (an expired memory is never
        returned). Replaced versions keep their own text and fields.
        """
        return await self._memories.memory_history(agent_id, memory_id)

    @traced
    @guarded
    async def list_memories(
        self,
        agent_id: str,
        *,
        filters: Mapping[str, Any] | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> MemoryPage:
        """A page of the agent's current memories, newest first (``created_at``, then id).

        ``filters`` as in :meth:`search_memories`; expired memories are left out. Pass the
        page's ``next_cursor`` back as ``cursor`` for the next page (``None`` after the last).
        The cursor is the last item's position, not an offset: memories written meanwhile
        never make a page repeat or skip one that was already there.
        """
        return await self._memories.list_memories(
            agent_id, filters=filters, limit=limit, cursor=cursor
        )

    @traced
    @guarded
    async def count_memories(self, agent_id: str) -> int:
        """How many memories the agent has."""
        return await self._memories.count_memories(agent_id)

    @traced
    @guarded
    async def delete_memory(self, agent_id: str, memory_id: str) -> bool:
        """Delete one of the agent's memories; ``False`` if the agent has no such memory."""
        return await self._memories.delete_memory(agent_id, memory_id)

    @traced
    @guarded
    async def erase_agent(self, agent_id: str) -> None:
        """Remove every turn, session, memory, statistic and lock of the agent.

        A consolidation of the agent that is running meanwhile writes nothing back: this
        manager's background runs are stopped first, and any other run (a ``consolidate_session``
        call, another process) holds the agent's maintenance lock, which the store deletes
        here and checks with each of that run's writes (:class:`~actrone_pg.stores.base.Fence`).
        """
        await self._memories.erase_agent(agent_id)

    @traced
    @guarded
    async def sweep_expired(self, limit: int = 10_000) -> int:
        """Delete up to ``limit`` memories whose ``expires_at`` has passed (every agent).

        An expired memory is already never returned; this deletes it, every version, and takes
        it out of the BM25 statistics exactly as :meth:`delete_memory` does. Run it from a
        scheduled job (``actrone-pg sweep`` does, after the sessions). Returns the number
        deleted; call again while it returns ``limit``.
        """
        return await self._memories.sweep_expired(limit)

    # -- retrieval (Retrieval) --
    @traced
    @guarded
    async def search_memories(
        self,
        agent_id: str,
        query: str,
        limit: int = 10,
        *,
        explain: bool = False,
        filters: Mapping[str, Any] | None = None,
    ) -> list[Memory]:
        """The agent's memories most relevant to ``query``, best first (no token budget).

        ``filters`` (keys in :data:`actrone_pg.filters.FILTERS`) restricts the search to the
        memories that match, before ranking: the BM25 statistics, the three rankings and the
        fusion are those of the filtered set. With ``explain`` each memory's ``explain`` says
        how it ranked.
        """
        return await self._retrieval.search_memories(
            agent_id, query, limit, explain=explain, filters=filters
        )

    @traced
    @guarded
    async def retrieve_context(
        self,
        agent_id: str,
        session_id: str,
        query: str,
        token_budget: int,
        *,
        explain: bool = False,
        filters: Mapping[str, Any] | None = None,
    ) -> RetrievedContext:
        """Recent turns and relevant memories for ``query``, each inside its share of the budget.

        L1 (the session's recent turns) is read while the query is embedded and L2 searched; the
        fetch takes as long as the slower of the two. The caller's system prompt is never seen.
        ``filters`` restricts L2 as in :meth:`search_memories`; L1 is the session's turns.
        """
        return await self._retrieval.retrieve_context(
            agent_id, session_id, query, token_budget, explain=explain, filters=filters
        )

    # -- consolidation and locks (Consolidation) --
    @traced
    @guarded
    async def consolidate_session(self, agent_id: str, session_id: str) -> list[str]:
        """Turn the session's turns not yet consolidated into long-term memories.

        Returns the ids of the memories written or updated (``[]`` if there was nothing worth
        keeping or nothing new). Each memory records its ``source_turn_ids`` and
        ``source="consolidated"``; running it again over the same turns writes no duplicate.
        It holds the agent's maintenance lock: if another process holds it, or the consolidator
        fails, this raises :class:`~actrone_pg.errors.ConsolidationError`, nothing is lost and
        the turns stay pending.
        """
        return await self._consolidation.consolidate_session(agent_id, session_id)

    @traced
    @guarded
    async def try_lock(
        self, agent_id: str, name: str = FENCED_LOCK, *, ttl_seconds: float = 60.0
    ) -> str | None:
        """Take the agent's named lock; returns a token to release it with, or ``None`` if held.

        Among concurrent callers exactly one gets the lock; it lapses after ``ttl_seconds`` by the
        store's clock even if never released.
        """
        return await self._consolidation.try_lock(agent_id, name, ttl_seconds=ttl_seconds)

    @traced
    @guarded
    async def release_lock(self, agent_id: str, token: str, name: str = FENCED_LOCK) -> bool:
        """Release a lock taken by :meth:`try_lock`; ``False`` if it had lapsed or was not yours."""
        return await self._consolidation.release_lock(agent_id, token, name)

    # -- no I/O --
    @guarded_sync
    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` by the counter in force."""
        return self._ctx.count_tokens(text)

    # -- construction --
    @classmethod
    @traced_constructor
    @guarded
    async def create(
        cls,
        config: MemoryConfig | None = None,
        *,
        store: Store | None = None,
        embedder: Embedder | None = None,
        reranker: Reranker | None = None,
        token_counter: TokenCounter | None = None,
        consolidator: Consolidator | None = None,
    ) -> MemoryManager:
        """Build a manager: the configured (or given) store, embedder and optional reranker.

        ``consolidator`` replaces the one ``config.consolidator`` names.

        The store is connected (and, for PostgreSQL, migrated) before this returns. With
        ``rerank_enabled`` and no ``reranker`` given, the configured cross-encoder is loaded now,
        and a missing model is an error here rather than a silent fallback later. Building an
        embedder or reranker can block (loading an ONNX model, a first download from the model
        hub, the OpenAI-compatible server's dimension probe): that runs in a worker thread, so
        the event loop keeps serving other tasks meanwhile.

        The manager owns what it builds and only that: :meth:`close` closes the store, embedder
        and reranker made here, and leaves a ``store``, ``embedder`` or ``reranker`` passed in
        open for its owner to close. If this raises, what it built is closed again.
        """
        config = config if config is not None else MemoryConfig()
        if not isinstance(config, MemoryConfig):
            raise ConfigurationError(
                "config", f"expected a MemoryConfig, got {type(config).__name__}"
            )
        if token_counter is not None and not callable(token_counter):
            raise ConfigurationError("token_counter", "must be a callable taking a string")
        built: list[tuple[Component, object]] = []
        try:
            if embedder is None:
                with calling("embedder"):
                    embedder = await asyncio.to_thread(create_embedder, config)
                built.append(("embedder", embedder))
            _check_embedder(embedder)
            if reranker is None and config.rerank_enabled:
                from actrone_pg.rerankers import create_reranker

                with calling("reranker"):
                    reranker = await asyncio.to_thread(create_reranker, config)
                built.append(("reranker", reranker))
            if reranker is not None and not callable(getattr(reranker, "score", None)):
                raise ConfigurationError(
                    "reranker", "must have an async score(query, texts) method"
                )
            if store is None:
                with calling("store"):
                    store = create_store(config)
                built.append(("store", store))
            if consolidator is None:
                with calling("consolidator"):
                    consolidator = create_consolidator(config)
                if consolidator is not None:
                    built.append(("consolidator", consolidator))
            elif not callable(getattr(consolidator, "consolidate", None)) or not isinstance(
                getattr(consolidator, "name", None), str
            ):
                raise ConfigurationError(
                    "consolidator", "must have a name and an async consolidate(turns, context)"
                )
            guarded_store = guard_store(store)
            await guarded_store.setup()
            context = ManagerContext(
                config, guarded_store, embedder, reranker, token_counter, consolidator
            )
            manager = cls(context, store)
        except BaseException:
            await _close_all(built)
            raise
        manager._built = built
        return manager

    @traced
    @guarded
    async def close(self) -> None:
        """Close what :meth:`create` built (store, embedder, reranker); safe to call twice.

        A store, embedder or reranker passed to :meth:`create` is left open: close it yourself
        when you are done with it (one store may serve several managers).
        """
        if not self._closed:
            self._closed = True
            await self._consolidation.close()
            await _close_all(self._built)

    async def __aenter__(self) -> MemoryManager:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- properties --
    @property
    def relevance_threshold(self) -> float:
        """The cosine a memory needs: the config's, else the embedder's, else 0.72."""
        return self._ctx.threshold

    @property
    def backend(self) -> str:
        """The name of the store's backend."""
        return self.store.backend

    @property
    def _telemetry(self) -> Telemetry:
        # What @traced asks each call for.
        return self._ctx.telemetry


@asynccontextmanager
async def create_memory_manager(
    config: MemoryConfig | None = None,
    *,
    store: Store | None = None,
    embedder: Embedder | None = None,
    reranker: Reranker | None = None,
    token_counter: TokenCounter | None = None,
    consolidator: Consolidator | None = None,
) -> AsyncIterator[MemoryManager]:
    """``async with create_memory_manager(config) as mm:`` — a manager closed on exit.

    Takes the arguments of :meth:`MemoryManager.create`.
    """
    mm = await MemoryManager.create(
        config,
        store=store,
        embedder=embedder,
        reranker=reranker,
        token_counter=token_counter,
        consolidator=consolidator,
    )
    try:
        yield mm
    finally:
        await mm.close()


async def _close_all(components: Sequence[tuple[Component, object]]) -> None:
    """Close each component (``aclose()`` or ``close()``, awaited if async), the last built first.

    Every one is tried; the first error (typed by the component's kind) is raised after the
    others are closed.
    """
    error: ActroneError | None = None
    for kind, component in reversed(components):
        closer = getattr(component, "aclose", None) or getattr(component, "close", None)
        if not callable(closer):
            continue
        try:
            with calling(kind):
                result = closer()
                if inspect.isawaitable(result):
                    await result
        except ActroneError as exc:
            logger.warning("closing %s failed: %s", type(component).__name__, exc)
            error = error or exc
    if error is not None:
        raise error


def _check_embedder(embedder: object) -> None:
    name = getattr(embedder, "name", None)
    dims = getattr(embedder, "dimensions", None)
    if not isinstance(name, str) or not name.strip():
        raise ConfigurationError("embedder", "must have a non-empty string attribute 'name'")
    if isinstance(dims, bool) or not isinstance(dims, int) or dims < 1:
        raise ConfigurationError("embedder", "must have an integer attribute 'dimensions' ≥ 1")
    threshold = getattr(embedder, "relevance_threshold", None)
    if threshold is not None and not (isinstance(threshold, (int, float)) and 0 < threshold < 1):
        raise ConfigurationError("embedder", "relevance_threshold must be None or lie in (0, 1)")
    if not callable(getattr(embedder, "embed_batch", None)):
        raise ConfigurationError("embedder", "must have an async embed_batch(texts) method")
