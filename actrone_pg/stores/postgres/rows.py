"""The PostgreSQL store's rows as records: one decoder per statement, every column read by name,
and the one encoder of JSON values (:func:`jsonb`).

Statements that return memories are read with psycopg's ``dict_row``; their column names are
those of :mod:`~actrone_pg.stores.postgres.statements`, derived from the fields of
:class:`~actrone_pg.models.Memory`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC
from typing import TYPE_CHECKING, Any

from actrone_pg.models import Memory, ScoredMemory, SessionInfo, Turn, memory_from_fields
from actrone_pg.pipeline import PackedSearch, explains
from actrone_pg.ranking import CHANNELS

if TYPE_CHECKING:
    from psycopg.types.json import Jsonb

__all__ = [
    "jsonb",
    "Removed",
    "dimensions",
    "hits",
    "lexemes",
    "memory",
    "packed",
    "removed",
    "searched",
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
    """A memory from a row holding every column of ``MEMORY_COLUMNS`` (``SELECT_MEMORY``)."""
    return memory_from_fields(
        r,
        agent_id=agent_id,
        created_at=r["created_at"].astimezone(UTC),
        metadata=_metadata(r["metadata"]),
    )


def hits(agent_id: str, rows: Sequence[Row]) -> list[ScoredMemory]:
    """Ranked memories from rows of ``SEARCH`` or of ``SEARCH_PACKED`` (each with a memory)."""
    explained = explains(
        cosine=[float(r["cosine"]) for r in rows],
        bm25=[None if r["bm25"] is None else float(r["bm25"]) for r in rows],
        # ranks: an array in the order of CHANNELS (migration 0019).
        ranks={c.name: [r["ranks"][i] for r in rows] for i, c in enumerate(CHANNELS)},
        fused_score=[float(r["fused_score"]) for r in rows],
    )
    return [
        ScoredMemory(memory=memory(agent_id, r), explain=e)
        for r, e in zip(rows, explained, strict=True)
    ]


def searched(agent_id: str, rows: Sequence[Row]) -> PackedSearch:
    """``SEARCH``'s rows: every ranked memory, best first."""
    found = hits(agent_id, rows)
    return PackedSearch(hits=found, candidates_considered=len(found), tokens=_tokens(found))


def packed(agent_id: str, rows: Sequence[Row]) -> PackedSearch:
    """``SEARCH_PACKED``'s rows: the candidates considered on each, and the chosen memories (if
    any)."""
    found = hits(agent_id, [r for r in rows if r["id"] is not None])
    return PackedSearch(
        hits=found, candidates_considered=rows[0]["candidates_considered"], tokens=_tokens(found)
    )


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


def _tokens(found: Sequence[ScoredMemory]) -> int:
    return sum(h.memory.token_count for h in found)


def _metadata(value: Any) -> dict[str, Any]:
    # Search reads metadata as text: most memories have none, and skipping the JSON decoder for
    # '{}' is measurable per 500-row search (docs/benchmarks.md, "Measurements behind the code").
    if isinstance(value, str):
        return {} if value == "{}" else dict(json.loads(value))
    return dict(value)


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
