"""The PostgreSQL store's L2 search: ``hybrid_search()``, the SQL rendering of the pipeline."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from psycopg import sql

from actrone_pg.filters import MemoryFilter
from actrone_pg.models import Memory
from actrone_pg.pipeline import PackedSearch, SearchRequest
from actrone_pg.stores.base import check_query_dimensions
from actrone_pg.stores.postgres import builders, lookups, maintenance, rows
from actrone_pg.stores.postgres.connection import Database
from actrone_pg.stores.postgres.statements import PROPAGATE_SET_LOCAL

__all__ = ["distributed_built", "list_memories", "search"]


async def search(db: Database, request: SearchRequest) -> PackedSearch:
    """Run ``hybrid_search()`` for the agent: every ranked row, or only the rows that fit.

    Without a budget or a hit limit, ``SEARCH`` returns every ranked memory. Otherwise
    ``SEARCH_PACKED`` ranks without the memories' fields, chooses in SQL
    (``pack_positions``) and reads only the rows chosen, in one statement: the rows read are
    the ones ranked, in one snapshot, even while other sessions write. The statement is
    :func:`.builders.search`'s; this looks up what it needs and executes it.
    """
    expected = await lookups.embedder_dimensions(db, request.embedder)
    if expected is None:
        return PackedSearch(hits=[], candidates_considered=0, tokens=0)
    check_query_dimensions(request.embedder, expected, request.vector)
    terms = await lookups.query_terms(db, request.query, request.terms)
    # A filtered set is ranked exactly, whatever the agent's size (no HNSW scan).
    ann = None
    if request.filter is None:
        ann = await maintenance.ann_dimensions(db, request.agent_id, request.embedder, expected)
    # The memories' fields come from the memories table (statements._MEMORY_ROW), so the
    # function never returns them (content=False).
    statement, params = builders.search(
        request,
        schema=db.schema,
        vector_schema=db.vector_schema,
        terms=terms,
        ann_dimensions=ann,
    )
    async with db.conn() as conn:
        # Binary results parse an order of magnitude faster than text (docs/benchmarks.md).
        # The HNSW scan is never prepared: only a plan made for the bound agent and embedder
        # can use that agent's partial index, and a prepared statement may switch to a
        # generic plan.
        found = await db.fetch(
            conn, statement, params, binary=True, prepare=False if ann is not None else None
        )
    packed = request.budget is not None or request.max_hits is not None
    decode = rows.packed if packed else rows.searched
    return decode(request.agent_id, found)


async def distributed_built(
    db: Database, request: SearchRequest, session: tuple[str, int, float] | None
) -> builders.Built | None:
    """On a schema distributed with Citus: ``agent_retrieve``'s statement for ``request``
    and ``session`` (as :func:`.builders.retrieve` takes it), which Citus delegates whole to
    the worker holding the agent's shards; ``None`` when the embedder stored nothing.

    A filter's candidates and statistics, or a large agent's HNSW candidates, are found
    first by a router query (every table read by the agent: that worker too).
    """
    expected = await lookups.embedder_dimensions(db, request.embedder)
    if expected is None:
        return None
    check_query_dimensions(request.embedder, expected, request.vector)
    terms = await lookups.query_terms(db, request.query, request.terms)
    candidates: list[str] | None = None
    stats: tuple[Any, Any, Any] | None = None
    ann = None
    if request.filter is None:
        ann = await maintenance.ann_dimensions(db, request.agent_id, request.embedder, expected)
    if request.filter is not None:
        statement, params = builders.filtered_inputs(
            request, schema=db.schema, vector_schema=db.vector_schema, terms=terms
        )
        async with db.conn() as conn:
            row = (await db.fetch(conn, statement, params))[0]
        candidates = list(row["ids"] or [])
        stats = (row["n_docs"], row["total_length"], row["dfs"])
    elif ann is not None:
        statement, params = builders.ann_ids(
            request, schema=db.schema, vector_schema=db.vector_schema, dimensions=ann
        )
        # hnsw.* reach the worker only as SET LOCAL with citus.propagate_set_commands =
        # 'local' (a session's SET stays on the coordinator), hence the transaction.
        async with db.conn() as conn, conn.transaction():
            await conn.execute(PROPAGATE_SET_LOCAL)
            await conn.execute(
                sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(db.ann_ef_search))
            )
            await conn.execute("SET LOCAL hnsw.iterative_scan = strict_order")
            found = await db.fetch(conn, statement, params, prepare=False)
        candidates = list(found[0]["ids"] or [])
    return builders.agent_retrieve(
        request,
        schema=db.schema,
        terms=terms,
        session=session,
        candidates=candidates,
        stats=stats,
    )


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
