"""The PostgreSQL store's one read path: every search goes through ``retrieve()``.

``retrieve()`` (migration 0024) is the entry point of every client: it decides the plan (the
embedder's dimension, a filter's candidates and statistics, an agent's own HNSW index, the
expired memories left out, Citus's shard tables) and runs it, L1's turns included, in one round
trip (docs/postgres.md, "One read path"). The store builds its arguments
(:func:`.builders.retrieve`), sends the one statement and decodes the rows
(:func:`.rows.retrieved`); the TypeScript package sends the same statement and gets the same rows.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from actrone_pg.errors import StoreError
from actrone_pg.filters import MemoryFilter
from actrone_pg.models import Memory, Turn
from actrone_pg.pipeline import PackedSearch, SearchRequest
from actrone_pg.stores.base import check_query_dimensions
from actrone_pg.stores.postgres import builders, lookups, rows
from actrone_pg.stores.postgres.connection import Database
from actrone_pg.stores.postgres.statements import DIMENSION_MISMATCH

__all__ = ["fetch_context", "list_memories", "search"]


async def search(db: Database, request: SearchRequest) -> PackedSearch:
    """``request``'s ranked memories: every one without a budget and a hit limit, else the
    ones chosen in SQL (``pack_positions``), read in the snapshot that ranked them."""
    columns, found = await _retrieve(db, request, None)
    return rows.retrieved(request.agent_id, None, columns, found, explain=request.explain)[1]


async def fetch_context(
    db: Database,
    agent_id: str,
    session_id: str,
    *,
    limit: int,
    ttl_seconds: float,
    request: SearchRequest,
) -> tuple[list[Turn], PackedSearch]:
    """The session's recent turns (as :func:`.sessions.recent_turns`) and ``request``'s search
    (as :func:`search`), in one round trip."""
    columns, found = await _retrieve(db, request, (session_id, limit, ttl_seconds))
    return rows.retrieved(agent_id, session_id, columns, found, explain=request.explain)


async def _retrieve(
    db: Database, request: SearchRequest, session: tuple[str, int, float] | None
) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
    terms = await lookups.query_terms(db, request.query, request.terms)
    statement, params = builders.retrieve(
        request, schema=db.schema, terms=terms, session=session, ef_search=db.ann_ef_search
    )
    try:
        async with db.conn() as conn:
            return await db.fetch_tuples(conn, statement, params)
    except StoreError as exc:
        cause = exc.__cause__
        if getattr(cause, "sqlstate", None) == DIMENSION_MISMATCH:
            stored = int(getattr(getattr(cause, "diag", None), "message_detail", None) or 0)
            check_query_dimensions(request.embedder, stored, request.vector)
        raise


async def list_memories(
    db: Database,
    agent_id: str,
    *,
    now: datetime,
    limit: int,
    after: tuple[datetime, str] | None = None,
    filter: MemoryFilter | None = None,
) -> list[Memory]:
    """A keyset page of the agent's live memories, newest first, filtered in SQL."""
    statement, params = builders.list_memories(
        db.schema, agent_id, now=now, limit=limit, after=after, flt=filter
    )
    async with db.conn() as conn:
        found = await db.fetch(conn, statement, params)
    return [rows.memory(agent_id, r) for r in found]
