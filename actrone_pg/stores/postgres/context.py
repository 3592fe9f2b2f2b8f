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
from actrone_pg.stores.postgres import builders, lookups, maintenance, rows, sessions
from actrone_pg.stores.postgres import search as hybrid
from actrone_pg.stores.postgres.connection import Database

__all__ = ["fetch_context", "search"]


async def fetch_context(
    db: Database,
    agent_id: str,
    session_id: str,
    *,
    limit: int,
    ttl_seconds: float,
    request: SearchRequest,
) -> tuple[list[Turn], PackedSearch]:
    """The session's recent turns (as :func:`.sessions.recent_turns`) and ``request``'s packed
    search (as :func:`search`), in one round trip where the search allows it."""
    built = await _retrieve_built(db, request, (session_id, limit, ttl_seconds))
    if built is None:
        async with asyncio.TaskGroup() as tg:
            l1 = tg.create_task(
                sessions.recent_turns(
                    db, agent_id, session_id, limit=limit, ttl_seconds=ttl_seconds
                )
            )
            l2 = tg.create_task(search(db, request))
        return l1.result(), l2.result()
    found = await _retrieve(db, built)
    turns = [r for r in found if r["kind"] == "turn"]
    return rows.turns(agent_id, session_id, turns), _packed(agent_id, found)


async def search(db: Database, request: SearchRequest) -> PackedSearch:
    """As :func:`.search.search`; a packed search that ``retrieve()`` serves goes through it
    (on a schema distributed with Citus, every search goes through ``agent_retrieve()``)."""
    if db.distributed:
        built = await hybrid.distributed_built(db, request, None)
        if built is None:
            return PackedSearch(hits=[], candidates_considered=0, tokens=0)
        return _packed(request.agent_id, await _retrieve(db, built))
    if request.budget is None and request.max_hits is None:
        return await hybrid.search(db, request)
    built = await _retrieve_built(db, request, None)
    if built is None:
        return await hybrid.search(db, request)
    return _packed(request.agent_id, await _retrieve(db, built))


async def _retrieve(db: Database, built: builders.Built) -> list[dict[str, Any]]:
    statement, params = built
    async with db.conn() as conn:
        # Binary results parse an order of magnitude faster than text (docs/benchmarks.md).
        return await db.fetch(conn, statement, params, binary=True)


async def _retrieve_built(
    db: Database, request: SearchRequest, session: tuple[str, int, float] | None
) -> tuple[sql.Composed, dict[str, Any]] | None:
    """``retrieve()``'s statement (:func:`.builders.retrieve`), or ``None`` where the search
    needs :func:`.builders.search`'s (a filter, an agent with its own HNSW index, an
    embedder that stored nothing); on a schema distributed with Citus,
    ``agent_retrieve()``'s, whatever the search."""
    if db.distributed:
        return await hybrid.distributed_built(db, request, session)
    if request.filter is not None or (request.budget is None and request.max_hits is None):
        return None
    expected = await lookups.embedder_dimensions(db, request.embedder)
    if expected is None:
        return None
    check_query_dimensions(request.embedder, expected, request.vector)
    if (
        await maintenance.ann_dimensions(db, request.agent_id, request.embedder, expected)
        is not None
    ):
        return None
    terms = await lookups.query_terms(db, request.query, request.terms)
    return builders.retrieve(request, schema=db.schema, terms=terms, session=session)


def _packed(agent_id: str, found: list[dict[str, Any]]) -> PackedSearch:
    """``retrieve()``'s memory rows (kinds ``memory`` and ``ranked``) as a packed search."""
    return rows.packed(agent_id, [r for r in found if r["kind"] != "turn"])
