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
* ``consolidating`` — consolidation (spec §9.1), in the background and on request, and locks;
* this module — :class:`MemoryManager`, which builds, owns and closes the components, and whose
  public methods are the collaborators' own, forwarded (``_forward``) and then guarded
  and traced here.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from actrone_pg._forward import forward, forward_sync
from actrone_pg._guard import guard_public_methods
from actrone_pg._manager.consolidating import Consolidation
from actrone_pg._manager.context import ManagerContext
from actrone_pg._manager.memories import Memories
from actrone_pg._manager.retrieval import Retrieval
from actrone_pg._manager.sessions import SessionTurns
from actrone_pg._telemetry import Telemetry, trace_public_methods
from actrone_pg.config import MemoryConfig
from actrone_pg.consolidation import Consolidator, create_consolidator
from actrone_pg.embedders import Embedder, create_embedder
from actrone_pg.errors import ConfigurationError
from actrone_pg.rerankers import Reranker
from actrone_pg.stores import Store, create_store
from actrone_pg.tokens import TokenCounter

__all__ = ["MemoryManager", "create_memory_manager"]

logger = logging.getLogger("actrone_pg.manager")


@trace_public_methods  # outside the guard: a span sees the error the caller gets
@guard_public_methods
class MemoryManager:
    """Stores turns and memories for agents and assembles their context inside a token budget.

    Build one with :meth:`create` (or :func:`create_memory_manager`), not with the constructor.
    Every public method raises only :class:`~actrone_pg.errors.ActroneError` subclasses, the
    original exception chained as ``__cause__`` (see ``actrone_pg._guard``).
    """

    def __init__(self, ctx: ManagerContext) -> None:
        # create() builds the context; the collaborators are built here, in one place.
        self._ctx = ctx
        # The components, for callers (the CLI, the integrations); collaborators use ctx's.
        self.config = ctx.config
        self.store = ctx.store
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
        self._built: list[object] = []

    # -- the collaborators' public methods --
    store_turn = forward("_sessions", SessionTurns.store_turn)
    get_recent_turns = forward("_sessions", SessionTurns.get_recent_turns)
    get_session = forward("_sessions", SessionTurns.get_session)
    list_sessions = forward("_sessions", SessionTurns.list_sessions)
    set_session_metadata = forward("_sessions", SessionTurns.set_session_metadata)
    clear_session = forward("_sessions", SessionTurns.clear_session)
    sweep_expired_sessions = forward("_sessions", SessionTurns.sweep_expired_sessions)

    inject_memory = forward("_memories", Memories.inject_memory)
    inject_memories = forward("_memories", Memories.inject_memories)
    get_memory = forward("_memories", Memories.get_memory)
    update_memory = forward("_memories", Memories.update_memory)
    memory_history = forward("_memories", Memories.memory_history)
    list_memories = forward("_memories", Memories.list_memories)
    count_memories = forward("_memories", Memories.count_memories)
    delete_memory = forward("_memories", Memories.delete_memory)
    erase_agent = forward("_memories", Memories.erase_agent)
    sweep_expired = forward("_memories", Memories.sweep_expired)

    search_memories = forward("_retrieval", Retrieval.search_memories)
    retrieve_context = forward("_retrieval", Retrieval.retrieve_context)

    consolidate_session = forward("_consolidation", Consolidation.consolidate_session)
    try_lock = forward("_consolidation", Consolidation.try_lock)
    release_lock = forward("_consolidation", Consolidation.release_lock)

    count_tokens = forward_sync("_ctx", ManagerContext.count_tokens)

    # -- construction --
    @classmethod
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

        ``consolidator`` replaces the one ``config.consolidator`` names (spec §9.1).

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
        built: list[object] = []
        try:
            if embedder is None:
                embedder = await asyncio.to_thread(create_embedder, config)
                built.append(embedder)
            _check_embedder(embedder)
            if reranker is None and config.rerank_enabled:
                from actrone_pg.rerankers import create_reranker

                reranker = await asyncio.to_thread(create_reranker, config)
                built.append(reranker)
            if reranker is not None and not callable(getattr(reranker, "score", None)):
                raise ConfigurationError(
                    "reranker", "must have an async score(query, texts) method"
                )
            if store is None:
                store = create_store(config)
                built.append(store)
            if consolidator is None:
                consolidator = create_consolidator(config)
                if consolidator is not None:
                    built.append(consolidator)
            elif not callable(getattr(consolidator, "consolidate", None)) or not isinstance(
                getattr(consolidator, "name", None), str
            ):
                raise ConfigurationError(
                    "consolidator", "must have a name and an async consolidate(turns, context)"
                )
            await store.setup()
            manager = cls(
                ManagerContext(config, store, embedder, reranker, token_counter, consolidator)
            )
        except BaseException:
            await _close_all(built)
            raise
        manager._built = built
        return manager

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
        # What trace_public_methods asks each call for.
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


async def _close_all(components: Sequence[object]) -> None:
    """Close each component (``aclose()`` or ``close()``, awaited if async), the last built first.

    Every one is tried; the first error is raised after the others are closed.
    """
    error: BaseException | None = None
    for component in reversed(components):
        closer = getattr(component, "aclose", None) or getattr(component, "close", None)
        if not callable(closer):
            continue
        try:
            result = closer()
            if inspect.isawaitable(result):
                await result
        except Exception as exc:
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
