"""The PostgreSQL store's composed statements, as pure builders: (statement, parameters), no I/O.

Each builder takes what the store knows (the schema, the query's terms) and returns the
statement to execute with its parameters by name: every value is bound once, whatever the
number of places it is used in. The store only executes what a builder returns;
``tests/stores/test_postgres_builders.py`` tests each one without a server. The statements'
text is in :mod:`.statements`; a filter's conditions come from each key's ``sql`` in
:mod:`actrone_pg.filters` for the listing, and from ``retrieve()`` itself (migration 0024) for
a search, which takes the filter as a JSON object (:func:`filter_json`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from actrone_pg.errors import MissingDependencyError, ValidationError
from actrone_pg.filters import FILTERS, MemoryFilter
from actrone_pg.pipeline import SearchRequest
from actrone_pg.ranking import RankingParams, full_weights
from actrone_pg.stores.postgres.statements import LIST_AFTER, LIST_MEMORIES, RETRIEVE

try:
    from psycopg import sql
    from psycopg.types.json import Jsonb
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("postgres", exc.name or "psycopg") from None

__all__ = [
    "RETRIEVE_KEYS",
    "Built",
    "array_literal",
    "filter_conditions",
    "filter_json",
    "list_memories",
    "retrieve",
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


def retrieve(
    request: SearchRequest,
    *,
    schema: str,
    terms: list[str],
    session: tuple[str, int, float] | None,
    ef_search: int,
) -> Built:
    """``retrieve()`` (migration 0024), every read's one statement: ``session``'s recent turns
    (its id, how many turns, its TTL in seconds; ``None``: no turns) and ``request``'s search,
    packed into its budget and hit limit (neither: every ranked memory). The function plans
    the search itself (filter, HNSW index with ``ef_search``, exact scan; Citus's shards)."""
    session_id, turn_limit, ttl = (None, None, None) if session is None else session
    flt = request.filter
    return _retrieve_text(schema), {
        "agent": request.agent_id,
        "session": session_id,
        "turn_limit": turn_limit,
        "session_ttl": ttl,
        **_ranking(request, terms),
        "budget": request.budget,
        "max_hits": request.max_hits,
        "filters": None if flt is None else Jsonb(filter_json(flt)),
        "ef_search": int(ef_search),
    }


#: The filter keys ``retrieve()`` names itself (migration 0024; spec §9.3): sent by name. A key
#: registered besides them travels as a condition (:func:`filter_json`).
RETRIEVE_KEYS = frozenset(
    (
        "tags_any",
        "tags_all",
        "content_types",
        "session_id",
        "created_after",
        "created_before",
        "min_importance",
        "metadata",
    )
)
# A registered key's FilterKey.sql, "m.<column> <operator> {value}[::<type>]" or
# "m.<column> = ANY ({value}::<type>)", as retrieve() rebuilds it from a condition.
_CONDITION = re.compile(
    r"^m\.(?P<column>\w+) (?:(?P<op>=|<|<=|>|>=|&&|@>) \{value\}(?:::(?P<type>[\w\[\]]+))?"
    r"|= ANY \(\{value\}(?:::(?P<any_type>[\w\[\]]+))?\))$"
)
_JSON_TYPES = {str: "text", bool: "boolean", int: "bigint", float: "float8", dict: "jsonb"}


def filter_json(flt: MemoryFilter) -> dict[str, Any]:
    """``flt`` as the JSON object ``retrieve()`` takes: each key's value (arrays as lists,
    timestamps in ISO 8601 with their offset), and a key registered besides
    :data:`RETRIEVE_KEYS` as one of ``conditions``: its column, operator, type and value, read
    from its ``sql``."""
    out: dict[str, Any] = {}
    for key, given in flt:
        value = given
        if isinstance(value, tuple):
            value = list(value)
        elif isinstance(value, datetime):
            value = value.isoformat()
        if key.name in RETRIEVE_KEYS:
            out[key.name] = value
            continue
        found = _CONDITION.match(key.sql)
        if found is None:
            raise ValidationError(
                f"filter key {key.name!r}: its sql {key.sql!r} is not a condition retrieve() "
                "can rebuild (m.<column> <operator> {value}[::<type>])"
            )
        kind = found["type"] or found["any_type"]
        if kind is None and isinstance(given, datetime):
            kind = "timestamptz"
        elif kind is None:
            kind = "text[]" if isinstance(value, list) else _JSON_TYPES.get(type(value), "text")
        out.setdefault("conditions", []).append(
            {
                "column": found["column"],
                "op": found["op"] or "= ANY",
                "type": kind,
                "value": value,
                "indexed": key.sql_indexed,
            }
        )
    return out


def _ranking(request: SearchRequest, terms: list[str]) -> dict[str, Any]:
    """The ranking's parameters by name, as ``retrieve()`` takes them."""
    global _made
    made = _made
    if made is None or made[0] is not request.params:
        made = _made = (request.params, _ranking_params(request.params))
    return {
        "embedder": request.embedder,
        "terms": array_literal(terms),
        "vector": request.vector,
        "threshold": float(request.threshold),
        "limit": int(request.limit),
        "now": request.now,
        **made[1],
    }


#: The last :class:`RankingParams` given and its parameters: a manager passes the same object on
#: every call, so they are made once (their array literal included) and copied into each call's
#: parameters. Recognised by identity: a frozen dataclass's hash is Python code, run per call.
_made: tuple[RankingParams, dict[str, Any]] | None = None


def _ranking_params(p: RankingParams) -> dict[str, Any]:
    """The parameters of ``p`` that every search of a manager shares."""
    return {
        "hybrid": p.hybrid,
        "rrf_k": int(p.rrf_k),
        "rrf_weights": array_literal([float(w) for w in full_weights(p.rrf_weights)]),
        "relevance_weight": float(p.relevance_weight),
        "recency_weight": float(p.recency_weight),
        "bm25_k1": float(p.bm25_k1),
        "bm25_b": float(p.bm25_b),
    }


def array_literal(values: Sequence[str | float]) -> str:
    """``values`` as PostgreSQL's text form of an array, every element quoted (a string with
    ``"`` or ``\\`` escaped, a float as its shortest exact ``repr``), for a parameter the statement
    casts (``%(terms)s::text[]``).

    psycopg adapts a list in Python on every call (it scans the list for its elements' type):
    the largest part of ``retrieve()``'s parameter adaptation, which this string skips
    (docs/benchmarks.md, "The client's CPU per call")."""
    return "{" + ",".join(['"' + _escape(str(v)) + '"' for v in values]) + "}"


def _escape(text: str) -> str:
    if "\\" in text or '"' in text:
        return text.replace("\\", "\\\\").replace('"', '\\"')
    return text


@functools.lru_cache(maxsize=64)
def _retrieve_text(schema: str) -> sql.Composed:
    return sql.SQL(RETRIEVE).format(s=sql.Identifier(schema))
