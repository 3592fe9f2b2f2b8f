"""The PostgreSQL store's composed statements, as pure builders: (statement, parameters), no I/O.

Each builder takes what the store has already looked up (the schema, pgvector's schema, the
query's terms, whether the agent has an HNSW index) and returns the statement to execute with
its parameters by name: every value is bound once, whatever the number of places it is used in.
The store only executes what a builder returns; ``tests/stores/test_postgres_builders.py`` tests
each one without a server. The statements' text is in :mod:`.statements` and
``actrone_pg/sql/filtered_search.sql``; a filter's conditions come from each key's ``sql`` in
:mod:`actrone_pg.filters`.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from actrone_pg.errors import MissingDependencyError
from actrone_pg.filters import FILTERS, MemoryFilter
from actrone_pg.pipeline import SearchRequest
from actrone_pg.ranking import full_weights
from actrone_pg.stores.postgres.statements import (
    AGENT_RETRIEVE,
    ANN_CANDIDATES,
    ANN_IDS,
    ANN_OVERFETCH,
    FILTER_BROAD_DIVISOR,
    FILTER_MOST_DIVISOR,
    FILTER_PROBE_SAMPLE,
    FILTERED,
    FILTERED_CANDIDATES,
    FILTERED_INPUTS,
    FILTERED_STATS,
    LIST_AFTER,
    LIST_MEMORIES,
    RETRIEVE,
    SEARCH,
    SEARCH_PACKED,
    UNFILTERED,
)

try:
    from psycopg import sql
    from psycopg.types.json import Jsonb
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("postgres", exc.name or "psycopg") from None

__all__ = [
    "Built",
    "agent_retrieve",
    "ann_ids",
    "filter_conditions",
    "filtered_inputs",
    "list_memories",
    "retrieve",
    "search",
    "served_by_an_index",
]

#: A statement and its parameters by name, as ``cursor.execute`` takes them.
Built = tuple[sql.Composed, dict[str, Any]]


def filter_conditions(flt: MemoryFilter) -> tuple[sql.Composable, dict[str, Any]]:
    """``flt``'s conditions on a memories row ``m``, joined by AND, and their parameters: each
    key's value bound once as ``f_<key>`` (a tuple as an array, a JSON object as jsonb)."""
    params: dict[str, Any] = {}
    for key, value in flt:
        if isinstance(value, tuple):
            value = list(value)
        elif isinstance(value, dict):
            value = Jsonb(value)
        params["f_" + key.name] = value
    return _where(tuple(key.name for key, _ in flt)), params


def _where(keys: tuple[str, ...]) -> sql.Composable:
    """The conditions of ``keys``, each with its named parameter (TRUE for none)."""
    if not keys:
        return sql.SQL("TRUE")
    return sql.SQL(" AND ").join(
        sql.SQL(FILTERS[k].sql).format(value=sql.Placeholder("f_" + k)) for k in keys
    )


def served_by_an_index(flt: MemoryFilter) -> bool:
    """Whether an index serves one of ``flt``'s conditions; without any, a filtered search
    always reads the agent's rows in one pass (its selective path would read every row too)."""
    return any(key.sql_indexed for key, _ in flt)


def list_memories(
    schema: str,
    agent_id: str,
    *,
    now: Any,
    limit: int,
    after: tuple[Any, str] | None,
    flt: MemoryFilter | None,
) -> Built:
    """A keyset page of ``list_memories``: the agent's live memories newest first, filtered."""
    where, params = filter_conditions(flt) if flt is not None else (sql.SQL("TRUE"), {})
    keyset: sql.Composable = sql.SQL("TRUE")
    if after is not None:
        keyset = sql.SQL(LIST_AFTER)
        params.update(after_created_at=after[0], after_id=after[1])
    statement = sql.SQL(LIST_MEMORIES).format(s=sql.Identifier(schema), after=keyset, where=where)
    return statement, {"agent": agent_id, "now": now, "limit": limit, **params}


def search(
    request: SearchRequest,
    *,
    schema: str,
    vector_schema: str,
    terms: list[str],
    ann_dimensions: int | None,
    content: bool = False,
) -> Built:
    """The one statement of a search: ``SEARCH_PACKED`` with a budget or a hit limit (ranked,
    packed in SQL, then the chosen rows), else ``SEARCH`` (every ranked row).

    Without a filter the candidates are the agent's exact scan, or with ``ann_dimensions`` (the
    agent has its own HNSW index) that index's nearest ids; with one, the filtered set of
    ``filtered_search.sql``, ranked exactly whatever the agent's size. ``terms`` are the query's
    terms as the store indexes them.
    """
    packed = request.budget is not None or request.max_hits is not None
    params = {"agent": request.agent_id, **_ranking(request, terms), "content": content}
    if packed:
        params.update(budget=request.budget, max_hits=request.max_hits)
    flt = request.filter
    if flt is not None:
        params.update(_filter_params(flt))
        keys = tuple(key.name for key, _ in flt)
        return _filtered_text(schema, vector_schema, packed, keys), params
    if ann_dimensions is not None:
        params["ann_limit"] = _ann_limit(request)
    return _unfiltered_text(schema, vector_schema, packed, ann_dimensions), params


# -- a schema distributed with Citus (docs/scale-out.md): agent_retrieve called alone --


def agent_retrieve(
    request: SearchRequest,
    *,
    schema: str,
    terms: list[str],
    session: tuple[str, int, float] | None,
    candidates: list[str] | None = None,
    stats: tuple[Any, Any, Any] | None = None,
) -> Built:
    """``agent_retrieve()`` (migrations 0014, 0017), called alone so that Citus delegates it to the
    agent's worker: :func:`retrieve`'s statement for any search, over ``candidates`` (``None``:
    the agent's exact scan) with ``stats``, a filtered set's ``(n_docs, total_length,
    doc_freqs)`` (``None``: the agent's own). Without a budget and a hit limit, every ranked
    memory comes back."""
    n_docs, total_length, doc_freqs = (None, None, None) if stats is None else stats
    _, params = retrieve(request, schema=schema, terms=terms, session=session)
    params.update(
        candidates=candidates, n_docs=n_docs, total_length=total_length, doc_freqs=doc_freqs
    )
    return _agent_retrieve_text(schema), params


def filtered_inputs(
    request: SearchRequest, *, schema: str, vector_schema: str, terms: list[str]
) -> Built:
    """The filtered set's candidates (``ids``) and statistics (``n_docs``, ``total_length``,
    ``dfs``) for :func:`agent_retrieve`: ``filtered_search.sql``'s CTEs alone, every table read
    by the agent, a router query Citus sends to the agent's worker."""
    flt = request.filter
    assert flt is not None, "filtered_inputs needs a filtered request"
    keys = tuple(key.name for key, _ in flt)
    ranking = _ranking(request, terms)
    # The CTEs' own arguments only (the ranking's weights are agent_retrieve's).
    used = ("embedder", "terms", "vector", "threshold", "limit", "now")
    params = {"agent": request.agent_id, **{k: ranking[k] for k in used}, **_filter_params(flt)}
    return _filtered_inputs_text(schema, vector_schema, keys), params


def ann_ids(request: SearchRequest, *, schema: str, vector_schema: str, dimensions: int) -> Built:
    """The nearest ids of an agent's own HNSW index (``ids``) for :func:`agent_retrieve`, as
    :func:`search`'s ``ANN_CANDIDATES`` finds them, alone: a router query."""
    statement = sql.SQL(ANN_IDS).format(
        candidates=_ann_candidates(schema, vector_schema, int(dimensions))
    )
    return statement, {
        "agent": request.agent_id,
        "embedder": request.embedder,
        "vector": request.vector,
        "ann_limit": _ann_limit(request),
    }


def _filter_params(flt: MemoryFilter) -> dict[str, Any]:
    """A filter's values and the filtered CTEs' fixed settings, by name."""
    return {
        **filter_conditions(flt)[1],
        "sample": FILTER_PROBE_SAMPLE,
        "indexed": served_by_an_index(flt),
        "broad_divisor": FILTER_BROAD_DIVISOR,
        "most_divisor": FILTER_MOST_DIVISOR,
    }


def _ann_limit(request: SearchRequest) -> int:
    return math.ceil(request.limit * ANN_OVERFETCH)


def retrieve(
    request: SearchRequest,
    *,
    schema: str,
    terms: list[str],
    session: tuple[str, int, float] | None,
) -> Built:
    """``retrieve()`` (migration 0015): ``session``'s recent turns (its id, how many turns, its
    TTL in seconds; ``None``: no turns) and ``request``'s packed search, in one statement.

    For an unfiltered search of an agent scanned exactly, with a budget or a hit limit; the
    store sends :func:`search`'s statement otherwise.
    """
    session_id, turn_limit, ttl = (None, None, None) if session is None else session
    return _retrieve_text(schema), {
        "agent": request.agent_id,
        "session": session_id,
        "turn_limit": turn_limit,
        "session_ttl": ttl,
        **_ranking(request, terms),
        "budget": request.budget,
        "max_hits": request.max_hits,
    }


def _ranking(request: SearchRequest, terms: list[str]) -> dict[str, Any]:
    """The ranking's parameters by name, shared by hybrid_search's and retrieve()'s calls."""
    p = request.params
    return {
        "embedder": request.embedder,
        "terms": terms,
        "vector": request.vector,
        "threshold": float(request.threshold),
        "limit": int(request.limit),
        "hybrid": p.hybrid,
        "rrf_k": int(p.rrf_k),
        "rrf_weights": [float(w) for w in full_weights(p.rrf_weights)],
        "relevance_weight": float(p.relevance_weight),
        "recency_weight": float(p.recency_weight),
        "now": request.now,
        "bm25_k1": float(p.bm25_k1),
        "bm25_b": float(p.bm25_b),
    }


@functools.lru_cache(maxsize=64)
def _retrieve_text(schema: str) -> sql.Composed:
    return sql.SQL(RETRIEVE).format(s=sql.Identifier(schema))


@functools.lru_cache(maxsize=64)
def _agent_retrieve_text(schema: str) -> sql.Composed:
    return sql.SQL(AGENT_RETRIEVE).format(s=sql.Identifier(schema))


def _ann_candidates(schema: str, vector_schema: str, dimensions: int) -> sql.Composed:
    return sql.SQL(ANN_CANDIDATES).format(
        s=sql.Identifier(schema), vs=sql.Identifier(vector_schema), d=sql.Literal(dimensions)
    )


def _filtered_ctes(schema: str, vector_schema: str, keys: tuple[str, ...]) -> sql.Composed:
    return sql.SQL(FILTERED).format(
        s=sql.Identifier(schema), vs=sql.Identifier(vector_schema), where=_where(keys)
    )


@functools.lru_cache(maxsize=256)
def _filtered_inputs_text(schema: str, vector_schema: str, keys: tuple[str, ...]) -> sql.Composed:
    return sql.SQL(FILTERED_INPUTS).format(ctes=_filtered_ctes(schema, vector_schema, keys))


# The composed text depends only on these arguments (values are parameters): composed once.
@functools.lru_cache(maxsize=64)
def _unfiltered_text(
    schema: str, vector_schema: str, packed: bool, ann_dimensions: int | None
) -> sql.Composed:
    s = sql.Identifier(schema)
    candidates: sql.Composable = sql.SQL("NULL::text[]")
    if ann_dimensions is not None:
        candidates = _ann_candidates(schema, vector_schema, int(ann_dimensions))
    return sql.SQL(SEARCH_PACKED if packed else SEARCH).format(
        s=s,
        candidates=candidates,
        lifecycle=sql.SQL(UNFILTERED).format(s=s),
        filtered=sql.SQL(""),
        **{"with": sql.SQL("")},
    )


@functools.lru_cache(maxsize=256)
def _filtered_text(
    schema: str, vector_schema: str, packed: bool, keys: tuple[str, ...]
) -> sql.Composed:
    s = sql.Identifier(schema)
    ctes = _filtered_ctes(schema, vector_schema, keys)
    return sql.SQL(SEARCH_PACKED if packed else SEARCH).format(
        s=s,
        candidates=sql.SQL(FILTERED_CANDIDATES),
        lifecycle=sql.SQL(FILTERED_STATS),
        filtered=sql.SQL("{}, ").format(ctes) if packed else sql.SQL(""),
        **{"with": sql.SQL("") if packed else sql.SQL("WITH {} ").format(ctes)},
    )
