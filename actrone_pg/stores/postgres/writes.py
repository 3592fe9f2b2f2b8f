"""The PostgreSQL store's L2 writes: memories and their BM25 statistics, in one transaction."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from actrone_pg.errors import MissingDependencyError
from actrone_pg.models import MEMORY_FIELD_TYPES, Memory
from actrone_pg.ranking import analyzer_mismatch
from actrone_pg.stores.base import (
    FENCED_LOCK,
    WRITE_GENERATION,
    BuildVersion,
    Fence,
    MemoryRecord,
    batch_dimensions,
    lock_lost,
)
from actrone_pg.stores.postgres import lookups, maintenance, rows
from actrone_pg.stores.postgres.connection import Database, _Conn, jsonb
from actrone_pg.stores.postgres.statements import (
    AGENT_WRITE,
    ARCHIVE_MEMORY,
    COPY_COLUMNS,
    COPY_MEMORIES,
    COPY_TYPES,
    COUNT_MEMORIES,
    DELETE_EXPIRED,
    DELETE_HISTORY,
    DELETE_MEMORIES,
    ERASE,
    ERASE_CLAIM_LOCK,
    EXPIRED_MEMORY_IDS,
    INSERT_MEMORY,
    LOCK_AGENT_SHARDS,
    LOCK_AGENT_STATS,
    LOCK_EXISTING_AGENT_STATS,
    LOCK_SHARD_METADATA,
    MEMORY_FIELDS,
    PRUNE_TERM_STATS,
    REGISTER_EMBEDDERS,
    SELECT_ANALYZER,
    SELECT_EMBEDDERS,
    SELECT_EXPIRED,
    SELECT_HISTORY,
    SELECT_MEMORY,
    SELECT_MEMORY_FOR_UPDATE,
    UPDATE_AGENT_STATS,
    UPDATE_TERM_STATS,
)

try:
    from psycopg.types.json import Jsonb
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("postgres", exc.name or "psycopg") from None

__all__ = [
    "count_memories",
    "delete_memory",
    "erase_agent",
    "get_memory",
    "memory_history",
    "sweep_expired_memories",
    "update_memory",
    "upsert_memories",
]

# How COPY takes each field of a memory, by the field's type.
_ADAPT: dict[str, Callable[[Any], Any]] = {
    "float": float,
    "tuple[str, ...]": list,
    "dict[str, Any]": jsonb,
}
_COPY_VALUE = {
    name: _ADAPT.get(MEMORY_FIELD_TYPES[name], lambda value: value) for name in MEMORY_FIELDS
}


async def upsert_memories(
    db: Database, records: Sequence[MemoryRecord], *, fence: Fence | None = None
) -> None:
    """Insert or replace memories and their BM25 statistics in one transaction.

    Rows go in through binary COPY; statistics are updated under a lock on each agent's
    statistics row (agents locked in sorted order, so concurrent batches cannot deadlock).
    A replaced memory starts afresh: its earlier versions are dropped. With ``fence``, the
    writer's lock is checked (and share-locked) in the same transaction, after the agent's
    statistics row: erase_agent takes that row first too, so the two never interleave.
    Each agent's statements but the COPY are one call of ``agent_write`` (:func:`_write_by_call`),
    the batch write's one definition, on one server as on the agent's Citus worker.
    """
    if not records:
        return
    dims = batch_dimensions(records)
    lookups.check_known_dimensions(db, dims)
    by_agent: dict[str, list[MemoryRecord]] = defaultdict(list)
    for rec in records:
        by_agent[rec.memory.agent_id].append(rec)
    sizes: dict[str, int] = {}
    agents = sorted(by_agent)
    async with db.conn() as conn, conn.transaction():
        stored = await _register(db, conn, dims)
        # On Citus the batch's shard locks go with the first agent's call (_write_by_call).
        lock = agents if db.distributed else None
        for agent_id in agents:
            await db.serve(conn, agent_id)  # row-level security: this agent's rows, in turn
            batch = await _batch(db, conn, agent_id, by_agent[agent_id])
            sizes[agent_id] = await _write_by_call(db, conn, batch, fence, fresh=True, lock=lock)
            lock = None
    await _written_now(db, records, dims, stored, sizes)


async def _lock_shards(db: Database, conn: _Conn, agents: list[str]) -> None:
    """The agents' shard metadata locks (LOCK_SHARD_METADATA; under row security the tables'
    owner takes them for the role, LOCK_AGENT_SHARDS)."""
    if db.settings.row_security:
        await conn.execute(db.compose(LOCK_AGENT_SHARDS), (agents,))
    else:
        await conn.execute(db.compose(LOCK_SHARD_METADATA), (db.schema, agents))


async def update_memory(
    db: Database,
    agent_id: str,
    memory_id: str,
    build: BuildVersion,
    *,
    fence: Fence | None = None,
) -> Memory | None:
    """One transaction: the agent's statistics row, then the memory's row, locked; the new
    version built from the current one; the current one archived and replaced.

    The statistics row comes first, as every writer of the agent's memories takes it (a
    row lock of the memory first would deadlock with a delete or an erase waiting on it);
    so updates of one memory queue on it, in the order they came, none refused. On a
    distributed schema the agent's shard's metadata lock comes before it, as in
    :func:`upsert_memories`: no shard move cuts over and no reindex runs under the delegated
    ``agent_write``.
    """
    async with db.conn() as conn, conn.transaction():
        if db.distributed:
            await _lock_shards(db, conn, [agent_id])
        await conn.execute(db.compose(LOCK_AGENT_STATS), (agent_id,))
        if db.ts_config == "simple":
            # Refused before ``build`` runs (it may embed): one more round trip, for one memory.
            cur = await conn.execute(db.compose(SELECT_ANALYZER))
            row = await cur.fetchone()
            _check_analyzer(db, row[0] if row else None)
        await lookups.check_fence(db, conn, agent_id, fence)
        found = await db.fetch(conn, db.compose(SELECT_MEMORY_FOR_UPDATE), (agent_id, memory_id))
        if not found:
            return None
        current = rows.memory(agent_id, found[0])
        record = await build(current)
        m = record.memory
        dims = batch_dimensions([record])
        lookups.check_known_dimensions(db, dims)
        stored = await _register(db, conn, dims)
        await conn.execute(
            db.compose(ARCHIVE_MEMORY),
            {"valid_to": m.valid_from, "agent": agent_id, "id": m.id, "version": current.version},
        )
        batch = await _batch(db, conn, agent_id, [record])
        size = await _write_by_call(db, conn, batch, None, fresh=False)
    await _written_now(db, [record], dims, stored, {agent_id: size})
    return m


def _check_analyzer(db: Database, recorded: Any) -> None:
    """Refuse a write of BM25 terms if the schema now records another analyzer than this
    store's: ``actrone-pg reindex`` ran since the store started (the store's own check, at
    setup, saw the old one). The transaction then rolls back, its terms with it.

    ``recorded`` is read while the writer holds the agent's statistics row
    (LOCK_AGENT_STATS, its first statement). ``reindex`` holds the statistics table
    exclusively from before it reads to its commit, so once the row is held the recorded
    analyzer cannot change until this transaction ends, and a write that waited on a reindex
    reads the analyzer it recorded. So a batch reads it with ``agent_write``'s last statement
    (the totals' UPDATE), the same value as right after taking the row, without a round trip
    of its own (Citus refuses a subquery in an INSERT's RETURNING, so the lock's statement
    cannot carry it); ``update_memory`` reads it right after the row as well, to refuse before
    it builds the new version.
    """
    if db.ts_config != "simple":
        return  # the server's configuration makes the terms; no analyzer is recorded
    if recorded is not None and recorded != db.analyzer.index_name:
        raise analyzer_mismatch(
            f"schema {db.schema!r} (re-indexed while this store ran; restart it to follow)",
            str(recorded),
            db.analyzer.index_name,
        )


async def _register(db: Database, conn: _Conn, dims: dict[str, int]) -> dict[str, int]:
    """Register the embedders this transaction writes that this store does not know yet."""
    names = sorted(n for n in dims if n not in db.dimensions)
    if not names:
        # Registry rows never change once committed, so known ones need no round trip.
        return {}
    await conn.execute(db.compose(REGISTER_EMBEDDERS), (names, [dims[n] for n in names]))
    stored = rows.dimensions(await db.fetch(conn, db.compose(SELECT_EMBEDDERS), (names,)))
    lookups.check_known_dimensions(db, dims, stored)
    return stored


async def _written_now(
    db: Database,
    records: Sequence[MemoryRecord],
    dims: dict[str, int],
    stored: dict[str, int],
    sizes: dict[str, int],
) -> None:
    """After a write committed: remember its embedders, schedule indexes and maintenance."""
    # Cached only once committed: a rolled-back registration must not be remembered.
    db.dimensions.update(stored)
    await maintenance.after_write(db, records, dims, sizes)


@dataclass(frozen=True, slots=True)
class _Batch:
    """One agent's memories to write: their COPY rows, and what they add to the statistics."""

    agent_id: str
    ids: list[str]
    rows: list[tuple[Any, ...]]
    #: Each term's count of the batch's memories holding it.
    df: Counter[str]
    length: int


async def _batch(db: Database, conn: _Conn, agent_id: str, recs: list[MemoryRecord]) -> _Batch:
    """The COPY rows of one agent's memories, their terms counted as the schema indexes them."""
    rows_out = []
    df: Counter[str] = Counter()
    total = 0
    for rec in recs:
        m = rec.memory
        tf, length = await lookups.term_counts(db, conn, m)
        total += length
        df.update(tf.keys())
        rows_out.append(
            (
                agent_id,
                *(_COPY_VALUE[name](getattr(m, name)) for name in MEMORY_FIELDS),
                length,
                Jsonb(dict(tf)),
                rec.vector,
            )
        )
    return _Batch(agent_id, [r.memory.id for r in recs], rows_out, df, total)


async def _copy(db: Database, conn: _Conn, batch: _Batch) -> None:
    """The batch's rows: binary COPY, or under row-level security (which refuses COPY FROM)
    one INSERT of every row, pipelined (docs/postgres.md, "Row-level security", has the cost)."""
    if db.settings.row_security:
        async with conn.cursor() as cur:
            rows_in = [dict(zip(COPY_COLUMNS, r, strict=True)) for r in batch.rows]
            await cur.executemany(db.compose(INSERT_MEMORY), rows_in)
        return
    async with conn.cursor().copy(db.compose(COPY_MEMORIES)) as copy:
        copy.set_types(COPY_TYPES)
        for row in batch.rows:
            await copy.write_row(row)


async def _write_by_call(
    db: Database,
    conn: _Conn,
    batch: _Batch,
    fence: Fence | None,
    *,
    fresh: bool,
    lock: list[str] | None = None,
) -> int:
    """One agent's batch: its statistics row taken, the fence checked, the replaced memories
    deleted (with ``fresh``, their earlier versions too), the term frequencies and totals moved,
    in one call of ``agent_write`` (sql/0024_agent_write.sql); then the rows; the agent's
    memory count.

    On one server the call runs over the schema's tables. On a distributed schema Citus
    delegates it to the worker holding the agent's shards, where it runs over the shard tables;
    the caller holds the agent's shard's metadata lock, on the coordinator
    (LOCK_SHARD_METADATA), so no shard move cuts over and no reindex runs while the transaction
    is open. Where Citus does not delegate it (a session that no longer delegates functions,
    docs/scale-out.md), the call runs the same statements on the coordinator over the
    distributed tables. docs/scale-out.md, "What behaves differently", has why (two hops instead
    of five).

    ``lock``: the agents whose shard metadata locks the transaction takes first
    (:func:`_lock_shards`), sent with the call in one pipeline: the lock still comes first, and
    a batch waits for one round trip to the coordinator instead of two (docs/notes/scale-out.md,
    "The VACUUM after a bulk write, and the lock with the call").
    """
    terms = list(batch.df)
    params = {
        "agent": batch.agent_id,
        "ids": batch.ids,
        "terms": terms,
        "deltas": [batch.df[t] for t in terms],
        "count": len(batch.ids),
        "length": batch.length,
        "fresh": fresh,
        "fence_name": None if fence is None else fence.name,
        "fence_holder": None if fence is None else fence.holder,
    }
    if lock is None:
        found = await db.fetch(conn, db.compose(AGENT_WRITE), params)
    else:
        async with conn.pipeline():
            await _lock_shards(db, conn, lock)
            found = await db.fetch(conn, db.compose(AGENT_WRITE), params)
    (row,) = found
    if not row["held"]:
        assert fence is not None
        raise lock_lost(batch.agent_id, fence)
    _check_analyzer(db, row["analyzer"])
    await _copy(db, conn, batch)
    return int(row["n_docs"])


async def get_memory(db: Database, agent_id: str, memory_id: str) -> Memory | None:
    """One memory of the agent, or ``None``."""
    async with db.conn() as conn:
        found = await db.fetch(conn, db.compose(SELECT_MEMORY), (agent_id, memory_id))
    return rows.memory(agent_id, found[0]) if found else None


async def memory_history(db: Database, agent_id: str, memory_id: str) -> list[Memory]:
    """Every version of the memory, oldest first, in one snapshot."""
    async with db.conn() as conn:
        found = await db.fetch(
            conn, db.compose(SELECT_HISTORY), {"agent": agent_id, "id": memory_id}
        )
    return [rows.memory(agent_id, r) for r in found]


async def delete_memory(db: Database, agent_id: str, memory_id: str) -> bool:
    """Delete one memory of the agent (every version) and take it out of the statistics."""
    async with db.conn() as conn, conn.transaction():
        if not await _lock_existing_stats(db, conn, agent_id):
            return False  # no statistics row, no memories: the agent has none (or was erased)
        gone = rows.removed(
            await db.fetch(conn, db.compose(DELETE_MEMORIES), (agent_id, [memory_id]))
        )
        if not gone:
            return False
        await conn.execute(db.compose(DELETE_HISTORY), (agent_id, [memory_id]))
        (old,) = gone
        if old.terms:
            await conn.execute(
                db.compose(UPDATE_TERM_STATS), (agent_id, old.terms, [-1] * len(old.terms))
            )
            await conn.execute(db.compose(PRUNE_TERM_STATS), (agent_id, old.terms))
        await conn.execute(db.compose(UPDATE_AGENT_STATS), (-1, -old.length, agent_id))
        return True


async def sweep_expired_memories(db: Database, *, limit: int) -> int:
    """Delete up to ``limit`` expired memories, one transaction per agent, statistics exact.

    Under row-level security the expired memories of every agent are listed by the schema's
    SECURITY DEFINER function (EXPIRED_MEMORY_IDS), then each agent's deleted under its own
    setting."""
    listing = EXPIRED_MEMORY_IDS if db.settings.row_security else SELECT_EXPIRED
    async with db.conn() as conn:
        found = await db.fetch(conn, db.compose(listing), (limit,))
    by_agent: dict[str, list[str]] = defaultdict(list)
    for r in found:
        by_agent[str(r["agent_id"])].append(str(r["id"]))
    removed = 0
    for agent_id in sorted(by_agent):
        with db.serving(agent_id):
            removed += await _delete_expired(db, agent_id, by_agent[agent_id])
    return removed


async def _delete_expired(db: Database, agent_id: str, ids: list[str]) -> int:
    """Delete those of the agent's memories ``ids`` that are still expired, statistics exact."""
    async with db.conn() as conn, conn.transaction():
        if not await _lock_existing_stats(db, conn, agent_id):
            return 0  # erased since it was listed
        gone = await db.fetch(conn, db.compose(DELETE_EXPIRED), (agent_id, ids))
        if not gone:
            return 0
        await conn.execute(db.compose(DELETE_HISTORY), (agent_id, [str(r["id"]) for r in gone]))
        df: Counter[str] = Counter()
        for old in rows.removed(gone):
            df.update(old.terms)
        if df:
            terms = list(df)
            await conn.execute(
                db.compose(UPDATE_TERM_STATS), (agent_id, terms, [-df[t] for t in terms])
            )
            await conn.execute(db.compose(PRUNE_TERM_STATS), (agent_id, terms))
        length = sum(int(r["doc_len"]) for r in gone)
        await conn.execute(db.compose(UPDATE_AGENT_STATS), (-len(gone), -length, agent_id))
        return len(gone)


async def _lock_existing_stats(db: Database, conn: _Conn, agent_id: str) -> bool:
    """Lock the agent's statistics row for a writer that only deletes, as every writer takes
    it first; ``False`` (nothing locked, nothing created) if the agent has none."""
    return bool(await db.fetch(conn, db.compose(LOCK_EXISTING_AGENT_STATS), (agent_id,)))


async def count_memories(db: Database, agent_id: str) -> int:
    """How many memories the agent has."""
    async with db.conn() as conn:
        cur = await conn.execute(db.compose(COUNT_MEMORIES), (agent_id,))
        row = await cur.fetchone()
    return int(row[0]) if row else 0


async def erase_agent(db: Database, agent_id: str) -> None:
    """Delete every row of the agent in every table, in one transaction."""
    async with db.conn() as conn, conn.transaction():
        # Take the agent's statistics lock first, as writers do: a batch being written now
        # commits before the deletes start, and each delete (a new snapshot under READ
        # COMMITTED) then sees its rows, so no memory outlives its statistics.
        await conn.execute(db.compose(LOCK_AGENT_STATS), (agent_id,))
        # A consolidation that takes its lock now, or a writer that starts a generation, waits
        # for the commit, then finds nothing.
        for name in (FENCED_LOCK, WRITE_GENERATION):
            await conn.execute(db.compose(ERASE_CLAIM_LOCK), (agent_id, name))
        for statement in ERASE:
            await conn.execute(db.compose(statement), (agent_id,))
    await maintenance.drop_ann_indexes(db, agent_id)
