"""The physical floor a backend's retrieval is measured against (spec §7), timed in the same run.

- In-memory store: a bare numpy top-500 of the same agent's vectors, computed the way the store
  computes its cosines (:func:`actrone_pg.ranking.cosines`: the same 1,024-column chunks of the
  same column-major matrix, on the same thread), then ``argpartition`` and the 500 sorted: what
  any in-process exact search must at least do. One threaded product over the whole matrix was
  the floor before; on a busy 2-core machine it read 0.15-12 ms from one run to the next (the
  BLAS threads waiting for a core), so the ratio to it meant nothing.
- PostgreSQL: a bare read of the agent's vectors, an index-only pass over its entries of the
  candidate index (``ix_memories_candidates``) that reads each vector and computes nothing. The
  search reads the same entries, so the ratio between the two is what ranking, fusion and
  packing add, whatever the machine's speed that day.

PostgreSQL also gets a second yardstick the spec names beside the floor: a plain nearest-neighbour
query, ``ORDER BY embedding <=> q LIMIT 500`` over the same candidate-index entries, which
computes every distance and keeps the nearest 500 but ranks nothing else (:func:`nearest_for`).

Redis + Qdrant has no floor of its own here: Qdrant's search is the floor.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import numpy as np

from actrone_pg.bench.workload import AgentData, Dataset, unit_rows
from actrone_pg.manager import MemoryManager
from actrone_pg.ranking import cosines

__all__ = ["Floor", "floor_for", "nearest_for"]

#: A bare read of one agent's vectors from its candidate-index entries; {s} is the schema, {vs}
#: pgvector's. count(m.embedding) makes the scan read every vector, which count(*) would skip.
BARE_READ = (
    "SELECT count(m.embedding) FROM {s}.memories AS m WHERE m.agent_id = %s AND m.embedder = %s"
    " AND {vs}.vector_dims(m.embedding) <= 600"
)
#: The plain nearest-neighbour query of spec §7, over the same entries: cosine distance, the
#: nearest ``limit`` ids, nothing else.
PLAIN_NEAREST = (
    "SELECT m.id FROM {s}.memories AS m WHERE m.agent_id = %s AND m.embedder = %s"
    " AND {vs}.vector_dims(m.embedding) <= 600"
    " ORDER BY m.embedding OPERATOR({vs}.<=>) %s LIMIT %s"
)


@dataclass(frozen=True, slots=True)
class Floor:
    """A named floor and one timed call of it for an agent's query."""

    name: str
    call: Callable[[AgentData, int], Awaitable[object]]


def floor_for(mm: MemoryManager, dataset: Dataset, limit: int) -> Floor | None:
    """The floor of ``mm``'s backend for ``dataset``, or ``None`` if the spec names none."""
    if mm.backend == "memory":
        return _numpy_top(dataset, limit)
    if mm.backend == "postgres":
        return _bare_read(mm)
    return None


def nearest_for(mm: MemoryManager, dataset: Dataset, limit: int) -> Floor | None:
    """The plain ``ORDER BY embedding <=> q LIMIT limit`` of PostgreSQL, or ``None`` elsewhere
    (the in-memory floor already is a bare top-``limit``)."""
    if mm.backend != "postgres":
        return None
    # Normalised once, outside the timed calls, as the manager normalises a query's vector.
    queries = {a.agent_id: unit_rows(a.query_vectors) for a in dataset.agents}
    return _postgres_call(
        mm,
        PLAIN_NEAREST,
        f"ORDER BY embedding <=> q LIMIT {limit}",
        lambda agent, q, embedder: (agent.agent_id, embedder, queries[agent.agent_id][q], limit),
        fetch_all=True,
    )


def _numpy_top(dataset: Dataset, limit: int) -> Floor:
    # (dimensions × n) like the in-memory store's matrix, and the query normalised as the manager
    # normalises it, both once, outside the timed calls.
    matrices = {a.agent_id: np.ascontiguousarray(unit_rows(a.vectors).T) for a in dataset.agents}
    queries = {a.agent_id: unit_rows(a.query_vectors) for a in dataset.agents}

    async def top(agent: AgentData, q: int) -> object:
        scores = cosines(queries[agent.agent_id][q], matrices[agent.agent_id])
        k = min(limit, scores.size)
        best = np.argpartition(-scores, k - 1)[:k]
        return best[np.argsort(-scores[best], kind="stable")]

    return Floor(f"numpy top-{limit}", top)


def _bare_read(mm: MemoryManager) -> Floor:
    return _postgres_call(
        mm,
        BARE_READ,
        "bare read, candidate index",
        lambda agent, q, embedder: (agent.agent_id, embedder),
        fetch_all=False,
    )


def _postgres_call(
    mm: MemoryManager,
    text: str,
    name: str,
    params: Callable[[AgentData, int, str], tuple[object, ...]],
    *,
    fetch_all: bool,
) -> Floor:
    """A timed statement on the store's own pool ({s}: its schema, {vs}: pgvector's)."""
    from psycopg import sql

    from actrone_pg.stores.postgres import PostgresStore

    store = mm.store
    assert isinstance(store, PostgresStore)
    embedder = mm.embedder.name
    statement = sql.SQL(text).format(
        s=sql.Identifier(store.schema), vs=sql.Identifier(store._vector_schema)
    )

    async def call(agent: AgentData, q: int) -> object:
        async with store._conn() as conn:
            cur = await conn.execute(statement, params(agent, q, embedder))
            return await (cur.fetchall() if fetch_all else cur.fetchone())

    return Floor(name, call)
