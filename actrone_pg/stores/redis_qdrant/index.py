"""The Redis + Qdrant store's memory index: memory id -> embedder, and the BM25 statistics.

Redis keeps, per agent, which embedder each memory was written with, each memory's length and
distinct terms, and the statistics BM25 needs (document frequency per term, total length), all
changed by one script per call so they never disagree with each other. Qdrant holds the points;
the index can be rebuilt from them if Redis loses it.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from actrone_pg.errors import MissingDependencyError, StoreError
from actrone_pg.ranking import follow_recorded
from actrone_pg.stores.base import Fence, lock_lost
from actrone_pg.stores.redis_qdrant import registry
from actrone_pg.stores.redis_qdrant.connection import Servers
from actrone_pg.stores.redis_qdrant.layout import (
    INDEXED,
    SEARCH_PAYLOAD,
    AgentKeys,
    agent_filter,
    doc_entry,
    enc,
)

try:
    from qdrant_client import models as qm
except ImportError:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("qdrant", "qdrant-client") from None

__all__ = [
    "REDIS_CHUNK",
    "Prior",
    "apply_entries",
    "check_text_analyzer",
    "current_payloads",
    "ensure_indexed",
    "index_entry",
    "rebuild_if_lost",
    "rebuild_index",
    "reindex_terms",
    "restore_entries",
    "search_stats",
]

logger = logging.getLogger("actrone_pg.stores.redis_qdrant")

# Records per Lua call: keeps each Redis script well under a millisecond per 100 records; a
# larger batch is still all-or-nothing (see writes.upsert_memories).
REDIS_CHUNK = 500


@dataclass(frozen=True, slots=True)
class Prior:
    """What a memory was before a write touched it ('' = it did not exist)."""

    agent_id: str
    memory_id: str
    embedder: str
    doc: str


async def apply_entries(
    sv: Servers, entries: list[tuple[str, str, str, str]], fence: Fence | None = None
) -> list[Prior]:
    """Set (agent, id) -> (embedder, doc) in Redis; '' embedder deletes.

    Returns each entry's prior state, in the order of ``entries``. On failure part-way, the
    chunks already applied are undone before the error is raised. With ``fence``, each
    chunk's script checks the writer's lock first (:class:`LockLostError` if not held).
    """
    by_agent: dict[str, list[int]] = {}
    for pos, entry in enumerate(entries):
        by_agent.setdefault(entry[0], []).append(pos)
    result: list[Prior | None] = [None] * len(entries)
    applied: list[Prior] = []  # in the order the scripts ran, for an exact undo
    try:
        for agent_id, positions in by_agent.items():
            ak = AgentKeys.of(sv.prefix, agent_id)
            for start in range(0, len(positions), REDIS_CHUNK):
                chunk = positions[start : start + REDIS_CHUNK]
                args = [x for pos in chunk for x in entries[pos][1:]]
                keys = [ak.mem, ak.doc, ak.df, ak.stats]
                if fence is None:
                    old = await sv.script("set_entries", keys, args)
                else:
                    keys.append(ak.lock(enc(fence.name)))
                    old = await sv.script("fenced_set_entries", keys, [fence.holder, *args])
                    if old is None:
                        raise lock_lost(agent_id, fence)
                for j, pos in enumerate(chunk):
                    prior = Prior(agent_id, entries[pos][1], old[2 * j], old[2 * j + 1])
                    result[pos] = prior
                    applied.append(prior)
    except BaseException:
        await restore_entries(sv, applied)
        raise
    return [p for p in result if p is not None]


async def restore_entries(sv: Servers, priors: list[Prior]) -> None:
    """Replay priors in reverse order: undoes :func:`apply_entries` exactly.

    Called while another error propagates, so a failure here is logged, not raised.
    """
    if not priors:
        return
    # Agents are independent; within one agent the script applies triples in order, so
    # chunks of the reversed sequence keep the exact reverse order.
    by_agent: dict[str, list[Prior]] = {}
    for p in reversed(priors):
        by_agent.setdefault(p.agent_id, []).append(p)
    try:
        for agent_id, items in by_agent.items():
            ak = AgentKeys.of(sv.prefix, agent_id)
            for start in range(0, len(items), REDIS_CHUNK):
                args = [
                    x
                    for p in items[start : start + REDIS_CHUNK]
                    for x in (p.memory_id, p.embedder, p.doc)
                ]
                await sv.script("set_entries", [ak.mem, ak.doc, ak.df, ak.stats], args)
    except StoreError:
        logger.error(
            "could not undo the Redis index of %d memories after a failed write "
            "(agents %s); their BM25 statistics may be off until they are written again",
            len(priors),
            sorted({p.agent_id for p in priors}),
        )


async def index_entry(sv: Servers, agent_id: str, memory_id: str) -> str | None:
    """The embedder the agent's index names for ``memory_id``.

    On a miss, if the agent's whole index is empty while Qdrant holds points of the agent
    (Redis lost its data), the index is rebuilt first; a miss in a non-empty index costs
    nothing more.
    """
    await ensure_indexed(sv, agent_id)
    ak = AgentKeys.of(sv.prefix, agent_id)
    embedder = await sv.hget(ak.mem, memory_id)
    if embedder is None and await rebuild_if_lost(sv, agent_id):
        embedder = await sv.hget(ak.mem, memory_id)
    return embedder


async def rebuild_if_lost(sv: Servers, agent_id: str) -> bool:
    """Rebuild the agent's index if it is empty but Qdrant has the agent's points."""
    ak = AgentKeys.of(sv.prefix, agent_id)
    if int(await sv.redis_call(sv.redis().hlen(ak.mem))) > 0:
        return False
    for coll, _ in await registry.own_collections(sv):
        found = await sv.qdrant_call(
            sv.qdrant().count(coll, count_filter=agent_filter(agent_id), exact=True)
        )
        if found.count:
            await rebuild_index(sv, agent_id)
            return True
    return False


async def rebuild_index(sv: Servers, agent_id: str) -> int:
    """Recompute the agent's Redis memory index and BM25 statistics from its Qdrant points.

    Needed only if Redis lost data that Qdrant kept (a Redis without persistence restarted,
    or restored from an older snapshot); a search calls it by itself when it finds points for
    an agent whose index is empty. Returns the number of memories indexed.
    """
    entries = await _qdrant_entries(sv, agent_id)
    ak = AgentKeys.of(sv.prefix, agent_id)
    await sv.redis_call(sv.redis().delete(ak.mem, ak.doc, ak.df, ak.stats))
    await apply_entries(sv, entries)
    await sv.redis_call(sv.redis().hset(ak.stats, INDEXED, "1"))
    logger.warning("rebuilt the Redis index of agent %r: %d memories", agent_id, len(entries))
    return len(entries)


async def _our_points(
    sv: Servers, where: qm.Filter, with_payload: list[str] | qm.PayloadSelectorExclude
) -> AsyncIterator[tuple[dict[str, Any], int]]:
    """(payload, dimensions) of every point ``where`` selects that this store wrote: one in
    the collection its embedder and dimension name, read in pages of 1,000."""
    for coll, dim in await registry.own_collections(sv):
        offset: qm.ExtendedPointId | None = None
        while True:
            points, offset = await sv.qdrant_call(
                sv.qdrant().scroll(
                    coll,
                    scroll_filter=where,
                    limit=1000,
                    offset=offset,
                    with_payload=with_payload,
                    with_vectors=False,
                )
            )
            for p in points:
                payload = p.payload or {}
                if payload and registry.collection(sv, str(payload["embedder"]), dim) == coll:
                    yield payload, dim
            if offset is None:
                break


async def _qdrant_entries(sv: Servers, agent_id: str) -> list[tuple[str, str, str, str]]:
    """(agent, memory id, embedder, doc) of each of the agent's points in our collections."""
    entries: list[tuple[str, str, str, str]] = []
    fields = ["memory_id", "content", "created_at", "embedder"]
    async for payload, dim in _our_points(sv, agent_filter(agent_id), fields):
        embedder = str(payload["embedder"])
        if await registry.registered_dim(sv, embedder) is None:
            await registry.register_dim(sv, embedder, dim)
        entries.append(
            (
                agent_id,
                payload["memory_id"],
                embedder,
                doc_entry(
                    payload["content"], datetime.fromisoformat(payload["created_at"]), sv.analyzer
                ),
            )
        )
    return entries


async def ensure_indexed(sv: Servers, agent_id: str) -> None:
    """Index the agent's Qdrant points in Redis if Redis lost the index (one HEXISTS if not).

    Redis without persistence comes back empty after a restart while Qdrant keeps every
    point: without this, a write as the first call for an agent made its index non-empty,
    and the agent's older memories stayed invisible to reads, counts and searches. The
    points are merged into the index (setting an entry again changes nothing), so entries
    written meanwhile by another process are kept; then the marker is set.
    """
    ak = AgentKeys.of(sv.prefix, agent_id)
    r = sv.redis()
    if await sv.redis_call(r.hexists(ak.stats, INDEXED)):
        return
    lock = sv.reindex_locks[hash(agent_id) % len(sv.reindex_locks)]
    async with lock:
        if await sv.redis_call(r.hexists(ak.stats, INDEXED)):
            return  # another call of this process did it meanwhile
        entries = await _qdrant_entries(sv, agent_id)
        await apply_entries(sv, entries)
        await sv.redis_call(r.hset(ak.stats, INDEXED, "1"))
    if entries:
        logger.warning(
            "re-indexed agent %r from Qdrant (Redis had lost its index): %d memories",
            agent_id,
            len(entries),
        )


async def current_payloads(sv: Servers, agent_id: str, where: qm.Filter) -> list[dict[str, Any]]:
    """Payloads (history left out) of the agent's current memories among the points
    ``where`` selects, in every collection: a point counts only if the Redis index names its
    embedder for its memory, as search requires."""
    found = [payload async for payload, _ in _our_points(sv, where, SEARCH_PAYLOAD)]
    if not found:
        return []
    ak = AgentKeys.of(sv.prefix, agent_id)
    named = await sv.redis_call(sv.redis().hmget(ak.mem, [str(p["memory_id"]) for p in found]))
    return [
        p
        for p, embedder in zip(found, named, strict=True)
        if embedder is not None and str(embedder) == p["embedder"]
    ]


async def check_text_analyzer(sv: Servers) -> None:
    """Record this prefix's analyzer, or refuse one that differs from the recorded.

    The index and statistics hold the analyzer's terms. A prefix written before analyzers
    were recorded (embedders registered, no record) holds plain tokens: it is 'simple'.
    """
    r = sv.redis()
    if not await sv.redis_call(r.exists(sv.analyzer_key)):
        written = int(await sv.redis_call(r.hlen(sv.dims_key))) > 0
        initial = "simple" if written else sv.analyzer.index_name
        await sv.redis_call(r.setnx(sv.analyzer_key, initial))
    recorded = await sv.redis_call(r.get(sv.analyzer_key))
    if recorded is not None:
        sv.analyzer = follow_recorded(
            f"the Redis index of prefix {sv.prefix!r}",
            sv.analyzer,
            str(recorded),
            dates_given=sv.dates_given,
        )


async def reindex_terms(sv: Servers) -> int:
    """Rebuild every agent's index and statistics from Qdrant with this store's analyzer.

    Returns the number of memories indexed. Writes made meanwhile by other processes may be
    indexed with the old analyzer: run it while nothing writes to the prefix.
    """
    agents: set[str] = set()
    for coll, _ in await registry.own_collections(sv):
        offset: qm.ExtendedPointId | None = None
        while True:
            points, offset = await sv.qdrant_call(
                sv.qdrant().scroll(
                    coll,
                    limit=1000,
                    offset=offset,
                    with_payload=["agent_id"],
                    with_vectors=False,
                )
            )
            agents.update(str((p.payload or {})["agent_id"]) for p in points)
            if offset is None:
                break
    count = 0
    for agent_id in sorted(agents):
        count += await rebuild_index(sv, agent_id)
    await sv.redis_call(sv.redis().set(sv.analyzer_key, sv.analyzer.index_name))
    return count


async def search_stats(
    sv: Servers, ak: AgentKeys, embedder: str, ids: list[str], terms: list[str]
) -> tuple[int, int, list[bool], dict[str, int]]:
    """One script: corpus size, total length, which candidates the index names under
    ``embedder``, and the query terms' document frequencies (a consistent snapshot)."""
    res = await sv.script(
        "search_stats",
        [ak.mem, ak.df, ak.stats],
        [embedder, len(ids), *ids, *terms],
    )
    mask = str(res[2])
    return (
        int(res[0]),
        int(res[1]),
        [c == "1" for c in mask],
        {t: int(v) for t, v in zip(terms, res[3:], strict=True) if int(v) > 0},
    )
