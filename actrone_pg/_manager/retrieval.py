"""The manager's retrieval: L2 search, and the context of L1 and L2 inside a token budget."""

from __future__ import annotations

import asyncio
import math
import operator
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, cast

import numpy as np

from actrone_pg import _validation as v
from actrone_pg._guard import calling
from actrone_pg._manager.context import ManagerContext, utc_now
from actrone_pg.budget import pack_turns, split_budget
from actrone_pg.errors import RerankerError
from actrone_pg.models import Memory, RetrievedContext, ScoredMemory, Turn, Vector
from actrone_pg.pipeline import (
    NEIGHBOUR_POOL,
    MemoryFilter,
    PackedSearch,
    SearchRequest,
    inherit_from_predecessors,
    pack_hits,
    rerank,
)
from actrone_pg.ranking import query_terms
from actrone_pg.stores.base import ContextStore

__all__ = ["Retrieval"]

#: A turn's cost in the session's budget without a custom token counter: its stored count.
_STORED_TOKENS = operator.attrgetter("token_count")
#: A stored memory's explanation (``None`` as a store keeps it; an ``Explain`` is always true).
_EXPLANATION = operator.attrgetter("explain")


class Retrieval:
    """Search the agent's memories and assemble its context (the ranking is the pipeline's)."""

    def __init__(self, ctx: ManagerContext) -> None:
        self.ctx = ctx
        # Query text -> its BM25 terms and its vector, least recently used first
        # (``query_cache_size`` at most).
        self._query_cache: OrderedDict[str, tuple[tuple[str, ...], Vector]] = OrderedDict()
        # Asked once: a runtime protocol check walks the protocol's members on every call.
        self._together = isinstance(ctx.store, ContextStore)

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

        ``filters`` (spec §9.3; keys in :data:`actrone_pg.filters.FILTERS`) restricts the
        search to the memories that match, before ranking: the BM25 statistics, the three
        rankings and the fusion are those of the filtered set.
        """
        v.check_id("agent_id", agent_id)
        v.check_text("query", query, self.ctx.config.max_text_chars)
        v.check_limit("limit", limit)
        flt = v.check_filters(filters, max_chars=self.ctx.config.max_text_chars)
        packed = await self._search(agent_id, query, None, limit, flt, explain=explain)
        return self._presented(packed.hits, explain)

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
        """What :meth:`actrone_pg.MemoryManager.retrieve_context` does (documented there)."""
        v.check_id("agent_id", agent_id)
        v.check_id("session_id", session_id)
        v.check_text("query", query, self.ctx.config.max_text_chars)
        v.check_budget(token_budget)
        flt = v.check_filters(filters, max_chars=self.ctx.config.max_text_chars)
        started = time.perf_counter()
        shares = split_budget(
            token_budget,
            self.ctx.config.budget_fraction_session,
            self.ctx.config.budget_fraction_episodic,
        )
        if self._together:
            # L1 and L2 in one statement (spec §3.2): the store reads both at once.
            turns, packed = await self._fetch_together(
                agent_id, session_id, query, shares.episodic, flt, explain=explain
            )
        else:
            async with asyncio.TaskGroup() as tg:
                l1 = tg.create_task(
                    self.ctx.telemetry.step(
                        "actrone.l1",
                        self.ctx.store.recent_turns(
                            agent_id,
                            session_id,
                            limit=self.ctx.config.max_session_turns,
                            ttl_seconds=self.ctx.config.session_ttl_seconds,
                        ),
                    )
                )
                l2 = tg.create_task(
                    self._search(agent_id, query, shares.episodic, None, flt, explain=explain)
                )
            turns = l1.result()
            packed = l2.result()
        with self.ctx.telemetry.span("actrone.l1.pack"):
            recent, session_used = pack_turns(
                turns[::-1],
                self._turn_tokens if self.ctx.custom_counter else _STORED_TOKENS,
                shares.session,
            )
        chosen = self._presented(packed.hits, explain)
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
            relevance_threshold=self.ctx.threshold,
            candidates_considered=packed.candidates_considered,
        )

    def _turn_tokens(self, turn: Turn) -> int:
        # A custom counter recounts: the stored count may come from another manager's counter.
        if not self.ctx.custom_counter:
            return turn.token_count
        return self.ctx.count_turn(turn.user_message, turn.assistant_message, turn.tool_results)

    def _memory_tokens(self, hit: ScoredMemory) -> int:
        m = hit.memory
        return self.ctx.count_tokens(m.content) if self.ctx.custom_counter else m.token_count

    def _presented(self, hits: list[ScoredMemory], explain: bool) -> list[Memory]:
        """The memories of ``hits`` as a read returns them (:meth:`_present`)."""
        if not (explain or self.ctx.custom_counter or self.ctx.redacted):
            # Most calls change nothing (see _present): the stored memories themselves, asked
            # once for all of them rather than once per memory (docs/benchmarks.md, "The
            # client's CPU per call").
            memories = [h.memory for h in hits]
            if not any(map(_EXPLANATION, memories)):
                return memories
        return [self._present(h, explain) for h in hits]

    def _present(self, hit: ScoredMemory, explain: bool) -> Memory:
        m = hit.memory
        # Nothing to change: the (frozen) memory itself, as most calls have it (docs/benchmarks.md).
        if (
            not explain
            and m.explain is None
            and not self.ctx.custom_counter
            and m.sensitivity not in self.ctx.redacted
        ):
            return m
        return self.ctx.shown(
            m, token_count=self._memory_tokens(hit), explain=hit.explain if explain else None
        )

    async def _search(
        self,
        agent_id: str,
        query: str,
        budget: int | None,
        max_hits: int | None = None,
        flt: MemoryFilter | None = None,
        *,
        explain: bool = True,
    ) -> PackedSearch:
        """The best ranked memories that fit ``budget`` tokens (at most ``max_hits``), with
        their explanations if ``explain`` (or if reranking or packing here needs them).

        One store call (what it is asked for: :meth:`_l2_asks`); hits returned unpacked are
        reranked and packed here.
        """
        asked, limit, repack = self._l2_asks(budget, max_hits)
        request = await self._request(agent_id, query, asked, limit, flt, explain or repack)
        found = await self.ctx.telemetry.step("actrone.l2.search", self.ctx.store.search(request))
        if not repack:
            return found
        return await self._l2_repack(request, found, budget, max_hits)

    async def _fetch_together(
        self,
        agent_id: str,
        session_id: str,
        query: str,
        budget: int,
        flt: MemoryFilter | None,
        *,
        explain: bool,
    ) -> tuple[list[Turn], PackedSearch]:
        """L1 and L2 from one store call (a :class:`ContextStore`), L2 as :meth:`_search`."""
        store = cast(ContextStore, self.ctx.store)
        asked, limit, repack = self._l2_asks(budget, None)
        request = await self._request(agent_id, query, asked, limit, flt, explain or repack)
        turns, found = await self.ctx.telemetry.steps(
            ("actrone.l1", "actrone.l2.search"),
            store.fetch_context(
                agent_id,
                session_id,
                limit=self.ctx.config.max_session_turns,
                ttl_seconds=self.ctx.config.session_ttl_seconds,
                request=request,
            ),
        )
        if repack:
            found = await self._l2_repack(request, found, budget, None)
        return turns, found

    @property
    def _neighbour_weight(self) -> float:
        config = self.ctx.config
        return config.neighbour_weight if config.hybrid_retrieval else 0.0

    def _l2_asks(
        self, budget: int | None, max_hits: int | None
    ) -> tuple[int | None, int | None, bool]:
        """What to ask the store for: (budget, hit limit, whether the manager packs itself).

        The store packs when each memory costs its stored token count and nothing reorders its
        ranking: it can then skip building, or fetching, the memories not chosen. Otherwise it
        returns the hits to rerank (the top ``rerank_top_k``), the hits a predecessor may lift
        (``NEIGHBOUR_POOL``, or all of them for a budget, which may hold more) or the hits to
        recount (all of them).
        """
        reorder = self.ctx.reranker is not None
        neighbours = self._neighbour_weight > 0.0
        if not (reorder or neighbours or (budget is not None and self.ctx.custom_counter)):
            return budget, max_hits, False
        limit: int | None = None
        if reorder:
            limit = max(self.ctx.config.rerank_top_k, NEIGHBOUR_POOL if neighbours else 0)
        elif neighbours and not (budget is not None and self.ctx.custom_counter):
            limit = max(NEIGHBOUR_POOL, max_hits or 0)
        return None, limit, True

    async def _l2_repack(
        self, request: SearchRequest, found: PackedSearch, budget: int | None, max_hits: int | None
    ) -> PackedSearch:
        """Lift hits by their predecessors, rerank (with a reranker) and pack the hits the store
        returned unpacked."""
        hits = found.hits
        weight = self._neighbour_weight
        if weight > 0.0:
            hits = inherit_from_predecessors(hits[:NEIGHBOUR_POOL], weight) + hits[NEIGHBOUR_POOL:]
        if self.ctx.reranker is not None and hits:
            hits = await self.ctx.telemetry.step(
                "actrone.rerank", self._rerank(request.query, hits)
            )
        with self.ctx.telemetry.span("actrone.l2.pack"):
            packed = pack_hits(hits, self._memory_tokens, budget, max_hits)
        if self.ctx.reranker is not None:
            return packed
        if (
            budget is not None
            and request.max_hits is not None
            and len(found.hits) == request.max_hits
            and len(packed.hits) == len(hits)
        ):
            # A budget that holds every hit asked for may hold more: the rest, in fused order.
            rest = await self.ctx.telemetry.step(
                "actrone.l2.search", self.ctx.store.search(replace(request, max_hits=None))
            )
            with self.ctx.telemetry.span("actrone.l2.pack"):
                packed = pack_hits(hits + rest.hits[len(hits) :], self._memory_tokens, budget)
        # Every admitted candidate was ranked, not only the hits asked for.
        return replace(packed, candidates_considered=found.candidates_considered)

    async def _request(
        self,
        agent_id: str,
        query: str,
        budget: int | None,
        max_hits: int | None,
        flt: MemoryFilter | None,
        explain: bool = True,
    ) -> SearchRequest:
        terms, vector = await self._query(query)
        return SearchRequest(
            agent_id=agent_id,
            query=query,
            terms=terms,
            vector=vector,
            embedder=self.ctx.embedder.name,
            threshold=self.ctx.threshold,
            limit=self.ctx.config.max_episodic_memories,
            params=self.ctx.params,
            now=utc_now(),
            budget=budget,
            max_hits=max_hits,
            filter=flt,
            explain=explain,
        )

    async def _rerank(self, query: str, hits: list[ScoredMemory]) -> list[ScoredMemory]:
        assert self.ctx.reranker is not None
        top = hits[: self.ctx.config.rerank_top_k]
        with calling("reranker"):
            raw = await self.ctx.reranker.score(query, [h.memory.content for h in top])
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

    async def _query(self, query: str) -> tuple[tuple[str, ...], Vector]:
        """``query``'s BM25 terms and its vector, kept together for a query asked again."""
        cached = self._query_cache.get(query)
        if cached is not None:
            self._query_cache.move_to_end(query)
            return cached
        config = self.ctx.config
        terms = tuple(
            query_terms(query, config.text_analyzer, drop_question_words=config.drop_question_words)
        )
        (vector,) = await self.ctx.embed([query])
        found = self._query_cache[query] = (terms, vector)
        if len(self._query_cache) > config.query_cache_size:
            self._query_cache.popitem(last=False)
        return found
