"""The PostgreSQL store's rows as records: one decoder per statement, every column read by name,
and the one encoder of JSON values (:func:`jsonb`).

Statements that return memories are read with psycopg's ``dict_row``; their column names are
those of :mod:`~actrone_pg.stores.postgres.statements`, derived from the fields of
:class:`~actrone_pg.models.Memory`.
"""

from __future__ import annotations

import functools
import json
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from actrone_pg.models import (
    MEMORY_FIELD_TYPES,
    STORED_MEMORY_FIELDS,
    Memory,
    ScoredMemory,
    SessionInfo,
    Turn,
)
from actrone_pg.pipeline import PackedSearch, explains
from actrone_pg.ranking import CHANNELS

if TYPE_CHECKING:
    from psycopg.types.json import Jsonb

__all__ = [
    "jsonb",
    "Removed",
    "dimensions",
    "lexemes",
    "memory",
    "removed",
    "retrieved",
    "session",
    "turns",
]

Row = Mapping[str, Any]


def turns(agent_id: str, session_id: str, rows: Sequence[Row]) -> list[Turn]:
    """``SELECT_RECENT_TURNS``' rows (newest first) as turns, oldest first."""
    return [
        Turn(
            id=r["id"],
            agent_id=agent_id,
            session_id=session_id,
            user_message=r["user_message"],
            assistant_message=r["assistant_message"],
            tool_results=r["tool_results"],
            created_at=r["created_at"].astimezone(UTC),
            token_count=r["token_count"],
        )
        for r in reversed(rows)
    ]


def session(agent_id: str, session_id: str, r: Row) -> SessionInfo:
    """``SELECT_SESSION``'s row."""
    return SessionInfo(
        agent_id=agent_id,
        session_id=session_id,
        turn_count=int(r["turn_count"]),
        created_at=r["created_at"].astimezone(UTC),
        last_active_at=r["last_active_at"].astimezone(UTC),
        metadata=dict(r["metadata"]),
    )


def memory(agent_id: str, r: Row) -> Memory:
    """A memory from a row holding every column of ``MEMORY_COLUMNS`` (``SELECT_MEMORY``,
    ``RETRIEVE``'s memories): each field as :data:`_DECODE` reads it, in :class:`Memory`'s order,
    passed by position (keyword arguments and a generic coercion of every field cost several
    times more per memory: docs/benchmarks.md, "Where one call's time goes")."""
    values: list[Any] = [agent_id if read is None else read(r[name]) for name, read in _DECODE]
    return Memory(*values)


def _field(name: str) -> Callable[[Any], Any] | None:
    """How a column of ``name`` becomes its field: an array a tuple, a timestamp in UTC, the
    metadata (text or jsonb) a dict; the other columns already are of the field's type in a
    binary or text result (text, float8, int4). ``None`` for ``agent_id``, which the query names."""
    kind = MEMORY_FIELD_TYPES.get(name)
    if name == "agent_id":
        return None
    if name == "metadata":
        return _metadata
    if kind == "tuple[str, ...]":
        return tuple
    if kind == "datetime":
        return _utc
    if kind == "datetime | None":
        return _utc_or_none
    return _same


def _same(value: Any) -> Any:
    return value


def _utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


def _utc_or_none(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(UTC)


def retrieved(
    agent_id: str, session_id: str | None, columns: Sequence[str], found: Sequence[Sequence[Any]]
) -> tuple[list[Turn], PackedSearch]:
    """``RETRIEVE``'s rows, given as tuples with their column names: the session's turns (kind
    ``turn``, newest first; returned oldest first; none without ``session_id``) and the search
    packed from the other rows (the candidates considered on each, the chosen memories where
    ``id`` is set).

    Each column is found by its name once per column list (:func:`_retrieve_layout`), then read
    by position: a dict per row and a function per field were most of the client's CPU of a
    ``retrieve_context`` (docs/benchmarks.md, "The client's CPU per call")."""
    at = _retrieve_layout(tuple(columns))
    kind = at.kind
    if session_id is None:
        ranked = found
        turn_rows: Sequence[Sequence[Any]] = ()
    else:
        ranked = [r for r in found if r[kind] != "turn"]
        turn_rows = [r for r in found if r[kind] == "turn"]
    key = at.id
    chosen = [r for r in ranked if r[key] is not None]
    memories = at.memories(agent_id, chosen)
    ranks = at.ranks
    explained = explains(
        cosine=[float(r[at.cosine]) for r in chosen],
        bm25=[None if r[at.bm25] is None else float(r[at.bm25]) for r in chosen],
        # ranks: an array in the order of CHANNELS (migration 0019).
        ranks={c.name: [r[ranks][i] for r in chosen] for i, c in enumerate(CHANNELS)},
        fused_score=[float(r[at.fused_score]) for r in chosen],
    )
    packed = PackedSearch(
        hits=[ScoredMemory(m, e) for m, e in zip(memories, explained, strict=True)],
        candidates_considered=ranked[0][at.candidates_considered],
        tokens=sum(m.token_count for m in memories),
    )
    if session_id is None:
        return [], packed
    return at.turns(agent_id, session_id, turn_rows), packed


@dataclass(frozen=True, slots=True)
class _RetrieveLayout:
    """Where each of ``RETRIEVE``'s columns is in its rows, and how a row becomes a record."""

    kind: int
    candidates_considered: int
    cosine: int
    bm25: int
    ranks: int
    fused_score: int
    id: int
    #: A memory's stored fields but ``agent_id`` (the caller's), in :class:`Memory`'s order.
    memory_values: Callable[[Sequence[Any]], tuple[Any, ...]]
    #: (position in :class:`Memory`'s order, reader) of each field read by a function.
    memory_reads: tuple[tuple[int, Callable[[Any], Any]], ...]
    #: A turn's fields but ``agent_id`` and ``session_id`` (the caller's), in :class:`Turn`'s order.
    turn_values: Callable[[Sequence[Any]], tuple[Any, ...]]

    def memories(self, agent_id: str, chosen: Sequence[Sequence[Any]]) -> list[Memory]:
        """The memories of ``chosen``'s rows (each with an ``id``), in order."""
        out = []
        for r in chosen:
            values = list(self.memory_values(r))
            values.insert(1, agent_id)
            for i, read in self.memory_reads:
                values[i] = read(values[i])
            out.append(Memory(*values))
        return out

    def turns(self, agent_id: str, session_id: str, found: Sequence[Sequence[Any]]) -> list[Turn]:
        """The turns of ``found``'s rows (newest first), oldest first."""
        out = []
        for r in reversed(found):
            values = list(self.turn_values(r))
            values[1:1] = agent_id, session_id
            values[_TURN_CREATED_AT] = values[_TURN_CREATED_AT].astimezone(UTC)
            out.append(Turn(*values))
        return out


@functools.lru_cache(maxsize=16)
def _retrieve_layout(columns: tuple[str, ...]) -> _RetrieveLayout:
    at = {name: i for i, name in enumerate(columns)}
    return _RetrieveLayout(
        kind=at["kind"],
        candidates_considered=at["candidates_considered"],
        cosine=at["cosine"],
        bm25=at["bm25"],
        ranks=at["ranks"],
        fused_score=at["fused_score"],
        id=at["id"],
        memory_values=operator.itemgetter(
            *[at[name] for name in STORED_MEMORY_FIELDS if name != "agent_id"]
        ),
        memory_reads=tuple(
            (i, read)
            for i, name in enumerate(STORED_MEMORY_FIELDS)
            if (read := _field(name)) is not None and read is not _same
        ),
        turn_values=operator.itemgetter(
            *[at[name] for name in _TURN_FIELDS if name not in ("agent_id", "session_id")]
        ),
    )


_TURN_FIELDS = tuple(f.name for f in fields(Turn))
_TURN_CREATED_AT = _TURN_FIELDS.index("created_at")
# Where the caller's values go in (see _RetrieveLayout.memories and .turns).
assert STORED_MEMORY_FIELDS[1] == "agent_id" and _TURN_FIELDS[1:3] == ("agent_id", "session_id")


@dataclass(frozen=True, slots=True)
class Removed:
    """What a deleted memory took out of the BM25 statistics."""

    length: int
    terms: list[str]


def removed(rows: Sequence[Row]) -> list[Removed]:
    """``DELETE_MEMORIES``' rows: each deleted memory's length and distinct terms."""
    return [Removed(length=int(r["doc_len"]), terms=list(r["terms"])) for r in rows]


def dimensions(rows: Sequence[Row]) -> dict[str, int]:
    """``SELECT_EMBEDDERS``' rows: each embedder's dimension."""
    return {str(r["name"]): int(r["dimensions"]) for r in rows}


def lexemes(rows: Sequence[Row]) -> dict[str, str | None]:
    """``NORMALISE``'s rows: each token's lexeme (``None`` for a stop word)."""
    return {str(r["token"]): r["lexeme"] for r in rows}


def _metadata(value: Any) -> dict[str, Any]:
    # Search reads metadata as text: most memories have none, and skipping the JSON decoder for
    # '{}' is measurable per 500-row search (docs/notes/benchmarks.md, "Measurements behind the
    # code").
    if isinstance(value, str):
        return {} if value == "{}" else dict(json.loads(value))
    return dict(value)


#: Each stored field of a memory, in :class:`Memory`'s order, and how its column is read.
_DECODE = tuple((name, _field(name)) for name in STORED_MEMORY_FIELDS)
assert tuple(f.name for f in fields(Memory))[: len(_DECODE)] == STORED_MEMORY_FIELDS


def jsonb(value: Any) -> Jsonb:
    """``value`` for a jsonb column, written so that every float reads back as the same float.

    jsonb keeps numbers as ``numeric``, which prints ``1.152921504606847e+18`` (the shortest
    repr of 2.0**60, as json.dumps writes it) as ``1152921504606847000``: read back, that is an
    int, and another number. Floats of 1e16 and more (the ones whose repr has an exponent) are
    therefore written as their exact decimal value with ``.0``, which numeric keeps as it is and
    which parses back to the same float. Smaller floats already keep their decimal point.
    """
    from psycopg.types.json import Jsonb  # the postgres extra, checked by the store's import

    return Jsonb(value, dumps=_dumps_exact)


def _dumps_exact(value: Any) -> str:
    text = json.dumps(value)
    if "e+" not in text and "E+" not in text:
        return text  # no float of 1e16 or more (nor a string with "e+": that costs a rewrite)
    return _encode(value)


def _encode(value: Any) -> str:
    if isinstance(value, float) and math.isfinite(value) and abs(value) >= 1e16:
        return f"{int(value)}.0"  # a float this large is a whole number: int() is exact
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(str(k))}:{_encode(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_encode(v) for v in value) + "]"
    return json.dumps(value)
