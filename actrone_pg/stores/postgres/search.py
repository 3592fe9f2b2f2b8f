"""The PostgreSQL store's L2 search: ``hybrid_search()``, the SQL rendering of the pipeline."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from actrone_pg.errors import MissingDependencyError
from actrone_pg.models import Memory
from actrone_pg.pipeline import MemoryFilter, PackedSearch, SearchRequest
from actrone_pg.stores.base import check_query_dimensions
from actrone_pg.stores.postgres import rows
from actrone_pg.stores.postgres.connection import _Conn
from actrone_pg.stores.postgres.maintenance import Maintenance
from actrone_pg.stores.postgres.statements import (
    AGENT_SEARCH,
    FILTER_BROAD_DIVISOR,
    FILTER_CONDITIONS,
    FILTER_MOST_DIVISOR,
    FILTER_PROBE_SAMPLE,
    FILTERED,
    FILTERED_CANDIDATES,
    FILTERED_INPUTS,
    FILTERED_STATS,
    INDEXED_FILTER_KEYS,
    LIST_AFTER,
    LIST_MEMORIES,
    NO_CANDIDATES,
    PROPAGATE_SET_LOCAL,
    SEARCH,
    SEARCH_PACKED,
    UNFILTERED,
)

try:
    from psycopg import sql
    from psycopg.types.json import Jsonb
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("postgres", exc.name or "psycopg") from None

__all__ = ["Search"]


class Search(Maintenance):
    """Ranks in SQL exactly as :func:`actrone_pg.pipeline.search` ranks (the parity tests)."""

    async def search(self, request: SearchRequest) -> PackedSearch:
        """Run ``hybrid_search()`` for the agent: every ranked row, or only the rows that fit.

        Without a budget or a hit limit, ``SEARCH`` returns every ranked memory. Otherwise
        ``SEARCH_PACKED`` ranks without the memories' fields, chooses in SQL
        (``pack_positions``) and reads only the rows chosen, in one statement: the rows read are
        the ones ranked, in one snapshot, even while other sessions write.
        """
        if self.distributed:
            return await self._search_distributed(request)
        packed = request.budget is not None or request.max_hits is not None
        # The memories' fields come from the memories table (statements._MEMORY_ROW), so the
        # function never returns them.
        prepared = await self._search_params(request, content=False)
        if prepared is None:
            return PackedSearch(hits=[], ranked=0, tokens=0)
        statement = SEARCH_PACKED if packed else SEARCH
        params = prepared.params
        if packed:
            params = (*params, request.budget, request.max_hits, request.agent_id)
        else:
            params = (*params, request.agent_id)
        async with self._conn() as conn:
            # Binary results parse an order of magnitude faster than text (docs/benchmarks.md).
            found = await self._fetch(
                conn, self._search_sql(statement, prepared), params, binary=True
            )
        decode = rows.packed if packed else rows.searched
        return decode(request.agent_id, found)

    async def _search_params(self, request: SearchRequest, *, content: bool) -> _Prepared | None:
        """The statement's variable parts and its parameters, or ``None`` if the embedder stored
        nothing."""
        expected = await self._embedder_dimensions(request.embedder)
        if expected is None:
            return None
        check_query_dimensions(request.embedder, expected, request.vector)
        terms = await self._query_terms(request.query, request.terms)
        p = request.params
        flt = request.filter
        filtered: sql.Composable | None = None
        first: tuple[Any, ...] = ()
        if flt is None:
            ann = await self._ann_dimensions(request.agent_id, request.embedder, expected)
            candidates = self._candidates(request.agent_id, request.embedder, ann, request.limit)
            lifecycle: sql.Composable = NO_FILTER
            late: tuple[Any, ...] = (request.agent_id, request.now)
            early: tuple[Any, ...] = () if ann is None else (request.vector,)
        else:
            # A filtered set is ranked exactly, whatever the agent's size (no HNSW scan).
            where, values = _conditions(flt)
            filtered = sql.SQL(FILTERED).format(
                s=sql.Identifier(self.schema), vs=sql.Identifier(self._vector_schema), where=where
            )
            agent = request.agent_id
            cosine = (request.embedder, request.now, request.vector)
            # No index serves the filter: the one pass whatever the sample says.
            indexed = any(getattr(flt, key) is not None for key in INDEXED_FILTER_KEYS)
            first = (
                *(FILTER_MOST_DIVISOR, *values, agent, FILTER_PROBE_SAMPLE),
                *(indexed, FILTER_BROAD_DIVISOR),
                *(terms, *cosine, agent, *values),
                *(terms, *cosine, *values, agent),
                *(float(request.threshold), int(request.limit), agent, terms),
            )
            candidates, lifecycle = sql.SQL(FILTERED_CANDIDATES), sql.SQL(FILTERED_STATS)
            early = late = ()
        params: tuple[Any, ...] = (
            request.agent_id,
            request.embedder,
            terms,
            request.vector,
            float(request.threshold),
            int(request.limit),
            p.hybrid,
            int(p.rrf_k),
            [float(w) for w in p.rrf_weights],
            float(p.relevance_weight),
            float(p.recency_weight),
            request.now,
            content,
        )
        # The filter's CTEs come first; p_candidates' parameters come before k1 and b, the
        # lifecycle arguments' after them.
        return _Prepared(
            filtered,
            candidates,
            lifecycle,
            (*first, *params, *early, float(p.bm25_k1), float(p.bm25_b), *late),
        )

    async def _search_distributed(self, request: SearchRequest) -> PackedSearch:
        """The same search on a schema distributed with Citus: ``agent_search`` called alone.

        Citus delegates the call whole to the worker holding the agent's shards (one round trip
        from the coordinator, the ranking in one snapshot there). A filter's candidates and
        statistics, or a large agent's HNSW candidates, are found first by a router query
        (every table filtered by the agent: one worker too) and passed in.
        """
        expected = await self._embedder_dimensions(request.embedder)
        if expected is None:
            return PackedSearch(hits=[], ranked=0, tokens=0)
        check_query_dimensions(request.embedder, expected, request.vector)
        terms = await self._query_terms(request.query, request.terms)
        p = request.params
        agent = request.agent_id
        candidates: list[str] | None = None
        stats: tuple[Any, Any, Any] = (None, None, None)
        ann = None
        if request.filter is None:  # before taking a connection: it may take one itself
            ann = await self._ann_dimensions(agent, request.embedder, expected)
        async with self._conn() as conn:
            if request.filter is not None:
                where, values = _conditions(request.filter)
                statement = sql.SQL(FILTERED_INPUTS).format(
                    s=sql.Identifier(self.schema),
                    vs=sql.Identifier(self._vector_schema),
                    where=where,
                )
                indexed = any(
                    getattr(request.filter, key) is not None for key in INDEXED_FILTER_KEYS
                )
                cosine = (request.embedder, request.now, request.vector)
                found = await self._fetch(
                    conn,
                    statement,
                    (
                        *(FILTER_MOST_DIVISOR, *values, agent, FILTER_PROBE_SAMPLE),
                        *(indexed, FILTER_BROAD_DIVISOR),
                        *(terms, *cosine, agent, *values),
                        *(terms, *cosine, *values, agent),
                        *(float(request.threshold), int(request.limit), agent, terms),
                    ),
                )
                row = found[0]
                candidates = list(row["ids"] or [])
                stats = (row["n_docs"], row["total_length"], row["dfs"])
            elif ann is not None:
                candidates = await self._ann_candidates(conn, request, ann)
            found = await self._fetch(
                conn,
                self._compose(AGENT_SEARCH),
                (
                    agent,
                    request.embedder,
                    terms,
                    request.vector,
                    float(request.threshold),
                    int(request.limit),
                    p.hybrid,
                    int(p.rrf_k),
                    [float(w) for w in p.rrf_weights],
                    float(p.relevance_weight),
                    float(p.recency_weight),
                    request.now,
                    candidates,
                    float(p.bm25_k1),
                    float(p.bm25_b),
                    *stats,
                    request.budget,
                    request.max_hits,
                ),
                binary=True,
            )
        return rows.packed(agent, found)

    async def _ann_candidates(
        self, conn: _Conn, request: SearchRequest, dimensions: int
    ) -> list[str]:
        """A large agent's nearest ids from its HNSW index, on a distributed schema.

        The scan's settings reach the worker only as ``SET LOCAL`` with
        ``citus.propagate_set_commands = 'local'``, hence the transaction.
        """
        query = sql.SQL("SELECT {} AS ids").format(
            self._candidates(request.agent_id, request.embedder, dimensions, request.limit)
        )
        async with conn.transaction():
            await conn.execute(PROPAGATE_SET_LOCAL)
            await conn.execute(
                sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(self._ann_ef_search))
            )
            await conn.execute("SET LOCAL hnsw.iterative_scan = strict_order")
            found = await self._fetch(conn, query, (request.vector,))
        return list(found[0]["ids"] or [])

    async def list_memories(
        self,
        agent_id: str,
        *,
        now: datetime,
        limit: int,
        after: tuple[datetime, str] | None = None,
        filter: MemoryFilter | None = None,
    ) -> list[Memory]:
        """A keyset page of the agent's live memories, newest first, filtered in SQL."""
        where: sql.Composable = sql.SQL("TRUE")
        values: list[Any] = []
        if filter is not None:
            where, values = _conditions(filter)
        keyset: sql.Composable = sql.SQL("TRUE")
        bound: tuple[Any, ...] = ()
        if after is not None:
            keyset, bound = sql.SQL(LIST_AFTER), after
        statement = sql.SQL(LIST_MEMORIES).format(
            s=sql.Identifier(self.schema), after=keyset, where=where
        )
        async with self._conn() as conn:
            found = await self._fetch(conn, statement, (agent_id, now, *bound, *values, limit))
        return [rows.memory(agent_id, r) for r in found]

    def _search_sql(self, text: str, prepared: _Prepared) -> sql.Composed:
        schema = sql.Identifier(self.schema)
        candidates, lifecycle = prepared.candidates, prepared.lifecycle
        if prepared.filtered is not None:
            ctes = prepared.filtered
            with_ = sql.SQL("WITH {} ").format(ctes) if "{with}" in text else sql.SQL("")
            after = sql.SQL("{}, ").format(ctes) if "{filtered}" in text else sql.SQL("")
            return sql.SQL(text).format(
                s=schema,
                candidates=candidates,
                lifecycle=lifecycle,
                filtered=after,
                **{"with": with_},
            )
        if candidates is NO_CANDIDATES and lifecycle is NO_FILTER:  # composed once
            composed = self._sql.get(text)
            if composed is None:
                composed = sql.SQL(text).format(
                    s=schema,
                    candidates=candidates,
                    lifecycle=sql.SQL(UNFILTERED).format(s=schema),
                    **_NO_CTES,
                )
                self._sql[text] = composed
            return composed
        if lifecycle is NO_FILTER:
            lifecycle = sql.SQL(UNFILTERED).format(s=schema)
        return sql.SQL(text).format(
            s=schema, candidates=candidates, lifecycle=lifecycle, **_NO_CTES
        )


@dataclass(frozen=True, slots=True)
class _Prepared:
    """A search statement's variable parts, and its parameters in order."""

    filtered: sql.Composable | None  # FILTERED's CTEs, or None without a filter
    candidates: sql.Composable
    lifecycle: sql.Composable
    params: tuple[Any, ...]


# SEARCH's and SEARCH_PACKED's placeholders for a filter's CTEs, without one.
_NO_CTES = {"with": sql.SQL(""), "filtered": sql.SQL("")}
# Stands for UNFILTERED, composed with the schema where the statement is.
NO_FILTER = sql.SQL("")


def _conditions(flt: MemoryFilter) -> tuple[sql.Composable, list[Any]]:
    """The filter's conditions on ``m`` joined by AND, and their parameters in order."""
    parts: list[sql.Composable] = []
    values: list[Any] = []
    for key, condition in FILTER_CONDITIONS.items():
        value = getattr(flt, key)
        if value is None:
            continue
        parts.append(sql.SQL(condition))
        if isinstance(value, tuple):
            value = list(value)
        elif isinstance(value, dict):
            value = Jsonb(value)
        values.append(value)
    return sql.SQL(" AND ").join(parts), values
