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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, make_dataclass
from datetime import UTC, datetime
from itertools import repeat
from typing import TYPE_CHECKING, Any

from actrone_pg.models import (
    MEMORY_FIELD_TYPES,
    STORED_MEMORY_FIELDS,
    Explain,
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
    agent_id: str,
    session_id: str | None,
    columns: Sequence[str],
    found: Sequence[Sequence[Any]],
    *,
    explain: bool = True,
) -> tuple[list[Turn], PackedSearch]:
    """``RETRIEVE``'s rows, given as tuples with their column names: the session's turns (kind
    ``turn``, newest first; returned oldest first; none without ``session_id``) and the search
    packed from the other rows (the candidates considered on each, the chosen memories where
    ``id`` is set), each hit with its explanation (``None`` without ``explain``:
    :attr:`~actrone_pg.pipeline.SearchRequest.explain`).

    Each column is found by its name once per column list (:func:`_retrieve_layout`); the rows
    are then read column by column, a field that needs converting converted by one pass over its
    column, and the records made by :class:`_Records` (docs/benchmarks.md, "The client's CPU
    per call")."""
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
    memories: list[Memory] = []
    hits: list[ScoredMemory] = []
    if chosen:
        by_column = list(zip(*chosen, strict=True))
        memories = at.memories(agent_id, by_column)
        explained = at.explains(by_column) if explain else repeat(None)
        hits = list(map(ScoredMemory, memories, explained))
    packed = PackedSearch(
        hits=hits,
        candidates_considered=ranked[0][at.candidates_considered],
        tokens=sum([m.token_count for m in memories]),
    )
    if session_id is None:
        return [], packed
    return at.turns(agent_id, session_id, turn_rows), packed


class _Records:
    """Records of a frozen, slotted dataclass made from values that already are its fields'
    (a store's decoded rows), at a fraction of its constructor's cost.

    A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``; most of a
    ``retrieve_context``'s decoding was these calls (docs/benchmarks.md, "The client's CPU per
    call"). The values are set instead by the plain ``__init__`` of a twin that is not frozen,
    made from the same fields in the same order (so the same slots), and each record then
    becomes an instance of ``cls`` by assigning its ``__class__``, which Python allows between
    classes of the same layout. The result is an instance of ``cls`` whose fields hold the
    values given, as ``cls(*values)`` would make it: the records have no ``__post_init__`` to
    skip, which :meth:`__init__` checks, and ``tests/stores/test_postgres_rows.py`` compares the
    two."""

    def __init__(self, cls: type[Any]) -> None:
        if not getattr(cls, "__dataclass_params__", None) or hasattr(cls, "__post_init__"):
            raise TypeError(f"{cls.__name__} is not a dataclass without __post_init__")
        self.cls = cls
        self.twin = make_dataclass(
            f"_{cls.__name__}Values", [(f.name, f.type) for f in fields(cls)], slots=True
        )
        # Fails here, at import, if the layouts ever differ (the assignment raises TypeError).
        probe = self.twin(*[None] * len(fields(cls)))
        probe.__class__ = cls

    def __call__(self, *columns: Iterable[Any]) -> list[Any]:
        """One record per row of ``columns``, each holding one value per field in field
        order."""
        made = list(map(self.twin, *columns))
        cls = self.cls
        for record in made:
            record.__class__ = cls
        return made


_MEMORIES = _Records(Memory)
_TURNS = _Records(Turn)


@dataclass(frozen=True, slots=True)
class _RetrieveLayout:
    """Where each of ``RETRIEVE``'s columns is in its rows, and how its columns become
    records."""

    kind: int
    candidates_considered: int
    cosine: int
    bm25: int
    ranks: int
    fused_score: int
    id: int
    #: Each of :class:`Memory`'s fields in order: its column and how that column becomes the
    #: field's values (``None``: as it is), or ``None`` for ``agent_id`` (the caller's) and
    #: ``explain`` (a search's, attached beside the memory).
    memory_columns: tuple[tuple[int, Callable[[Sequence[Any]], Iterable[Any]] | None] | None, ...]
    #: Each of :class:`Turn`'s fields in order: its column, or ``None`` for ``agent_id`` and
    #: ``session_id`` (the caller's).
    turn_columns: tuple[int | None, ...]
    #: A turn's ``created_at``: its position in :class:`Turn`'s fields, and its column.
    turn_created_at: tuple[int, int]

    def memories(self, agent_id: str, by_column: Sequence[Sequence[Any]]) -> list[Memory]:
        """The memories of the chosen rows (each with an ``id``), given column by column, in
        order."""
        n = len(by_column[self.id])
        given: list[Iterable[Any]] = []
        for column in self.memory_columns:
            if column is None:
                given.append(repeat(None, n))
                continue
            at, read = column
            given.append(by_column[at] if read is None else read(by_column[at]))
        given[1] = repeat(agent_id, n)
        return _MEMORIES(*given)

    def explains(self, by_column: Sequence[Sequence[Any]]) -> list[Explain]:
        """The explanations of the chosen rows, given column by column, in order."""
        return explains(
            cosine=list(map(float, by_column[self.cosine])),
            bm25=[None if b is None else float(b) for b in by_column[self.bm25]],
            # ranks: an array in the order of CHANNELS (migration 0019).
            ranks=dict(
                zip(
                    [c.name for c in CHANNELS],
                    zip(*by_column[self.ranks], strict=True),
                    strict=True,
                )
            ),
            fused_score=list(map(float, by_column[self.fused_score])),
        )

    def turns(self, agent_id: str, session_id: str, found: Sequence[Sequence[Any]]) -> list[Turn]:
        """The turns of ``found``'s rows (newest first), oldest first."""
        if not found:
            return []
        by_column = list(zip(*reversed(found), strict=True))
        n = len(found)
        given: list[Iterable[Any]] = [
            repeat(None, n) if at is None else by_column[at] for at in self.turn_columns
        ]
        given[1] = repeat(agent_id, n)
        given[2] = repeat(session_id, n)
        field, column = self.turn_created_at
        given[field] = _in_utc(by_column[column])
        return _TURNS(*given)


@functools.lru_cache(maxsize=16)
def _retrieve_layout(columns: tuple[str, ...]) -> _RetrieveLayout:
    at = {name: i for i, name in enumerate(columns)}
    memory_fields = tuple(f.name for f in fields(Memory))
    return _RetrieveLayout(
        kind=at["kind"],
        candidates_considered=at["candidates_considered"],
        cosine=at["cosine"],
        bm25=at["bm25"],
        ranks=at["ranks"],
        fused_score=at["fused_score"],
        id=at["id"],
        memory_columns=tuple(
            None if name in ("agent_id", "explain") else (at[name], _column(name))
            for name in memory_fields
        ),
        turn_columns=tuple(
            None if name in ("agent_id", "session_id") else at[name] for name in _TURN_FIELDS
        ),
        turn_created_at=(_TURN_FIELDS.index("created_at"), at["created_at"]),
    )


def _column(name: str) -> Callable[[Sequence[Any]], Iterable[Any]] | None:
    """How a column of ``name`` becomes its field's values, as :func:`_field` reads one value
    (``None``: as it is)."""
    read = _field(name)
    return None if read is None or read is _same else _COLUMN_READS[read]


def _tuple_column(column: Sequence[Any]) -> Iterable[Any]:
    return map(tuple, column)


def _metadata_column(column: Sequence[Any]) -> Iterable[Any]:
    return list(map(_metadata, column))


def _in_utc(column: Sequence[datetime | None]) -> Sequence[datetime | None]:
    """A column of timestamps (or ``None``) in UTC. The store's connections set their time zone
    to UTC, so psycopg already returns them in UTC and ``astimezone`` would return each as it
    is: the column is then taken whole."""
    for v in column:
        if v is not None and v.tzinfo is not UTC:
            return list(map(_utc_or_none, column))
    return column


_TURN_FIELDS = tuple(f.name for f in fields(Turn))
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

#: Each of :func:`_field`'s readers but :func:`_same` as a reader of a whole column.
_COLUMN_READS: dict[Callable[[Any], Any], Callable[[Sequence[Any]], Iterable[Any]]] = {
    tuple: _tuple_column,
    _metadata: _metadata_column,
    _utc: _in_utc,
    _utc_or_none: _in_utc,
}


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
