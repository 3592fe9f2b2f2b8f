"""MemoryManager: the orchestrator between the caller, the embedder, the store and the budget.

It validates every argument before touching a store, runs the L1 read concurrently with query
embedding and L2 search, optionally reranks, and packs both shares of the token budget. It
depends only on the store protocol, never on a concrete store.
"""

from __future__ import annotations

import asyncio
import base64
import inspect
import json
import logging
import math
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from actrone_pg import _validation as v
from actrone_pg._guard import guard_public_methods
from actrone_pg._telemetry import create_telemetry, trace_public_methods
from actrone_pg.budget import pack_turns, split_budget
from actrone_pg.config import MemoryConfig
from actrone_pg.consolidation import Consolidator, create_consolidator
from actrone_pg.consolidation import run as consolidation
from actrone_pg.embedders import Embedder, as_vectors, create_embedder
from actrone_pg.errors import (
    ActroneError,
    ConfigurationError,
    ConsolidationError,
    EmbedderError,
    MemoryNotFoundError,
    RerankerError,
    StoreError,
    ValidationError,
)
from actrone_pg.models import (
    STORED_MEMORY_FIELDS,
    Memory,
    MemoryPage,
    RetrievedContext,
    ScoredMemory,
    SessionInfo,
    Turn,
    Vector,
)
from actrone_pg.pipeline import MemoryFilter, PackedSearch, SearchRequest, pack_hits, rerank
from actrone_pg.ranking import DEFAULT_RELEVANCE_THRESHOLD, RankingParams, micros, query_terms
from actrone_pg.rerankers import Reranker
from actrone_pg.stores import MemoryRecord, Store, create_store
from actrone_pg.tokens import TokenCounter, heuristic_token_count

__all__ = ["MemoryManager", "create_memory_manager"]

logger = logging.getLogger("actrone_pg.manager")

# Memory ids default to a UUID derived from the agent, session and content, so that a client that
# retries an inject after a timeout writes the same memory again instead of a duplicate.
_MEMORY_NAMESPACE = uuid.UUID("6f3a7d2e-5c1b-4e8a-9d0f-2b7c4e6a8f10")

# What an item of inject_memories may set: the stored fields the manager does not fill in itself,
# with the id as "memory_id". A version's number and validity belong to update_memory.
_SET_BY_MANAGER = {"id", "agent_id", "embedder", "token_count", "version", "valid_from", "valid_to"}
_MEMORY_FIELDS = frozenset(STORED_MEMORY_FIELDS) - _SET_BY_MANAGER | {"memory_id"}
# How often update_memory re-reads a memory that another writer changed under it.
_UPDATE_ATTEMPTS = 5

# Consolidation holds the agent's maintenance lock (spec §8) this long at most; a run that takes
# longer (a slow chat model) may overlap another, whose writes the derived ids make harmless.
_CONSOLIDATION_LOCK_SECONDS = 600.0
# After a failed or lock-blocked background consolidation, wait this long before trying again.
_CONSOLIDATION_RETRY_SECONDS = 30.0
# close() lets running background consolidations finish this long, then cancels them.
_CLOSE_GRACE_SECONDS = 10.0
# An expired session is read as if its TTL were this long, so the sweeper can consolidate it.
_READ_EXPIRED_TTL = 100 * 365 * 24 * 3600.0
# store_turn trusts that a session it wrote to is still live for its TTL less this margin (a
# share of the TTL, at most a minute): the store's clock decides expiry, not this process's.
_LIVE_MARGIN_SHARE = 0.1
_LIVE_MARGIN_MAX_SECONDS = 60.0
# Sessions whose liveness store_turn remembers; past this it forgets them all (and checks again).
_LIVE_SESSIONS_KEPT = 100_000


@trace_public_methods  # outside the guard: a span sees the error the caller gets
@guard_public_methods
class MemoryManager:
    """Stores turns and memories for agents and assembles their context inside a token budget.

    Build one with :meth:`create` (or :func:`create_memory_manager`), not with the constructor.
    Every public method raises only :class:`~actrone_pg.errors.ActroneError` subclasses, the
    original exception chained as ``__cause__`` (see ``actrone_pg._guard``).
    """

    def __init__(
        self,
        config: MemoryConfig,
        store: Store,
        embedder: Embedder,
        reranker: Reranker | None,
        token_counter: TokenCounter | None,
        consolidator: Consolidator | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.embedder = embedder
        self.reranker = reranker
        self.consolidator = consolidator
        # Background consolidation: turns stored through this manager since the session was
        # last consolidated, the running task of each session, and when to look again.
        self._new_turns: dict[tuple[str, str], int] = {}
        self._consolidating: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._not_before: dict[tuple[str, str], float] = {}
        # (agent, session) -> monotonic time until which this process knows the session is live
        # (it wrote a turn less than a TTL before): store_turn then skips the expiry check.
        self._live_until: dict[tuple[str, str], float] = {}
        self._count: TokenCounter = token_counter or heuristic_token_count
        self._custom_counter = token_counter is not None
        self._query_cache: OrderedDict[str, Vector] = OrderedDict()
        self._redacted = frozenset(config.redact_sensitivities)
        self._closed = False
        # What create() built, in build order: close() closes these and nothing else.
        self._built: list[object] = []
        threshold = config.relevance_threshold
        if threshold is None:
            threshold = embedder.relevance_threshold
        if threshold is None:
            threshold = DEFAULT_RELEVANCE_THRESHOLD
        self._threshold = float(threshold)
        self._params = RankingParams(
            hybrid=config.hybrid_retrieval,
            rrf_k=config.rrf_k,
            rrf_weights=config.rrf_weights,
            relevance_weight=config.relevance_weight,
            recency_weight=config.recency_weight,
            bm25_k1=config.bm25_k1,
            bm25_b=config.bm25_b,
        )
        self._telemetry = create_telemetry(
            config, backend=store.backend, embedder=embedder.name, threshold=self._threshold
        )

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
            manager = cls(config, store, embedder, reranker, token_counter, consolidator)
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
            await self._finish_background()
            await _close_all(self._built)

    async def __aenter__(self) -> MemoryManager:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- properties --
    @property
    def relevance_threshold(self) -> float:
        """The cosine a memory needs: the config's, else the embedder's, else 0.72."""
        return self._threshold

    @property
    def backend(self) -> str:
        """The name of the store's backend."""
        return self.store.backend

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` by the counter in force."""
        if not isinstance(text, str):
            raise ValidationError(f"text must be a string, got {type(text).__name__}")
        try:
            n = self._count(text)
        except ActroneError:
            raise
        except Exception as exc:
            raise ConfigurationError(
                "token_counter", f"raised {type(exc).__name__}: {exc}"
            ) from exc
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ConfigurationError("token_counter", f"must return a whole number ≥ 0, got {n!r}")
        return n

    # -- L1 --
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
        limit = self.config.max_text_chars
        v.check_id("agent_id", agent_id)
        v.check_id("session_id", session_id)
        v.check_text("user_message", user_message, limit, allow_empty=True)
        v.check_text("assistant_message", assistant_message, limit, allow_empty=True)
        if not user_message.strip() and not assistant_message.strip():
            raise ValidationError("a turn needs a user_message or an assistant_message")
        results = None
        if tool_results is not None:
            if isinstance(tool_results, (str, bytes)) or not isinstance(tool_results, Iterable):
                raise ValidationError("tool_results must be a list of JSON-serialisable values")
            results = v.check_json("tool_results", list(tool_results), max_chars=limit)
        if turn_id is None:
            turn_id = str(uuid.uuid4())
        else:
            v.check_id("turn_id", turn_id)
        turn = Turn(
            id=turn_id,
            agent_id=agent_id,
            session_id=session_id,
            user_message=user_message,
            assistant_message=assistant_message,
            tool_results=results,
            created_at=_now(),
            token_count=self._count_turn(user_message, assistant_message, results),
        )
        if self.consolidator is not None:
            await self._consolidate_before_restart(agent_id, session_id)
        await self.store.append_turn(
            turn,
            max_turns=self.config.max_session_turns,
            ttl_seconds=self.config.session_ttl_seconds,
        )
        self._mark_live(agent_id, session_id)
        self._note_turn(agent_id, session_id)
        return turn

    async def get_recent_turns(
        self, agent_id: str, session_id: str, limit: int | None = None
    ) -> list[Turn]:
        """The session's newest turns (at most ``max_session_turns``), oldest first."""
        v.check_id("agent_id", agent_id)
        v.check_id("session_id", session_id)
        n = self.config.max_session_turns if limit is None else v.check_limit("limit", limit)
        return await self.store.recent_turns(
            agent_id, session_id, limit=n, ttl_seconds=self.config.session_ttl_seconds
        )

    async def get_session(self, agent_id: str, session_id: str) -> SessionInfo | None:
        """The session's bookkeeping, or ``None`` if it does not exist or has expired."""
        v.check_id("agent_id", agent_id)
        v.check_id("session_id", session_id)
        return await self.store.get_session(
            agent_id, session_id, ttl_seconds=self.config.session_ttl_seconds
        )

    async def list_sessions(self, agent_id: str) -> list[SessionInfo]:
        """The agent's live sessions (idle less than ``session_ttl_hours``), by ``session_id``.

        An expired session is not listed, even before the sweeper removes it.
        """
        v.check_id("agent_id", agent_id)
        return await self.store.list_sessions(agent_id, ttl_seconds=self.config.session_ttl_seconds)

    async def set_session_metadata(
        self, agent_id: str, session_id: str, metadata: Mapping[str, Any]
    ) -> None:
        """Merge ``metadata`` (a JSON object) into the session's metadata."""
        v.check_id("agent_id", agent_id)
        v.check_id("session_id", session_id)
        data = v.check_metadata(metadata, max_chars=self.config.max_text_chars)
        await self.store.set_session_metadata(
            agent_id, session_id, data, ttl_seconds=self.config.session_ttl_seconds
        )

    async def clear_session(self, agent_id: str, session_id: str) -> None:
        """Forget the session's turns (its memories stay)."""
        v.check_id("agent_id", agent_id)
        v.check_id("session_id", session_id)
        await self.store.clear_session(agent_id, session_id)

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
        v.check_limit("limit", limit)
        ttl = self.config.session_ttl_seconds
        if self.consolidator is None:
            return await self.store.sweep_expired_sessions(ttl_seconds=ttl, limit=limit)
        removed = 0
        for agent_id, session_id in await self.store.expired_sessions(ttl_seconds=ttl, limit=limit):
            try:
                await self._consolidate_locked(agent_id, session_id, expired=True)
            except ActroneError as exc:
                logger.warning(
                    "kept expired session %r of agent %r: consolidating it failed (%s); "
                    "the next sweep tries again",
                    session_id,
                    agent_id,
                    exc,
                )
                continue
            if await self.store.delete_expired_session(agent_id, session_id, ttl_seconds=ttl):
                removed += 1
        return removed

    async def consolidate_session(self, agent_id: str, session_id: str) -> list[str]:
        """Turn the session's turns not yet consolidated into long-term memories (spec §9.1).

        Returns the ids of the memories written or updated (``[]`` if there was nothing worth
        keeping or nothing new). Each memory records its ``source_turn_ids`` and
        ``source="consolidated"``; running it again over the same turns writes no duplicate.
        It holds the agent's maintenance lock: if another process holds it, or the consolidator
        fails, this raises :class:`~actrone_pg.errors.ConsolidationError`, nothing is lost and
        the turns stay pending.
        """
        v.check_id("agent_id", agent_id)
        v.check_id("session_id", session_id)
        if self.consolidator is None:
            raise ConfigurationError(
                "consolidator", "is 'none': set 'extractive' or 'llm' to consolidate sessions"
            )
        ids = await self._consolidate_locked(agent_id, session_id, expired=False)
        self._new_turns.pop((agent_id, session_id), None)
        return ids

    async def sweep_expired(self, limit: int = 10_000) -> int:
        """Delete up to ``limit`` memories whose ``expires_at`` has passed (every agent).

        An expired memory is already never returned; this deletes it, every version, and takes
        it out of the BM25 statistics exactly as :meth:`delete_memory` does. Run it from a
        scheduled job (``actrone-pg sweep`` does, after the sessions). Returns the number
        deleted; call again while it returns ``limit``.
        """
        v.check_limit("limit", limit)
        return await self.store.sweep_expired_memories(limit=limit)

    async def try_lock(
        self, agent_id: str, name: str = "maintenance", *, ttl_seconds: float = 60.0
    ) -> str | None:
        """Take the agent's named lock; returns a token to release it with, or ``None`` if held.

        Among concurrent callers exactly one gets the lock; it lapses after ``ttl_seconds`` by the
        store's clock even if never released.
        """
        v.check_id("agent_id", agent_id)
        v.check_id("name", name)
        ttl = v.check_ttl("ttl_seconds", ttl_seconds)
        token = str(uuid.uuid4())
        ok = await self.store.acquire_lock(agent_id, name, token, ttl)
        return token if ok else None

    async def release_lock(self, agent_id: str, token: str, name: str = "maintenance") -> bool:
        """Release a lock taken by :meth:`try_lock`; ``False`` if it had lapsed or was not yours."""
        v.check_id("agent_id", agent_id)
        v.check_id("token", token)
        v.check_id("name", name)
        return await self.store.release_lock(agent_id, name, token)

    # -- consolidation (spec §9.1) --
    async def _consolidate_locked(
        self, agent_id: str, session_id: str, *, expired: bool, min_turns: int = 1
    ) -> list[str]:
        """Consolidate the session's pending turns under the agent's maintenance lock.

        ``expired``: the session is past its TTL and the sweeper deletes it next: it is read
        whatever its age and its marker is not written. Fewer than ``min_turns`` pending turns:
        nothing.
        """
        assert self.consolidator is not None
        token = str(uuid.uuid4())
        if not await self.store.acquire_lock(
            agent_id, "maintenance", token, _CONSOLIDATION_LOCK_SECONDS
        ):
            raise ConsolidationError(
                f"agent {agent_id!r} is being consolidated or maintained by another process "
                "(its maintenance lock is held); try again later"
            )
        try:
            ttl = _READ_EXPIRED_TTL if expired else self.config.session_ttl_seconds
            info = await self.store.get_session(agent_id, session_id, ttl_seconds=ttl)
            if info is None:
                return []
            turns = await self.store.recent_turns(
                agent_id, session_id, limit=max(info.turn_count, 1), ttl_seconds=ttl
            )
            pending = consolidation.pending_turns(turns, info.metadata.get(consolidation.MARKER))
            if len(pending) < min_turns:
                return []
            ids = await consolidation.consolidate_turns(
                self, self.consolidator, agent_id, session_id, pending
            )
            if not expired:
                marker = consolidation.marker_for(pending[-1], _now())
                await self.store.set_session_metadata(
                    agent_id,
                    session_id,
                    {consolidation.MARKER: marker},
                    ttl_seconds=self.config.session_ttl_seconds,
                )
            logger.info(
                "consolidated %d turn(s) of session %r of agent %r into %d memor%s",
                len(pending),
                session_id,
                agent_id,
                len(ids),
                "y" if len(ids) == 1 else "ies",
            )
            return ids
        finally:
            await self.store.release_lock(agent_id, "maintenance", token)

    async def _consolidate_before_restart(self, agent_id: str, session_id: str) -> None:
        """Consolidate an expired session's pending turns before a new turn restarts it.

        A turn in a session idle longer than its TTL starts the session afresh, and the store
        drops the old turns: without this, a conversation resumed before the sweeper came lost
        what it had not consolidated. Only the first turn this process writes to a session (or
        the first after a TTL of silence) pays the check, one read of the session.
        """
        key = (agent_id, session_id)
        if time.monotonic() < self._live_until.get(key, 0.0):
            return
        info = await self.store.get_session(agent_id, session_id, ttl_seconds=_READ_EXPIRED_TTL)
        ttl = self.config.session_ttl_seconds
        if info is None or (_now() - info.last_active_at).total_seconds() <= ttl:
            return
        try:
            await self._consolidate_locked(agent_id, session_id, expired=True)
        except ActroneError as exc:
            logger.warning(
                "session %r of agent %r had expired and a new turn restarts it; consolidating "
                "its pending turns first failed (%s), so they are dropped with it",
                session_id,
                agent_id,
                exc,
            )

    def _mark_live(self, agent_id: str, session_id: str) -> None:
        """Remember that the session is live for a TTL from now (less a margin for clocks)."""
        if len(self._live_until) >= _LIVE_SESSIONS_KEPT:
            self._live_until.clear()
        ttl = self.config.session_ttl_seconds
        margin = min(ttl * _LIVE_MARGIN_SHARE, _LIVE_MARGIN_MAX_SECONDS)
        self._live_until[(agent_id, session_id)] = time.monotonic() + ttl - margin

    def _note_turn(self, agent_id: str, session_id: str) -> None:
        """Count a stored turn; start a background consolidation when the session is due.

        Due means ``consolidate_after_turns`` new turns, and not within the cooldown of the last
        consolidation — unless the session is about to lose unconsolidated turns to the
        ``max_session_turns`` cap. The count is this process's; the task checks the session's
        marker, shared by every process, before it consolidates.
        """
        after = self.config.consolidate_after_turns
        if self.consolidator is None or after == 0 or self._closed:
            return
        key = (agent_id, session_id)
        count = self._new_turns.get(key, 0) + 1
        self._new_turns[key] = count
        trimming = count >= self.config.max_session_turns - 1
        if count < after or key in self._consolidating:
            return
        if not trimming and time.monotonic() < self._not_before.get(key, 0.0):
            return
        task = asyncio.get_running_loop().create_task(
            self._background_consolidation(key), name=f"actrone-consolidate-{session_id}"
        )
        self._consolidating[key] = task

    async def _background_consolidation(self, key: tuple[str, str]) -> None:
        agent_id, session_id = key
        try:
            info = await self.store.get_session(
                agent_id, session_id, ttl_seconds=self.config.session_ttl_seconds
            )
            marker = info.metadata.get(consolidation.MARKER) if info is not None else None
            last = consolidation.last_run(marker)
            cooldown = self.config.consolidate_cooldown_seconds
            waited = (_now() - last).total_seconds() if last is not None else math.inf
            trimming = self._new_turns.get(key, 0) >= self.config.max_session_turns - 1
            if waited < cooldown and not trimming:
                self._not_before[key] = time.monotonic() + cooldown - waited
                return
            await self._consolidate_locked(
                agent_id,
                session_id,
                expired=False,
                min_turns=min(self.config.consolidate_after_turns, self.config.max_session_turns),
            )
            self._new_turns.pop(key, None)
            self._not_before[key] = time.monotonic() + cooldown
        except Exception as exc:
            # Logged, never raised: the caller of store_turn is long gone. The turns stay
            # pending; the next turn after the retry delay starts another attempt.
            logger.warning(
                "background consolidation of session %r of agent %r failed: %s: %s; "
                "retrying after %.0fs",
                session_id,
                agent_id,
                type(exc).__name__,
                exc,
                _CONSOLIDATION_RETRY_SECONDS,
            )
            self._not_before[key] = time.monotonic() + _CONSOLIDATION_RETRY_SECONDS
        finally:
            self._consolidating.pop(key, None)

    async def _finish_background(self) -> None:
        """Let running background consolidations finish (a short grace), then cancel them."""
        tasks = list(self._consolidating.values())
        if not tasks:
            return
        _, late = await asyncio.wait(tasks, timeout=_CLOSE_GRACE_SECONDS)
        for task in late:
            task.cancel()
        if late:
            await asyncio.gather(*late, return_exceptions=True)

    # -- L2 writes --
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
        """
        item = {
            "content": content,
            "session_id": session_id,
            "content_type": content_type,
            "importance": importance,
            "tags": tags,
            "source": source,
            "sensitivity": sensitivity,
            "created_at": created_at,
            "metadata": metadata,
            "memory_id": memory_id,
            "expires_at": expires_at,
            "source_turn_ids": source_turn_ids,
        }
        ids = await self.inject_memories(agent_id, [item])
        return ids[0]

    async def inject_memories(
        self, agent_id: str, items: Iterable[Mapping[str, Any] | str]
    ) -> list[str]:
        """Store many memories at once: all land or none does. Returns their ids in order.

        Each item is a string (the content) or a mapping with the keyword arguments of
        :meth:`inject_memory` (``content`` required). An item repeated in the batch is stored
        once and its positions get the same id; one ``memory_id`` with two different contents
        raises :class:`~actrone_pg.errors.ValidationError`.
        """
        v.check_id("agent_id", agent_id)
        if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
            raise ValidationError("items must be a list of memories (strings or dicts)")
        now = _now()
        memories = [self._build_memory(agent_id, item, i, now) for i, item in enumerate(items)]
        if not memories:
            return []
        # An item repeated in one batch (a conversation says "Thanks!" twice) is stored once, as
        # two calls would store it; the later copy wins, as a second call's upsert would. One id
        # with two different contents is a contradiction, not a repeat.
        unique: dict[str, Memory] = {}
        for m in memories:
            earlier = unique.get(m.id)
            if earlier is not None and earlier.content != m.content:
                raise ValidationError(
                    f"memory id {m.id!r} is given twice in one batch with different content"
                )
            unique[m.id] = m
        vectors = await self._embed([m.content for m in unique.values()])
        records = [
            MemoryRecord(memory=m, vector=vec)
            for m, vec in zip(unique.values(), vectors, strict=True)
        ]
        await self.store.upsert_memories(records)
        return [m.id for m in memories]

    def _build_memory(
        self, agent_id: str, item: Mapping[str, Any] | str, index: int, now: datetime
    ) -> Memory:
        if isinstance(item, str):
            item = {"content": item}
        if not isinstance(item, Mapping):
            raise ValidationError(
                f"item {index}: expected a string or a dict, got {type(item).__name__}"
            )
        unknown = set(item) - _MEMORY_FIELDS
        if unknown:
            raise ValidationError(f"item {index}: unknown field(s) {sorted(unknown)}")
        if "content" not in item:
            raise ValidationError(f"item {index}: 'content' is required")
        limit = self.config.max_text_chars
        try:
            content = v.check_text("content", item["content"], limit)
            session_id = item.get("session_id")
            if session_id is not None:
                v.check_id("session_id", session_id)
            created = item.get("created_at")
            created_at = now if created is None else v.check_datetime("created_at", created)
            created_at = created_at.astimezone(UTC)
            memory_id = item.get("memory_id")
            if memory_id is None:
                key = f"{agent_id}\x00{session_id or ''}\x00{content}"
                memory_id = str(uuid.uuid5(_MEMORY_NAMESPACE, key))
            else:
                v.check_id("memory_id", memory_id)
            return Memory(
                id=memory_id,
                agent_id=agent_id,
                session_id=session_id,
                content=content,
                content_type=v.check_label("content_type", item.get("content_type", "injected")),
                importance=v.check_importance(item.get("importance", 0.5)),
                tags=v.check_tags(item.get("tags", ())),
                source=v.check_label("source", item.get("source", "injected")),
                sensitivity=v.check_label("sensitivity", item.get("sensitivity", "none")),
                created_at=created_at,
                metadata=v.check_metadata(item.get("metadata"), max_chars=limit),
                embedder=self.embedder.name,
                token_count=self.count_tokens(content),
                expires_at=_check_expiry(item.get("expires_at"), now),
                source_turn_ids=v.check_turn_ids(item.get("source_turn_ids", ())),
                valid_from=now,
            )
        except ValidationError as exc:
            raise type(exc)(f"item {index}: {exc}") from None

    async def delete_memory(self, agent_id: str, memory_id: str) -> bool:
        """Delete one of the agent's memories; ``False`` if the agent has no such memory."""
        v.check_id("agent_id", agent_id)
        v.check_id("memory_id", memory_id)
        return await self.store.delete_memory(agent_id, memory_id)

    async def get_memory(self, agent_id: str, memory_id: str) -> Memory | None:
        """The current version of one of the agent's memories, or ``None`` (also once expired)."""
        v.check_id("agent_id", agent_id)
        v.check_id("memory_id", memory_id)
        found = self._live(await self.store.get_memory(agent_id, memory_id), _now())
        return None if found is None else self._shown(found)

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
        v.check_id("agent_id", agent_id)
        v.check_id("memory_id", memory_id)
        limit = self.config.max_text_chars
        changes: dict[str, Any] = {}
        if content is not None:
            changes["content"] = v.check_text("content", content, limit)
        if tags is not None:
            changes["tags"] = v.check_tags(tags)
        if importance is not None:
            changes["importance"] = v.check_importance(importance)
        if metadata is not None:
            changes["metadata"] = v.check_metadata(metadata, max_chars=limit)
        if content_type is not None:
            changes["content_type"] = v.check_label("content_type", content_type)
        if not isinstance(clear_expiry, bool):
            raise ValidationError(f"clear_expiry must be True or False, got {clear_expiry!r}")
        if clear_expiry and expires_at is not None:
            raise ValidationError(
                "pass either expires_at (a new expiry) or clear_expiry=True (no expiry), not both"
            )
        if expires_at is not None:
            changes["expires_at"] = _check_expiry(expires_at, _now())
        if clear_expiry:
            changes["expires_at"] = None
        # Another writer may update the same memory between our read and our write: the store
        # writes only over the version we read, so re-read and apply the change again.
        for _ in range(_UPDATE_ATTEMPTS):
            now = _now()
            current = self._live(await self.store.get_memory(agent_id, memory_id), now)
            if current is None:
                raise MemoryNotFoundError(f"agent {agent_id!r} has no memory {memory_id!r}")
            text = changes.get("content", current.content)
            new = replace(
                current,
                **changes,
                embedder=self.embedder.name,
                token_count=self.count_tokens(text),
                version=current.version + 1,
                valid_from=max(now, current.valid_from or now),
                valid_to=None,
                explain=None,
            )
            (vector,) = await self._embed([text])
            if await self.store.replace_memory(MemoryRecord(new, vector), version=current.version):
                return self._shown(new)
        raise StoreError(
            f"memory {memory_id!r} kept changing under {_UPDATE_ATTEMPTS} attempts to update it;"
            " try again"
        )

    async def memory_history(self, agent_id: str, memory_id: str) -> list[Memory]:
        """Every version of the memory, oldest first, the current one last.

        ``[]`` if the agent has no such memory, or it has expired (an expired memory is never
        returned). Replaced versions keep their own text and fields.
        """
        v.check_id("agent_id", agent_id)
        v.check_id("memory_id", memory_id)
        versions = await self.store.memory_history(agent_id, memory_id)
        if not versions or self._live(versions[-1], _now()) is None:
            return []
        return [self._shown(m) for m in versions]

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
        v.check_id("agent_id", agent_id)
        v.check_limit("limit", limit)
        flt = v.check_filters(filters, max_chars=self.config.max_text_chars)
        after = None if cursor is None else _decode_cursor(cursor)
        found = await self.store.list_memories(
            agent_id, now=_now(), limit=limit + 1, after=after, filter=flt
        )
        items = found[:limit]
        more = len(found) > limit
        return MemoryPage(
            items=[self._shown(m) for m in items],
            next_cursor=_encode_cursor(items[-1]) if more else None,
        )

    async def count_memories(self, agent_id: str) -> int:
        """How many memories the agent has."""
        v.check_id("agent_id", agent_id)
        return await self.store.count_memories(agent_id)

    async def erase_agent(self, agent_id: str) -> None:
        """Remove every turn, session, memory, statistic and lock of the agent."""
        v.check_id("agent_id", agent_id)
        await self.store.erase_agent(agent_id)

    # -- retrieval --
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

        ``filters`` (spec §9.3; keys in :data:`actrone_pg.pipeline.FILTER_KEYS`) restricts the
        search to the memories that match, before ranking: the BM25 statistics, the three
        rankings and the fusion are those of the filtered set.
        """
        v.check_id("agent_id", agent_id)
        v.check_text("query", query, self.config.max_text_chars)
        v.check_limit("limit", limit)
        flt = v.check_filters(filters, max_chars=self.config.max_text_chars)
        packed = await self._search(agent_id, query, None, limit, flt)
        return [self._present(h, explain) for h in packed.hits]

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
        v.check_id("agent_id", agent_id)
        v.check_id("session_id", session_id)
        v.check_text("query", query, self.config.max_text_chars)
        v.check_budget(token_budget)
        flt = v.check_filters(filters, max_chars=self.config.max_text_chars)
        started = time.perf_counter()
        shares = split_budget(
            token_budget, self.config.budget_fraction_session, self.config.budget_fraction_episodic
        )
        async with asyncio.TaskGroup() as tg:
            l1 = tg.create_task(
                self._telemetry.step(
                    "actrone.l1",
                    self.store.recent_turns(
                        agent_id,
                        session_id,
                        limit=self.config.max_session_turns,
                        ttl_seconds=self.config.session_ttl_seconds,
                    ),
                )
            )
            l2 = tg.create_task(self._search(agent_id, query, shares.episodic, None, flt))
        turns = l1.result()
        packed = l2.result()
        with self._telemetry.span("actrone.l1.pack"):
            recent, session_used = pack_turns(
                list(reversed(turns)), self._turn_tokens, shares.session
            )
        chosen = [self._present(h, explain) for h in packed.hits]
        return RetrievedContext(
            agent_id=agent_id,
            session_id=session_id,
            query=query,
            recent_turns=recent,
            episodic_memories=chosen,
            token_budget=token_budget,
            session_budget=shares.session,
            episodic_budget=shares.episodic,
            session_tokens=session_used,
            episodic_tokens=packed.tokens,
            retrieval_ms=(time.perf_counter() - started) * 1000.0,
            relevance_threshold=self._threshold,
            candidates_considered=packed.ranked,
        )

    def _shown(self, memory: Memory) -> Memory:
        """``memory`` as a read returns it: redacted if its sensitivity is listed (§9.6)."""
        if memory.sensitivity in self._redacted:
            return replace(memory, content=f"[redacted: {memory.sensitivity}]")
        return memory

    def _live(self, memory: Memory | None, now: datetime) -> Memory | None:
        """``memory`` unless it is ``None`` or has expired at ``now``."""
        if memory is None or (memory.expires_at is not None and memory.expires_at <= now):
            return None
        return memory

    def _count_turn(self, user: str, assistant: str, tool_results: list[Any] | None) -> int:
        """A turn's tokens: its two messages and the JSON of its tool results, together."""
        tokens = self.count_tokens(user) + self.count_tokens(assistant)
        if tool_results:
            tokens += self.count_tokens(json.dumps(tool_results))
        return tokens

    def _turn_tokens(self, turn: Turn) -> int:
        # A custom counter recounts: the stored count may come from another manager's counter.
        if not self._custom_counter:
            return turn.token_count
        return self._count_turn(turn.user_message, turn.assistant_message, turn.tool_results)

    def _memory_tokens(self, hit: ScoredMemory) -> int:
        m = hit.memory
        return self.count_tokens(m.content) if self._custom_counter else m.token_count

    def _present(self, hit: ScoredMemory, explain: bool) -> Memory:
        m = hit.memory
        # Nothing to change: the (frozen) memory itself, as most calls have it (docs/benchmarks.md).
        if (
            not explain
            and m.explain is None
            and not self._custom_counter
            and m.sensitivity not in self._redacted
        ):
            return m
        # The constructor directly: dataclasses.replace is ~4x slower (docs/benchmarks.md).
        content = m.content
        if m.sensitivity in self._redacted:
            content = f"[redacted: {m.sensitivity}]"
        return Memory(
            id=m.id,
            agent_id=m.agent_id,
            session_id=m.session_id,
            content=content,
            content_type=m.content_type,
            importance=m.importance,
            tags=m.tags,
            source=m.source,
            sensitivity=m.sensitivity,
            created_at=m.created_at,
            metadata=m.metadata,
            embedder=m.embedder,
            token_count=self._memory_tokens(hit),
            expires_at=m.expires_at,
            source_turn_ids=m.source_turn_ids,
            version=m.version,
            valid_from=m.valid_from,
            valid_to=m.valid_to,
            explain=hit.explain if explain else None,
        )

    async def _search(
        self,
        agent_id: str,
        query: str,
        budget: int | None,
        max_hits: int | None = None,
        flt: MemoryFilter | None = None,
    ) -> PackedSearch:
        """The best ranked memories that fit ``budget`` tokens (at most ``max_hits``).

        One store call. The store packs when each memory costs its stored token count and no
        reranker reorders the ranking: it can then skip building, or fetching, the memories not
        chosen. Otherwise it returns the hits to rerank (the top ``rerank_top_k``) or to recount
        (all of them), and they are packed here.
        """
        reorder = self.reranker is not None
        repack = reorder or (budget is not None and self._custom_counter)
        step = self._telemetry.step
        if not repack:
            request = await self._request(agent_id, query, budget, max_hits, flt)
            return await step("actrone.l2.search", self.store.search(request))
        top = self.config.rerank_top_k if reorder else None
        request = await self._request(agent_id, query, None, top, flt)
        found = await step("actrone.l2.search", self.store.search(request))
        hits = found.hits
        if reorder and hits:
            hits = await step("actrone.rerank", self._rerank(query, hits))
        with self._telemetry.span("actrone.l2.pack"):
            return pack_hits(hits, self._memory_tokens, budget, max_hits)

    async def _request(
        self,
        agent_id: str,
        query: str,
        budget: int | None,
        max_hits: int | None,
        flt: MemoryFilter | None,
    ) -> SearchRequest:
        return SearchRequest(
            agent_id=agent_id,
            query=query,
            terms=tuple(query_terms(query, self.config.text_analyzer)),
            vector=await self._embed_query(query),
            embedder=self.embedder.name,
            threshold=self._threshold,
            limit=self.config.max_episodic_memories,
            params=self._params,
            now=_now(),
            budget=budget,
            max_hits=max_hits,
            filter=flt,
        )

    async def _rerank(self, query: str, hits: list[ScoredMemory]) -> list[ScoredMemory]:
        assert self.reranker is not None
        top = hits[: self.config.rerank_top_k]
        raw = await self.reranker.score(query, [h.memory.content for h in top])
        try:
            scores = [float(s) for s in np.asarray(raw, dtype=np.float64).reshape(-1)]
        except (TypeError, ValueError):
            raise RerankerError(
                "the reranker returned something that is not a list of numbers"
            ) from None
        if len(scores) != len(top) or not all(math.isfinite(s) for s in scores):
            raise RerankerError(
                f"the reranker returned {len(scores)} scores for {len(top)} texts,"
                " or non-finite ones"
            )
        return rerank(top, scores)

    async def _embed(self, texts: list[str]) -> list[Vector]:
        size = self.config.embedding_batch_size
        out: list[Vector] = []
        for start in range(0, len(texts), size):
            chunk = texts[start : start + size]
            try:
                raw = await self._telemetry.step(
                    "actrone.embed",
                    self.embedder.embed_batch(chunk),
                    {"actrone.embed.texts": len(chunk)},
                )
            except ActroneError:
                raise
            except Exception as exc:
                raise EmbedderError(
                    f"embedder {self.embedder.name!r} failed: {type(exc).__name__}: {exc}"
                ) from exc
            out.extend(as_vectors(raw, len(chunk), self.embedder.dimensions, self.embedder.name))
        return out

    async def _embed_query(self, query: str) -> Vector:
        cached = self._query_cache.get(query)
        if cached is not None:
            self._query_cache.move_to_end(query)
            return cached
        (vector,) = await self._embed([query])
        self._query_cache[query] = vector
        if len(self._query_cache) > self.config.query_cache_size:
            self._query_cache.popitem(last=False)
        return vector


@asynccontextmanager
async def create_memory_manager(
    config: MemoryConfig | None = None,
    *,
    store: Store | None = None,
    embedder: Embedder | None = None,
    reranker: Reranker | None = None,
    token_counter: TokenCounter | None = None,
) -> AsyncIterator[MemoryManager]:
    """``async with create_memory_manager(config) as mm:`` — a manager closed on exit."""
    mm = await MemoryManager.create(
        config, store=store, embedder=embedder, reranker=reranker, token_counter=token_counter
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


def _encode_cursor(m: Memory) -> str:
    """The opaque cursor after ``m``: its ``(created_at, id)`` key, as URL-safe base64 JSON."""
    key = json.dumps([micros(m.created_at), m.id], ensure_ascii=False).encode("utf-8")
    return base64.urlsafe_b64encode(key).decode("ascii").rstrip("=")


def _decode_cursor(cursor: object) -> tuple[datetime, str]:
    if not isinstance(cursor, str) or not cursor or len(cursor) > 4 * v.MAX_ID_CHARS:
        raise ValidationError("cursor must be a next_cursor string from list_memories")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        at, memory_id = json.loads(raw.decode("utf-8"))
        when = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=int(at))
        return when, v.check_id("cursor id", memory_id)
    except (ValueError, TypeError, OverflowError, UnicodeDecodeError):
        raise ValidationError(
            "cursor is not one list_memories returned (pass next_cursor as it is)"
        ) from None


def _check_expiry(value: object, now: datetime) -> datetime | None:
    """``expires_at``: ``None`` or an aware datetime after ``now`` (a past one is refused)."""
    if value is None:
        return None
    expires = v.check_datetime("expires_at", value)
    if expires <= now:
        raise ValidationError(
            f"expires_at {expires.isoformat()} is not in the future; a memory that expired"
            " already would never be returned (omit it, or pass a later time)"
        )
    return expires


def _now() -> datetime:
    return datetime.now(UTC)
