"""The Redis + Qdrant store's L2 writes: all or none across two servers, with an undo.

Order of an upsert: every dimension is checked first (a mismatch writes nothing); then the Redis
index and statistics change (the scripts return each memory's previous state); then the points
are written to Qdrant. If Qdrant fails, the points this call wrote are removed or restored from
copies read beforehand and the Redis changes are undone.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, cast

import numpy as np

from actrone_pg.errors import LockLostError, MissingDependencyError, StoreError
from actrone_pg.models import Memory
from actrone_pg.ranking import micros
from actrone_pg.stores.base import (
    WRITE_GENERATION,
    BuildVersion,
    Fence,
    MemoryRecord,
    batch_dimensions,
    dimension_mismatch,
    lock_lost,
)
from actrone_pg.stores.redis_qdrant import index, registry
from actrone_pg.stores.redis_qdrant.connection import Servers
from actrone_pg.stores.redis_qdrant.index import Prior
from actrone_pg.stores.redis_qdrant.layout import (
    HISTORY,
    INDEXED,
    AgentKeys,
    agent_filter,
    doc_entry,
    enc,
    from_payload,
    point_id,
    to_payload,
    ttl_ms,
)
from actrone_pg.stores.redis_qdrant.sessions import ERASE_MARK_SECONDS

try:
    from qdrant_client import models as qm
except ImportError:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("qdrant", "qdrant-client") from None

__all__ = [
    "QDRANT_CHUNK",
    "count_memories",
    "delete_memory",
    "erase_agent",
    "get_memory",
    "memory_history",
    "sweep_expired_memories",
    "update_memory",
    "upsert_memories",
]

logger = logging.getLogger("actrone_pg.stores.redis_qdrant")

# An update holds its memory's lock for at most this long, and waits as long for it, asking
# Redis again after each pause.
_UPDATE_LOCK_TTL = 30.0
_UPDATE_LOCK_POLL = 0.01

# Points per Qdrant upsert: keeps each HTTP body small; a larger batch is still all-or-nothing.
QDRANT_CHUNK = 256


async def upsert_memories(
    sv: Servers, records: Sequence[MemoryRecord], *, fence: Fence | None = None
) -> None:
    """Insert or replace, all or none.

    Order: every dimension is checked first (a mismatch writes nothing); then the Redis index
    and statistics change in Lua scripts that return each memory's previous state; then the
    points are written to Qdrant with ``wait=True``. If Qdrant fails, the points this call
    wrote are removed or restored from copies read beforehand and the Redis changes are
    undone, and the error is raised. If that compensation itself fails (both servers down at
    once) the original error is still raised and the log names the affected agents and ids.

    With ``fence``, the index scripts check the writer's lock, and once the points are in
    Qdrant it is checked again: an erase_agent that came in between (it deletes the lock
    before the points) has its agent's points deleted again here, never restored.
    """
    await _upsert(sv, records, {}, fence)


async def _upsert(
    sv: Servers,
    records: Sequence[MemoryRecord],
    history: dict[tuple[str, str], list[Any]],
    fence: Fence | None = None,
) -> None:
    """:func:`upsert_memories`, with each memory's earlier versions (``history``, by agent
    and id) kept in its point's payload; a memory not named there starts afresh."""
    if not records:
        return
    batch_dims = batch_dimensions(records)
    registered = {name: await registry.registered_dim(sv, name) for name in batch_dims}
    for name, size in batch_dims.items():
        have = registered[name]
        if have is not None and have != size:
            raise dimension_mismatch(name, have, size)
    collections = {
        name: await registry.ensure_collection(sv, name, size) for name, size in batch_dims.items()
    }
    for name, size in batch_dims.items():
        if registered[name] is None:
            await registry.register_dim(sv, name, size)
    agents = list(dict.fromkeys(r.memory.agent_id for r in records))
    try:
        for agent_id in agents:
            if fence is not None and not await _holds(sv, agent_id, fence):
                raise lock_lost(agent_id, fence)
            await index.ensure_indexed(sv, agent_id)
        priors = await _fenced_entries(sv, records, fence)
    except LockLostError:
        # The agent was erased: the index marker that a read of it set since goes too.
        for agent_id in agents:
            await _forget_empty_index(sv, agent_id)
        raise
    copies: dict[tuple[str, str], qm.Record] = {}
    try:
        copies = await _copy_replaced(sv, records, priors, collections)
        points_by = _points_by_collection(records, collections, history)
        for coll, points in points_by.items():
            for start in range(0, len(points), QDRANT_CHUNK):
                chunk = points[start : start + QDRANT_CHUNK]
                await sv.qdrant_call(sv.qdrant().upsert(coll, points=chunk, wait=True))
    except BaseException:
        await _undo_upsert(sv, records, priors, collections, copies)
        raise
    if fence is not None:
        for agent_id in dict.fromkeys(r.memory.agent_id for r in records):
            if not await _holds(sv, agent_id, fence):
                await _undo_fenced(sv, records, priors, collections, copies)
                raise lock_lost(agent_id, fence)
    await _drop_moved(sv, records, priors)


async def _fenced_entries(
    sv: Servers, records: Sequence[MemoryRecord], fence: Fence | None
) -> list[Prior]:
    return await index.apply_entries(
        sv,
        [
            (
                r.memory.agent_id,
                r.memory.id,
                r.memory.embedder,
                doc_entry(r.memory.content, r.memory.created_at, sv.analyzer),
            )
            for r in records
        ],
        fence,
    )


async def _forget_empty_index(sv: Servers, agent_id: str) -> None:
    """Drop the "indexed" marker of an agent whose index is empty (it is set again, after a
    look at Qdrant, by the next call that needs it)."""
    ak = AgentKeys.of(sv.prefix, agent_id)
    r = sv.redis()
    if not int(await sv.redis_call(r.hlen(ak.mem))):
        await sv.redis_call(r.hdel(ak.stats, INDEXED))


async def _holds(sv: Servers, agent_id: str, fence: Fence) -> bool:
    """Whether the fence's writer still holds its lock."""
    key = AgentKeys.of(sv.prefix, agent_id).lock(enc(fence.name))
    value = await sv.redis_call(sv.redis().get(key))
    return value is not None and str(value) == fence.holder


async def _undo_fenced(
    sv: Servers,
    records: Sequence[MemoryRecord],
    priors: list[Prior],
    collections: dict[str, str],
    copies: dict[tuple[str, str], qm.Record],
) -> None:
    """Undo a write whose lock went meanwhile. A memory whose index entry is gone was erased
    (or deleted) after the index was written: its point is deleted, and neither it nor its
    index entry is restored. The others are undone as a failed write is."""
    gone: set[tuple[str, str]] = set()
    for rec in records:
        m = rec.memory
        if await sv.hget(AgentKeys.of(sv.prefix, m.agent_id).mem, m.id) is None:
            gone.add((m.agent_id, m.id))
    kept = [
        (r, p)
        for r, p in zip(records, priors, strict=True)
        if (p.agent_id, p.memory_id) not in gone
    ]
    await _undo_upsert(sv, [r for r, _ in kept], [p for _, p in kept], collections, copies)
    remove: dict[str, list[qm.ExtendedPointId]] = {}
    for rec in records:
        if (rec.memory.agent_id, rec.memory.id) in gone:
            pid = point_id(rec.memory.agent_id, rec.memory.id)
            remove.setdefault(collections[rec.memory.embedder], []).append(pid)
    for coll, pids in remove.items():
        await sv.qdrant_call(
            sv.qdrant().delete(coll, points_selector=qm.PointIdsList(points=pids), wait=True)
        )


def _points_by_collection(
    records: Sequence[MemoryRecord],
    collections: dict[str, str],
    history: dict[tuple[str, str], list[Any]],
) -> dict[str, list[qm.PointStruct]]:
    out: dict[str, list[qm.PointStruct]] = {}
    for rec in records:
        m = rec.memory
        payload = to_payload(m)
        earlier = history.get((m.agent_id, m.id))
        if earlier:
            payload[HISTORY] = earlier
        out.setdefault(collections[m.embedder], []).append(
            qm.PointStruct(
                id=point_id(m.agent_id, m.id),
                vector=np.asarray(rec.vector, dtype=np.float32).tolist(),
                payload=payload,
            )
        )
    return out


async def update_memory(
    sv: Servers,
    agent_id: str,
    memory_id: str,
    build: BuildVersion,
    *,
    fence: Fence | None = None,
) -> Memory | None:
    """The new version built from the current one, the replaced one appended to the
    payload's history.

    Two servers cannot lock a memory together, so every update of one memory takes a short
    Redis lock of it (``SET NX PX``; lapses if its holder dies), waiting for it rather than
    giving up; within this process the waiters queue on a lock of their own first, in
    order, so that only one of them polls Redis.
    """
    async with sv.updating.hold((agent_id, memory_id)):
        return await _update_locked(sv, agent_id, memory_id, build, fence)


async def _update_locked(
    sv: Servers, agent_id: str, memory_id: str, build: BuildVersion, fence: Fence | None
) -> Memory | None:
    holder = str(uuid.uuid4())
    ak = AgentKeys.of(sv.prefix, agent_id)
    n = enc("version\x00" + memory_id)
    lock_keys = [ak.lock(n), ak.keyset]
    # A holder keeps the lock for one read, one embedding at most and one write; waiting as
    # long as the lock can live means only a holder that died (and left it to lapse) or a
    # server that stopped answering makes this give up.
    deadline = time.monotonic() + _UPDATE_LOCK_TTL
    while not int(
        await sv.script("acquire", lock_keys, [holder, ttl_ms(_UPDATE_LOCK_TTL), "l:" + n])
    ):
        if time.monotonic() > deadline:
            raise StoreError(
                f"memory {memory_id!r} stayed locked by another update for "
                f"{_UPDATE_LOCK_TTL:g} s; try again"
            )
        await asyncio.sleep(_UPDATE_LOCK_POLL)
    try:
        # The fence first, as PostgreSQL checks it (the write's own checks are in _upsert): a
        # writer the erase overtook is told so, not that the memory is missing.
        if fence is not None and not await _holds(sv, agent_id, fence):
            raise lock_lost(agent_id, fence)
        payload = await _payload(sv, agent_id, memory_id)
        if payload is None:
            # An erase may have come between the check and the read (two servers, no one
            # atomic step): the writer it overtook is told so. A read of the lock's key, which
            # recreates nothing of the erased agent.
            if fence is not None and not await _holds(sv, agent_id, fence):
                raise lock_lost(agent_id, fence)
            return None
        earlier = list(payload.pop(HISTORY, None) or [])
        record = await build(from_payload(payload))
        m = record.memory
        payload["valid_to"] = None if m.valid_from is None else m.valid_from.isoformat()
        earlier.append(payload)
        await _upsert(sv, [record], {(agent_id, memory_id): earlier}, fence)
        return m
    except LockLostError:
        # The agent was erased: the index marker that the read above set since goes too.
        await _forget_empty_index(sv, agent_id)
        raise
    finally:
        await sv.script("release", lock_keys, [holder, "l:" + n])


async def memory_history(sv: Servers, agent_id: str, memory_id: str) -> list[Memory]:
    """The versions kept in the current point's payload, then the current one."""
    payload = await _payload(sv, agent_id, memory_id)
    if payload is None:
        return []
    earlier = payload.pop(HISTORY, None) or []
    return [*(from_payload(p) for p in earlier), from_payload(payload)]


async def _copy_replaced(
    sv: Servers,
    records: Sequence[MemoryRecord],
    priors: list[Prior],
    collections: dict[str, str],
) -> dict[tuple[str, str], qm.Record]:
    """Copies of the points this write will overwrite in place (to restore on failure)."""
    wanted: dict[str, list[str]] = {}
    for rec, prior in zip(records, priors, strict=True):
        if prior.embedder == rec.memory.embedder:
            coll = collections[rec.memory.embedder]
            wanted.setdefault(coll, []).append(point_id(rec.memory.agent_id, rec.memory.id))
    copies: dict[tuple[str, str], qm.Record] = {}
    for coll, ids in wanted.items():
        found = await sv.qdrant_call(
            sv.qdrant().retrieve(coll, ids=ids, with_payload=True, with_vectors=True)
        )
        for point in found:
            copies[(coll, str(point.id))] = point
    return copies


async def _undo_upsert(
    sv: Servers,
    records: Sequence[MemoryRecord],
    priors: list[Prior],
    collections: dict[str, str],
    copies: dict[tuple[str, str], qm.Record],
) -> None:
    try:
        q = sv.qdrant()
        restore: dict[str, list[qm.PointStruct]] = {}
        remove: dict[str, list[qm.ExtendedPointId]] = {}
        for rec in records:
            coll = collections[rec.memory.embedder]
            pid = point_id(rec.memory.agent_id, rec.memory.id)
            copy = copies.get((coll, pid))
            if copy is not None:
                restore.setdefault(coll, []).append(
                    qm.PointStruct(id=pid, vector=cast(Any, copy.vector), payload=copy.payload)
                )
            else:
                remove.setdefault(coll, []).append(pid)
        for coll, pids in remove.items():
            await sv.qdrant_call(
                q.delete(coll, points_selector=qm.PointIdsList(points=pids), wait=True)
            )
        for coll, pts in restore.items():
            await sv.qdrant_call(q.upsert(coll, points=pts, wait=True))
    except StoreError:
        logger.error(
            "could not undo the Qdrant points of a failed write of %d memories; ids: %s",
            len(records),
            [r.memory.id for r in records][:20],
        )
    await index.restore_entries(sv, priors)


async def _drop_moved(sv: Servers, records: Sequence[MemoryRecord], priors: list[Prior]) -> None:
    """Delete old points of memories rewritten under another embedder (best effort).

    A leftover point is harmless: search keeps only points whose Redis index entry names the
    collection's embedder.
    """
    for rec, prior in zip(records, priors, strict=True):
        if prior.embedder and prior.embedder != rec.memory.embedder:
            dim = await registry.registered_dim(sv, prior.embedder)
            if dim is None:
                continue
            try:
                await sv.qdrant_call(
                    sv.qdrant().delete(
                        registry.collection(sv, prior.embedder, dim),
                        points_selector=qm.PointIdsList(
                            points=[point_id(prior.agent_id, prior.memory_id)]
                        ),
                        wait=True,
                    )
                )
            except StoreError as exc:
                logger.warning("left a stale point of memory %r: %s", prior.memory_id, exc)


async def get_memory(sv: Servers, agent_id: str, memory_id: str) -> Memory | None:
    """The agent's memory from its Qdrant point (the Redis index says which collection)."""
    payload = await _payload(sv, agent_id, memory_id)
    return None if payload is None else from_payload(payload)


async def _payload(sv: Servers, agent_id: str, memory_id: str) -> dict[str, Any] | None:
    """The payload of the agent's memory (its history included), or ``None``."""
    embedder = await index.index_entry(sv, agent_id, memory_id)
    if embedder is None:
        return None
    dim = await registry.registered_dim(sv, embedder)
    if dim is None:
        return None
    points = await sv.qdrant_call(
        sv.qdrant().retrieve(
            registry.collection(sv, embedder, dim),
            ids=[point_id(agent_id, memory_id)],
            with_payload=True,
            with_vectors=False,
        )
    )
    for point in points:
        payload = dict(point.payload or {})
        if payload.get("agent_id") == agent_id and payload.get("memory_id") == memory_id:
            return payload
    return None


async def delete_memory(sv: Servers, agent_id: str, memory_id: str) -> bool:
    """Delete the point (tenant filter + id), then the index entry and its statistics.

    In this order a failure between the two leaves an index entry without a point, which
    search cannot return and a retried delete removes.
    """
    ak = AgentKeys.of(sv.prefix, agent_id)
    embedder = await index.index_entry(sv, agent_id, memory_id)
    if embedder is None:
        return False
    dim = await registry.registered_dim(sv, embedder)
    if dim is not None and await registry.existing_collection(sv, embedder, dim):
        selector = qm.FilterSelector(
            filter=qm.Filter(
                must=[
                    qm.HasIdCondition(has_id=[point_id(agent_id, memory_id)]),
                    qm.FieldCondition(key="agent_id", match=qm.MatchValue(value=agent_id)),
                ]
            )
        )
        await sv.qdrant_call(
            sv.qdrant().delete(
                registry.collection(sv, embedder, dim), points_selector=selector, wait=True
            )
        )
    old = await sv.script("set_entries", [ak.mem, ak.doc, ak.df, ak.stats], [memory_id, "", ""])
    return bool(old[0])


async def sweep_expired_memories(sv: Servers, *, limit: int) -> int:
    """Delete up to ``limit`` expired memories, each as :func:`delete_memory` does (point,
    then index entry and statistics), if still expired when its turn comes."""
    now_us = micros(datetime.now(UTC))
    expired = qm.Filter(must=[qm.FieldCondition(key="expires_us", range=qm.Range(lte=now_us))])
    removed = 0
    for coll, _ in await registry.own_collections(sv):
        points, _offset = await sv.qdrant_call(
            sv.qdrant().scroll(
                coll,
                scroll_filter=expired,
                limit=limit - removed,
                with_payload=["agent_id", "memory_id"],
                with_vectors=False,
            )
        )
        for p in points:
            payload = p.payload or {}
            agent_id, memory_id = str(payload["agent_id"]), str(payload["memory_id"])
            current = await get_memory(sv, agent_id, memory_id)
            if current is None or current.expires_at is None:
                continue
            if micros(current.expires_at) <= now_us and await delete_memory(
                sv, agent_id, memory_id
            ):
                removed += 1
        if removed >= limit:
            break
    return removed


async def count_memories(sv: Servers, agent_id: str) -> int:
    """Size of the agent's memory index in Redis (rebuilt first if Redis lost it)."""
    await index.ensure_indexed(sv, agent_id)
    ak = AgentKeys.of(sv.prefix, agent_id)
    n = int(await sv.redis_call(sv.redis().hlen(ak.mem)))
    if n == 0 and await index.rebuild_if_lost(sv, agent_id):
        n = int(await sv.redis_call(sv.redis().hlen(ak.mem)))
    if n == 0:
        return 0
    # Less those expired by now that the sweeper has not deleted yet (no read returns them):
    # their points, where the index names their collection.
    expired = qm.Filter(
        must=[
            qm.FieldCondition(key="agent_id", match=qm.MatchValue(value=agent_id)),
            qm.FieldCondition(key="expires_us", range=qm.Range(lte=micros(datetime.now(UTC)))),
        ]
    )
    for coll, _ in await registry.own_collections(sv):
        found = await sv.qdrant_call(
            sv.qdrant().scroll(
                coll,
                scroll_filter=expired,
                limit=n,
                with_payload=["memory_id", "embedder"],
                with_vectors=False,
            )
        )
        for p in found[0]:
            payload = p.payload or {}
            named = await sv.hget(ak.mem, str(payload.get("memory_id")))
            if named is not None and named == payload.get("embedder"):
                n -= 1
    return n


async def erase_agent(sv: Servers, agent_id: str) -> None:
    """Delete the agent's Redis keys, then its points in every collection, then its keys
    again.

    The keys go first, its locks with them: a consolidation writing under its lock
    (:class:`~actrone_pg.stores.base.Fence`) either wrote its points before the points are
    deleted here, or finds its lock gone when it checks after writing them and deletes them
    itself. The second pass removes what a write that was not fenced added in between. A
    failure part-way is finished by a retry; no other agent's key or point is touched (the
    filter and the keys carry the agent id).
    """
    ak = AgentKeys.of(sv.prefix, agent_id)
    keys = [
        ak.keyset,
        ak.mem,
        ak.doc,
        ak.df,
        ak.stats,
        sv.sessions_key,
        ak.lock(enc(WRITE_GENERATION)),
    ]
    # The first pass marks the write generation: a writer that starts meanwhile waits for the
    # last pass (sessions.writer_fence), which removes the mark.
    mark_ms = int(ERASE_MARK_SECONDS * 1000)
    await sv.script("erase", keys, [ak.base, enc(agent_id), mark_ms])
    # Every collection of this prefix that exists, not only those the Redis registry names:
    # after a Redis loss the registry may be empty while Qdrant still holds the points.
    for coll, _ in await registry.own_collections(sv):
        await sv.qdrant_call(
            sv.qdrant().delete(
                coll,
                points_selector=qm.FilterSelector(filter=agent_filter(agent_id)),
                wait=True,
            )
        )
    await sv.script("erase", keys, [ak.base, enc(agent_id), 0])
