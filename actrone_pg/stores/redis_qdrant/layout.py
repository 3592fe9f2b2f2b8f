"""How the Redis + Qdrant store lays its data out: Redis keys, Qdrant point ids and payloads.

Every encoder here has its decoder beside it; the payload of a memory derives from
:data:`actrone_pg.models.STORED_MEMORY_FIELDS`.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, unquote

import numpy as np
import numpy.typing as npt

from actrone_pg.errors import MissingDependencyError
from actrone_pg.filters import FieldMatch, MemoryFilter
from actrone_pg.models import (
    DATETIME_FIELDS,
    STORED_MEMORY_FIELDS,
    Memory,
    Turn,
    memory_from_fields,
)
from actrone_pg.ranking import Analyzer, micros

try:
    from qdrant_client import models as qm
except ImportError:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("qdrant", "qdrant-client") from None

__all__ = [
    "HISTORY",
    "LAYOUT",
    "SEARCH_PAYLOAD",
    "TURN_IDS_KEPT",
    "AgentKeys",
    "PayloadColumns",
    "agent_filter",
    "live_filter",
    "doc_entry",
    "dec",
    "enc",
    "from_payload",
    "micros_to_dt",
    "payload_columns",
    "point_id",
    "to_payload",
    "ttl_ms",
    "turn_from_json",
    "turn_to_json",
]

# Point ids are uuid5(namespace, agent_id NUL memory_id): deterministic, so a retried write
# overwrites the same point, and tenant-scoped, so agent B passing agent A's memory id addresses
# a different point. Ids cannot contain NUL (the manager rejects control characters).
_POINT_NAMESPACE = uuid.UUID("3b0f7a52-9e64-4c1d-8a7e-5d2c9f4b1e36")

# Turn ids remembered per session for idempotent retries (at least 4 × max_turns): a retry
# arrives seconds after the original, thousands of turns is far beyond any retry window, and the
# bound keeps a session that is written to for months from growing without limit.
TURN_IDS_KEPT = 1000

# Version of the Redis key layout, part of every key. A release that changes key types or meanings
# bumps it: its keys then never meet the old ones (no WRONGTYPE errors), the memory index is
# rebuilt from Qdrant on first search (see rebuild_index), and old keys can be deleted by prefix.
LAYOUT = "v1"

# Field of an agent's statistics hash saying its memory index holds every point Qdrant has for
# the agent. Redis losing its data (restarted without persistence, FLUSHALL, failover to an empty
# replica) loses it with the index, and the next call for the agent re-indexes from Qdrant (see
# index.ensure_indexed).
INDEXED = "indexed"


def enc(value: str) -> str:
    """Percent-encode an id so that it contains no ':', '{', '}', '*', '?', '%' or space.

    Encoding is injective ('%' itself becomes '%25'), so distinct ids give distinct keys, and
    the result never contains Redis glob or hash-tag characters.
    """
    return quote(value, safe="")


def dec(value: str) -> str:
    """The id :func:`enc` encoded."""
    return unquote(value, errors="strict")


@dataclass(frozen=True, slots=True)
class AgentKeys:
    """Every Redis key of one agent. The agent is the hash tag: on a cluster all share a slot."""

    base: str

    @classmethod
    def of(cls, prefix: str, agent_id: str) -> AgentKeys:
        return cls(f"{prefix}:{LAYOUT}:{{{enc(agent_id)}}}:")

    def turns(self, s: str) -> str:
        return f"{self.base}turns:{s}"

    def tids(self, s: str) -> str:
        return f"{self.base}tids:{s}"

    def sess(self, s: str) -> str:
        return f"{self.base}sess:{s}"

    def lock(self, n: str) -> str:
        return f"{self.base}lock:{n}"

    @property
    def keyset(self) -> str:
        return f"{self.base}keys"

    @property
    def mem(self) -> str:
        return f"{self.base}mem"

    @property
    def doc(self) -> str:
        return f"{self.base}doc"

    @property
    def df(self) -> str:
        return f"{self.base}df"

    @property
    def stats(self) -> str:
        return f"{self.base}stats"

    def session_keys(self, session_id: str) -> tuple[list[str], str]:
        s = enc(session_id)
        return [self.turns(s), self.tids(s), self.sess(s), self.keyset], "s:" + s


def point_id(agent_id: str, memory_id: str) -> str:
    return str(uuid.uuid5(_POINT_NAMESPACE, f"{agent_id}\x00{memory_id}"))


def doc_entry(content: str, created_at: datetime, terms: Analyzer) -> str:
    """``"length term term ..."``: what the BM25 statistics need to add or remove a memory."""
    tf, length = terms.document_counts(content, created_at)
    return " ".join([str(length), *tf.keys()])


def micros_to_dt(value: str) -> datetime:
    return datetime.fromtimestamp(int(value) / 1_000_000, tz=UTC)


def turn_to_json(turn: Turn) -> str:
    return json.dumps(
        {
            "id": turn.id,
            "agent_id": turn.agent_id,
            "session_id": turn.session_id,
            "user_message": turn.user_message,
            "assistant_message": turn.assistant_message,
            "tool_results": turn.tool_results,
            "created_at": turn.created_at.isoformat(),
            "token_count": turn.token_count,
        },
        ensure_ascii=False,
    )


def turn_from_json(text: str) -> Turn:
    d = json.loads(text)
    return Turn(
        id=d["id"],
        agent_id=d["agent_id"],
        session_id=d["session_id"],
        user_message=d["user_message"],
        assistant_message=d["assistant_message"],
        tool_results=d["tool_results"],
        created_at=datetime.fromisoformat(d["created_at"]),
        token_count=int(d["token_count"]),
    )


# A memory's payload: its stored fields, the id under "memory_id" (the point's own id is derived
# from the agent and memory ids), tuples as lists and times as ISO 8601. ``expires_us`` (the
# expiry in microseconds, or none) is what Qdrant's range filter compares: it has no datetime
# index in local mode.
_PAYLOAD_KEY = {name: "memory_id" if name == "id" else name for name in STORED_MEMORY_FIELDS}


#: The payload key of a memory's replaced versions (payloads of :func:`to_payload`, oldest
#: first). Kept with the point, it goes wherever the point goes (replaced, deleted, erased);
#: search never reads it.
HISTORY = "history"
#: What search reads of a payload: everything but the history.
SEARCH_PAYLOAD = qm.PayloadSelectorExclude(exclude=[HISTORY])


def to_payload(memory: Memory) -> dict[str, Any]:
    """The Qdrant payload of ``memory``."""
    out = {_PAYLOAD_KEY[name]: getattr(memory, name) for name in STORED_MEMORY_FIELDS}
    out["tags"] = list(memory.tags)
    out["source_turn_ids"] = list(memory.source_turn_ids)
    for name in DATETIME_FIELDS:
        value = out[name]
        out[name] = None if value is None else value.isoformat()
    out["created_us"] = micros(memory.created_at)
    out["expires_us"] = None if memory.expires_at is None else micros(memory.expires_at)
    return out


def from_payload(p: dict[str, Any]) -> Memory:
    """The memory a payload of :func:`to_payload` holds."""
    return memory_from_fields(p, id=p["memory_id"])


@dataclass(frozen=True, slots=True)
class PayloadColumns:
    """What ranking reads of candidates' payloads, column by column, before any memory is built."""

    ids: list[str]
    #: Parsed once: the recency ranking reads ``created_us``, the date terms ``created_at``.
    created_at: list[datetime]
    created_us: npt.NDArray[np.int64]
    tokens: npt.NDArray[np.int64]
    contents: list[str]


def payload_columns(payloads: Sequence[dict[str, Any]]) -> PayloadColumns:
    """The columns of :class:`PayloadColumns` from payloads of :func:`to_payload`."""
    created_at = [datetime.fromisoformat(p["created_at"]) for p in payloads]
    return PayloadColumns(
        ids=[str(p["memory_id"]) for p in payloads],
        created_at=created_at,
        created_us=np.array([micros(c) for c in created_at], dtype=np.int64),
        tokens=np.array([int(p["token_count"]) for p in payloads], dtype=np.int64),
        contents=[str(p["content"]) for p in payloads],
    )


def agent_filter(agent_id: str) -> qm.Filter:
    """The tenant filter every Qdrant query of the agent carries."""
    return qm.Filter(must=[qm.FieldCondition(key="agent_id", match=qm.MatchValue(value=agent_id))])


def live_filter(agent_id: str, now: datetime, flt: MemoryFilter | None) -> qm.Filter:
    """The agent's points that have not expired at ``now`` and that ``flt`` may match.

    Only the conditions of keys with a ``qdrant`` compiler (those Qdrant evaluates exactly as
    their ``matches``) are pushed down; the caller applies ``flt.matches`` to what comes back,
    so the pushdown only narrows what travels.
    """
    must: list[qm.Condition] = [
        qm.FieldCondition(key="agent_id", match=qm.MatchValue(value=agent_id))
    ]
    for key, value in flt or ():
        if key.qdrant is not None:
            must.extend(_condition(c) for c in key.qdrant(value))
    expired = qm.FieldCondition(key="expires_us", range=qm.Range(lte=micros(now)))
    return qm.Filter(must=must, must_not=[expired])


def _condition(c: FieldMatch) -> qm.FieldCondition:
    """Qdrant's form of a key's payload condition."""
    if c.any is not None:
        return qm.FieldCondition(key=c.key, match=qm.MatchAny(any=list(c.any)))
    if c.gte is not None:
        return qm.FieldCondition(key=c.key, range=qm.Range(gte=c.gte))
    return qm.FieldCondition(key=c.key, match=qm.MatchValue(value=c.value))


def ttl_ms(ttl_seconds: float) -> int:
    """A TTL in whole milliseconds, at least 1."""
    return max(1, math.ceil(ttl_seconds * 1000.0))
