"""The PostgreSQL store's one-call path: L1 and L2 through ``retrieve()`` (migration 0015).

``retrieve_context`` used to cost two pooled connections (L1 and L2 concurrently), each checked
with an empty query before use; the entry function reads the turns, ranks, packs and fetches
the chosen memories in one round trip on one connection, its statements' plans kept for the
session (docs/benchmarks.md, "Where one
call's time goes"). It serves the unfiltered search of an agent scanned exactly, the common
case; a filtered search and an agent with its own HNSW index keep the statements of
:mod:`~actrone_pg.stores.postgres.search` (the L1 read then runs beside them).
"""

from __future__ import annotations

import asyncio
from typing import Any

from psycopg import sql

from actrone_pg.models import Turn
from actrone_pg.pipeline import PackedSearch, SearchRequest
from actrone_pg.stores.base import check_query_dimensions
from actrone_pg.stores.postgres import builders, rows
from actrone_pg.stores.postgres.search import Search
from actrone_pg.stores.postgres.sessions import Sessions

__all__ = ["Context"]


class Context(Sessions, Search):
    """``fetch_context`` (L1 + L2 in one statement) and the packed search through it."""

    async def fetch_context(
        self,
        agent_id: str,
        session_id: str,
        *,
        limit: int,
        ttl_seconds: float,
        request: SearchRequest,
    ) -> tuple[list[Turn], PackedSearch]:
        """The session's recent turns (as :meth:`recent_turns`) and ``request``'s packed
        search (as :meth:`search`), in one round trip where the search allows it."""
        built = await self._retrieve_built(request, (session_id, limit, ttl_seconds))
        if built is None:
            async with asyncio.TaskGroup() as tg:
                l1 = tg.create_task(
                    self.recent_turns(agent_id, session_id, limit=limit, ttl_seconds=ttl_seconds)
                )
                l2 = tg.create_task(self.search(request))
            return l1.result(), l2.result()
        found = await self._retrieve(built)
        turns = [r for r in found if r["kind"] == "turn"]
        return rows.turns(agent_id, session_id, turns), _packed(agent_id, found)

    async def search(self, request: SearchRequest) -> PackedSearch:
        """As :meth:`Search.search`; a packed search that ``retrieve()`` serves goes through it
        (on a schema distributed with Citus, every search goes through ``agent_retrieve()``)."""
        if self.distributed:
            built = await self._distributed_built(request, None)
            if built is None:
                return PackedSearch(hits=[], candidates_considered=0, tokens=0)
            return _packed(request.agent_id, await self._retrieve(built))
        if request.budget is None and request.max_hits is None:
            return await super().search(request)
        built = await self._retrieve_built(request, None)
        if built is None:
            return await super().search(request)
        return _packed(request.agent_id, await self._retrieve(built))

    async def _retrieve(self, built: builders.Built) -> list[dict[str, Any]]:
        statement, params = built
        async with self._conn() as conn:
            # Binary results parse an order of magnitude faster than text (docs/benchmarks.md).
            return await self._fetch(conn, statement, params, binary=True)

    async def _retrieve_built(
        self, request: SearchRequest, session: tuple[str, int, float] | None
    ) -> tuple[sql.Composed, dict[str, Any]] | None:
        """``retrieve()``'s statement (:func:`.builders.retrieve`), or ``None`` where the search
        needs :func:`.builders.search`'s (a filter, an agent with its own HNSW index, an
        embedder that stored nothing); on a schema distributed with Citus,
        ``agent_retrieve()``'s, whatever the search."""
        if self.distributed:
            return await self._distributed_built(request, session)
        if request.filter is not None or (request.budget is None and request.max_hits is None):
            return None
        expected = await self._embedder_dimensions(request.embedder)
        if expected is None:
            return None
        check_query_dimensions(request.embedder, expected, request.vector)
        if await self._ann_dimensions(request.agent_id, request.embedder, expected) is not None:
            return None
        terms = await self._query_terms(request.query, request.terms)
        return builders.retrieve(request, schema=self.schema, terms=terms, session=session)


def _packed(agent_id: str, found: list[dict[str, Any]]) -> PackedSearch:
    """``retrieve()``'s memory rows (kinds ``memory`` and ``ranked``) as a packed search."""
    return rows.packed(agent_id, [r for r in found if r["kind"] != "turn"])
