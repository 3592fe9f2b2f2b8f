"""The PostgreSQL store's maintenance: planner statistics after bulk writes, large agents' indexes.

Both run in the background of the writes that make them due (:func:`after_write`), and
:func:`stop` stops them. Their counters and tasks are :class:`Maintenance`'s, one per store
(``Database.maintenance``), changed only here. See docs/postgres.md ("Large agents") for the
HNSW indexes and their measurements.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from actrone_pg.errors import ActroneError, MissingDependencyError
from actrone_pg.stores.postgres.statements import (
    ANALYZE_FIRST,
    ANALYZE_GROWTH,
    ANALYZE_L2,
    ANALYZE_L2_CITUS,
    ANN_BUILD_MEMORY,
    ANN_INDEX_STATE,
    ANN_LOCK,
    ANN_MAX_DIMENSIONS,
    ANN_RECHECK_SECONDS,
    ANN_RETRY_SECONDS,
    ANN_UNLOCK,
    SELECT_ALL_EMBEDDERS,
    SETTLE_MIN_ROWS,
    SETTLE_SECONDS,
)

try:
    from psycopg import sql
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("postgres", exc.name or "psycopg") from None

if TYPE_CHECKING:
    from actrone_pg.stores.base import MemoryRecord
    from actrone_pg.stores.postgres.connection import Database, _Conn

__all__ = [
    "Maintenance",
    "after_write",
    "analyze",
    "ann_dimensions",
    "ann_index_name",
    "drop_ann_indexes",
    "settle",
    "start_ann_build",
    "stop",
    "vacuum_analyze",
    "wait_for_indexes",
]

logger = logging.getLogger("actrone_pg.postgres")


class Maintenance:
    """One store's maintenance: its counters and background tasks (``Database.maintenance``).

    Only this module's functions change it; they take the :class:`~.connection.Database`,
    whose connections the maintenance runs on.
    """

    def __init__(self) -> None:
        # Memories written by this store, and the count at which it next runs ANALYZE.
        self.written = 0
        self.next_analyze = ANALYZE_FIRST
        # Memories written since the last maintenance, when the last write ended, and the task
        # that runs the maintenance once writes pause (see settle).
        self.unmaintained = 0
        self.last_write = 0.0
        self.settle_seconds = SETTLE_SECONDS
        self.settle_task: asyncio.Task[None] | None = None
        # Large agents' HNSW indexes: (agent, embedder) -> (has a valid one, when last checked),
        # the builds running in the background, and when a build last failed.
        self.ann_known: dict[tuple[str, str], tuple[bool, float]] = {}
        self.ann_builds: dict[tuple[str, str], asyncio.Task[None]] = {}
        self.ann_failed: dict[tuple[str, str], float] = {}
        # Index builds and ANALYZE take turns (see ANN_LOCK); an ANALYZE due while a build runs
        # is run by the build when it is done, so that writers never wait for a build.
        self.lock = asyncio.Lock()
        self.analyze_pending = False


async def stop(db: Database) -> None:
    """Stop background maintenance and index builds (before the pool closes)."""
    m = db.maintenance
    if m.settle_task is not None:
        m.settle_task.cancel()
        await asyncio.gather(m.settle_task, return_exceptions=True)
        m.settle_task = None
    builds = [t for t in m.ann_builds.values() if not t.done()]
    for task in builds:
        task.cancel()  # an interrupted build leaves an invalid index; the next one drops it
    await asyncio.gather(*builds, return_exceptions=True)
    m.ann_builds.clear()


async def after_write(
    db: Database,
    records: Sequence[MemoryRecord],
    dims: dict[str, int],
    sizes: dict[str, int],
) -> None:
    """After a write of ``records`` committed (``sizes``: each agent's memories now): start
    the HNSW builds of agents grown past ``ann_min_memories``, and run or schedule the
    maintenance the write made due."""
    m = db.maintenance
    ann_min = db.settings.ann_min_memories
    if ann_min > 0:
        for agent_id, size in sizes.items():
            if size >= ann_min:
                names = {r.memory.embedder for r in records if r.memory.agent_id == agent_id}
                for name in names:
                    start_ann_build(db, agent_id, name, dims[name])
    m.written += len(records)
    m.unmaintained += len(records)
    m.last_write = time.monotonic()
    if m.written >= m.next_analyze:
        m.next_analyze = m.written * ANALYZE_GROWTH
        await analyze(db)
    elif m.unmaintained >= SETTLE_MIN_ROWS and (m.settle_task is None or m.settle_task.done()):
        m.settle_task = asyncio.create_task(settle(db), name="actrone-settle")


async def analyze(db: Database) -> None:
    """Refresh the planner's statistics of the L2 tables, and their visibility maps.

    Right after a bulk load into fresh tables the planner has no statistics and expects one row
    from every step. ``hybrid_search`` itself is protected from that since migration 0005 (it
    plans without nested loops, docs/benchmarks.md); this keeps every other statement's
    estimates current too, without waiting about a minute for autovacuum: ``ANALYZE`` runs after
    the store has written 1,000, 4,000, 16,000, … memories (each step ×4, so the total cost
    stays a small fraction of the writes). It is ``VACUUM (ANALYZE)``: until a page is marked
    all-visible, the index-only candidate scan visits the heap for each of its rows (autovacuum
    gets there within a minute or so). Both measured in docs/notes/benchmarks.md, "Measurements
    behind the code". Neither takes a lock that blocks reads or writes.
    """
    m = db.maintenance
    if any(not t.done() for t in m.ann_builds.values()):
        m.analyze_pending = True
        return
    async with m.lock:
        await vacuum_analyze(db)


async def vacuum_analyze(db: Database) -> None:
    """``VACUUM (ANALYZE)`` the L2 tables; the caller holds :attr:`Maintenance.lock`."""
    m = db.maintenance
    unmaintained = m.unmaintained
    async with db.conn(alone=True) as conn:
        if not db.distributed:
            await conn.execute(db.compose(ANALYZE_L2))
        else:
            slow_start, reset = ANALYZE_L2_CITUS
            await conn.execute(slow_start)
            try:
                await conn.execute(db.compose(ANALYZE_L2))
            finally:
                if not (conn.closed or conn.broken):  # else the pool drops it, setting and all
                    await conn.execute(reset)
    m.unmaintained -= unmaintained


async def settle(db: Database) -> None:
    """Run the maintenance of :func:`analyze` once writes have paused.

    The ×4 schedule leaves up to three quarters of a bulk load unvacuumed (100,000 written:
    the last run was at 64,000), so index-only scans visit the heap for those rows until
    autovacuum gets there, and when it does, its throttled pass over the tables competes
    with the searches for a while. Run once no memory has been written for
    ``SETTLE_SECONDS``, the same ``VACUUM (ANALYZE)`` is short and leaves autovacuum nothing
    to catch up on, which lowers the p99 of searches right after a load (docs/notes/benchmarks.md,
    "Measurements behind the code").
    """
    m = db.maintenance
    try:
        while (wait := m.last_write + m.settle_seconds - time.monotonic()) > 0:
            await asyncio.sleep(wait)
        if m.unmaintained >= SETTLE_MIN_ROWS and db.pool is not None:
            await analyze(db)
    except ActroneError as exc:  # a background task: nobody else would see it
        logger.warning("maintenance after writes failed (autovacuum will do it): %s", exc)


def start_ann_build(db: Database, agent_id: str, embedder: str, dimensions: int) -> None:
    """Build the agent's HNSW index in the background, unless it exists or is being built."""
    m = db.maintenance
    key = (agent_id, embedder)
    known = m.ann_known.get(key)
    running = m.ann_builds.get(key)
    failed = m.ann_failed.get(key)
    if (
        dimensions > ANN_MAX_DIMENSIONS
        or (known is not None and known[0])
        or (running is not None and not running.done())
        or (failed is not None and time.monotonic() - failed < ANN_RETRY_SECONDS)
    ):
        return
    m.ann_builds[key] = asyncio.create_task(
        _build_ann(db, agent_id, embedder, dimensions), name=f"actrone-ann-{agent_id}"
    )


async def wait_for_indexes(db: Database) -> None:
    """Wait until the HNSW index builds started by this store have finished."""
    await asyncio.gather(*list(db.maintenance.ann_builds.values()), return_exceptions=True)


async def _build_ann(db: Database, agent_id: str, embedder: str, dimensions: int) -> None:
    m = db.maintenance
    try:
        async with m.lock:
            await _build_ann_locked(db, agent_id, embedder, dimensions)
            if m.analyze_pending and db.pool is not None:
                m.analyze_pending = False
                await vacuum_analyze(db)
    finally:
        key = (agent_id, embedder)
        if m.ann_builds.get(key) is asyncio.current_task():
            del m.ann_builds[key]


async def _build_ann_locked(db: Database, agent_id: str, embedder: str, dimensions: int) -> None:
    m = db.maintenance
    key = (agent_id, embedder)
    name = ann_index_name(agent_id, embedder)
    lock = f"{db.schema}.ann-build"
    if db.pool is None:
        return
    try:
        # Not through Database.conn(): a build takes minutes, longer than any call's timeout.
        async with db.unbounded_conn() as conn:
            await conn.execute("SET statement_timeout = 0")
            # The graph of 100,000 vectors of 384 dimensions takes ~200 MB; with the default
            # 64 MB the build spills to disk, five times slower (docs/benchmarks.md).
            await conn.execute(f"SET maintenance_work_mem = '{ANN_BUILD_MEMORY}'")
            try:
                cur = await conn.execute(ANN_LOCK, (lock,))
                row = await cur.fetchone()
                if not row or not row[0]:
                    return  # another process is building one; the next write tries again
                try:
                    state = await _ann_state(db, conn, name)
                    if state is False:  # an interrupted build left an invalid index
                        await conn.execute(
                            sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(
                                sql.Identifier(db.schema, name)
                            )
                        )
                    if state is not True:
                        started = time.monotonic()
                        await conn.execute(_ann_ddl(db, name, agent_id, embedder, dimensions))
                        logger.info(
                            "built HNSW index %s for agent %r (%s) in %.1f s",
                            name,
                            agent_id,
                            embedder,
                            time.monotonic() - started,
                        )
                finally:
                    await conn.execute(ANN_UNLOCK, (lock,))
            finally:
                await conn.execute("RESET statement_timeout")
                await conn.execute("RESET maintenance_work_mem")
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # the server's refusal, a lost connection, a pool timeout
        m.ann_failed[key] = time.monotonic()
        logger.warning(
            "could not build the HNSW index of agent %r (%s): %s; searches stay exact",
            agent_id,
            embedder,
            exc,
        )
        return
    m.ann_known[key] = (True, time.monotonic())


async def _ann_state(db: Database, conn: _Conn, name: str) -> bool | None:
    """``True`` for a valid index named ``name``, ``False`` for an invalid one, else None."""
    cur = await conn.execute(ANN_INDEX_STATE, (db.schema, name))
    row = await cur.fetchone()
    return None if row is None else bool(row[0])


def _ann_ddl(
    db: Database, name: str, agent_id: str, embedder: str, dimensions: int
) -> sql.Composed:
    # The one place values are spelled in SQL: a utility statement (CREATE INDEX) takes no
    # bound parameters, and a partial index's predicate is its literals. Searches bind them
    # (statements.ANN_CANDIDATES), unprepared: each plan is made for the bound values, which
    # the planner matches against the predicate.
    return sql.SQL(
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {s}.memories USING hnsw"
        " ((embedding::{vs}.vector({d})) {vs}.vector_ip_ops)"
        " WITH (m = 16, ef_construction = 64) WHERE agent_id = {agent} AND embedder = {emb}"
    ).format(
        name=sql.Identifier(name),
        s=sql.Identifier(db.schema),
        vs=sql.Identifier(db.vector_schema),
        d=sql.Literal(int(dimensions)),
        agent=sql.Literal(agent_id),
        emb=sql.Literal(embedder),
    )


async def ann_dimensions(db: Database, agent_id: str, embedder: str, dimensions: int) -> int | None:
    """The dimension to scan the agent's own HNSW index with, or ``None`` to scan exactly."""
    m = db.maintenance
    if db.settings.ann_min_memories <= 0 or dimensions > ANN_MAX_DIMENSIONS:
        return None
    key = (agent_id, embedder)
    known = m.ann_known.get(key)
    now = time.monotonic()
    if known is None or (not known[0] and now - known[1] > ANN_RECHECK_SECONDS):
        async with db.conn() as conn:
            state = await _ann_state(db, conn, ann_index_name(agent_id, embedder))
        known = (state is True, now)
        if len(m.ann_known) >= 100_000:  # one entry per agent searched: bound it
            m.ann_known.clear()
        m.ann_known[key] = known
    return dimensions if known[0] else None


async def drop_ann_indexes(db: Database, agent_id: str) -> None:
    """Drop the agent's HNSW indexes, whatever process built them."""
    m = db.maintenance
    stopped = [m.ann_builds.pop(k) for k in list(m.ann_builds) if k[0] == agent_id]
    for task in stopped:
        task.cancel()
    await asyncio.gather(*stopped, return_exceptions=True)  # its index is dropped below
    async with db.conn(alone=True) as conn:
        cur = await conn.execute(db.compose(SELECT_ALL_EMBEDDERS))
        embedders = [str(r[0]) for r in await cur.fetchall()]
        for embedder in embedders:
            m.ann_known.pop((agent_id, embedder), None)
            name = ann_index_name(agent_id, embedder)
            if await _ann_state(db, conn, name) is not None:
                await conn.execute(
                    sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(
                        sql.Identifier(db.schema, name)
                    )
                )


def ann_index_name(agent_id: str, embedder: str) -> str:
    """The name of an agent's HNSW index for one embedder (any ids give a valid identifier)."""
    digest = hashlib.sha256(f"{agent_id}\x00{embedder}".encode()).hexdigest()
    return f"ix_ann_{digest[:24]}"
