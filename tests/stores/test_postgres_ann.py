"""Large agents on PostgreSQL: an HNSW index of their own, built in the background, searched.

The threshold is lowered to 20,000 memories of 16 dimensions, so that the tests build real
indexes in seconds (and the planner, which sorts a few thousand rows rather than use an index,
does use this one); everything else is as in production (``CREATE INDEX CONCURRENTLY``, the
partial predicate, the scan settings of the pool's connections).
"""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import AsyncIterator
from dataclasses import replace

import numpy as np
import psycopg
import pytest
from psycopg import sql

from actrone_pg.ranking import RankingParams
from actrone_pg.stores.base import MemoryRecord, pack_hits, stored_tokens
from actrone_pg.stores.memory import InMemoryStore
from actrone_pg.stores.postgres import PostgresSettings, PostgresStore, ann_index_name
from tests.factories import record, request

pytestmark = pytest.mark.postgres

DIM = 16
EMBEDDER = "test-embedder"


def _records(agent: str, n: int, seed: int) -> list[MemoryRecord]:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((8, DIM))
    rows = centres[rng.integers(0, 8, n)] + rng.normal(0.0, 0.6, (n, DIM))
    words = ["tea", "coffee", "garden", "travel", "music", "budget"]
    return [
        record(agent, f"m{i}", f"note {i} {words[i % len(words)]}", rows[i].tolist())
        for i in range(n)
    ]


def _query(seed: int) -> list[float]:
    return np.random.default_rng(seed).standard_normal(DIM).tolist()  # type: ignore[no-any-return]


@pytest.fixture
async def ann_store(postgres_dsn: str, scratch_schema: str) -> AsyncIterator[PostgresStore]:
    store = PostgresStore(
        PostgresSettings(
            postgres_dsn, schema=scratch_schema, pool_max_size=4, ann_min_memories=20_000
        )
    )
    await store.setup()
    yield store
    await store.close()


def _indexes(dsn: str, schema: str) -> dict[str, bool]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT c.relname, i.indisvalid FROM pg_index AS i"
            " JOIN pg_class AS c ON c.oid = i.indexrelid"
            " JOIN pg_namespace AS n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relname LIKE 'ix_ann_%%'",
            (schema,),
        ).fetchall()
    return {str(r[0]): bool(r[1]) for r in rows}


async def _scans(dsn: str, schema: str, name: str, above: int) -> int:
    """The index's scan count once it exceeds ``above`` (backends flush statistics lazily)."""
    scans = 0
    for _ in range(150):
        with psycopg.connect(dsn) as conn:
            row = conn.execute(
                "SELECT idx_scan FROM pg_stat_user_indexes WHERE schemaname = %s"
                " AND indexrelname = %s",
                (schema, name),
            ).fetchone()
        scans = int(row[0]) if row else 0
        if scans > above:
            break
        await asyncio.sleep(0.1)
    return scans


async def test_a_large_agent_is_searched_through_its_own_index(
    ann_store: PostgresStore, postgres_dsn: str, scratch_schema: str
) -> None:
    big, small = _records("big", 24_000, 1), _records("small", 300, 2)
    for start in range(0, 16_000, 4_000):  # nobody has 20,000 memories yet
        await ann_store.upsert_memories(big[start : start + 4_000])
    await ann_store.upsert_memories(small)
    await ann_store.wait_for_indexes()
    assert _indexes(postgres_dsn, scratch_schema) == {}
    for start in range(16_000, 24_000, 4_000):
        await ann_store.upsert_memories(big[start : start + 4_000])
    await ann_store.wait_for_indexes()
    name = ann_index_name("big", EMBEDDER)
    assert _indexes(postgres_dsn, scratch_schema) == {name: True}

    reference = InMemoryStore()
    await reference.upsert_memories(big + small)
    params = RankingParams()
    recalls = []
    for q in range(20):
        req = request("big", "tea garden", _query(100 + q), threshold=0.2, limit=50, params=params)
        got, want = (await ann_store.search(req)).hits, (await reference.search(req)).hits
        want_ids = {h.memory.id for h in want}
        recalls.append(len({h.memory.id for h in got} & want_ids) / max(1, len(want_ids)))
        # ranked exactly over what the index found: admitted, ranks 1..n in every channel
        assert all(h.explain.cosine >= 0.2 - 1e-6 for h in got)
        assert sorted(h.explain.dense_rank for h in got) == list(range(1, len(got) + 1))
        assert sorted(h.explain.recency_rank for h in got) == list(range(1, len(got) + 1))
        packed = await ann_store.search(replace(req, budget=60))
        expected = pack_hits((await ann_store.search(req)).hits, stored_tokens, 60)
        assert [h.memory.id for h in packed.hits] == [h.memory.id for h in expected.hits]
    # The graph differs from build to build (random levels): 0.90–0.96 seen, so the bar sits below.
    assert statistics.fmean(recalls) >= 0.85
    assert await _scans(postgres_dsn, scratch_schema, name, 0) >= 1  # the index was used

    # The small agent has no index and is still scanned exactly: the same answer as the reference.
    req = request("small", "tea", _query(7), threshold=0.2, limit=50)
    got, want = (await ann_store.search(req)).hits, (await reference.search(req)).hits
    assert [h.memory.id for h in got] == [h.memory.id for h in want]

    await ann_store.erase_agent("big")
    assert _indexes(postgres_dsn, scratch_schema) == {}
    assert (await ann_store.search(request("big", "tea", _query(1), threshold=0.2))).hits == []


async def test_an_interrupted_build_is_replaced(
    ann_store: PostgresStore, postgres_dsn: str, scratch_schema: str
) -> None:
    name = ann_index_name("big", EMBEDDER)
    records = _records("big", 21_000, 3)
    await ann_store.upsert_memories(records[:1_000])
    # A failed CREATE INDEX CONCURRENTLY leaves an invalid index behind: make one by that name.
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute(
                sql.SQL("CREATE UNIQUE INDEX CONCURRENTLY {} ON {} (embedder)").format(
                    sql.Identifier(name), sql.Identifier(scratch_schema, "memories")
                )
            )
    assert _indexes(postgres_dsn, scratch_schema) == {name: False}
    for start in range(1_000, 21_000, 5_000):
        await ann_store.upsert_memories(records[start : start + 5_000])
    await ann_store.wait_for_indexes()
    assert _indexes(postgres_dsn, scratch_schema) == {name: True}
    with psycopg.connect(postgres_dsn) as conn:
        row = conn.execute(
            "SELECT am.amname FROM pg_class AS c JOIN pg_am AS am ON am.oid = c.relam"
            " JOIN pg_namespace AS n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relname = %s",
            (scratch_schema, name),
        ).fetchone()
    assert row == ("hnsw",)


async def test_no_index_when_turned_off(postgres_dsn: str, scratch_schema: str) -> None:
    store = PostgresStore(PostgresSettings(postgres_dsn, schema=scratch_schema, ann_min_memories=0))
    await store.setup()
    try:
        await store.upsert_memories(_records("big", 500, 4))
        await store.wait_for_indexes()
        assert _indexes(postgres_dsn, scratch_schema) == {}
    finally:
        await store.close()


async def test_erasing_an_agent_whose_index_is_being_built(
    ann_store: PostgresStore, postgres_dsn: str, scratch_schema: str
) -> None:
    records = _records("big", 21_000, 5)
    for start in range(0, 21_000, 7_000):
        await ann_store.upsert_memories(records[start : start + 7_000])
    await ann_store.erase_agent("big")  # the build started by the last batch is still running
    await ann_store.wait_for_indexes()
    assert _indexes(postgres_dsn, scratch_schema) == {}
    assert await ann_store.count_memories("big") == 0


async def test_closing_during_a_build_leaves_nothing_a_later_store_cannot_repair(
    postgres_dsn: str, scratch_schema: str
) -> None:
    records = _records("big", 21_000, 6)
    store = PostgresStore(
        PostgresSettings(postgres_dsn, schema=scratch_schema, ann_min_memories=20_000)
    )
    await store.setup()
    await store.upsert_memories(records[:20_500])  # starts the build
    await store.close()  # cancels it: at most an invalid index remains
    assert set(_indexes(postgres_dsn, scratch_schema).values()) <= {False, True}
    again = PostgresStore(
        PostgresSettings(postgres_dsn, schema=scratch_schema, ann_min_memories=20_000)
    )
    await again.setup()
    try:
        await again.upsert_memories(records[20_500:])
        await again.wait_for_indexes()
        assert _indexes(postgres_dsn, scratch_schema) == {ann_index_name("big", EMBEDDER): True}
    finally:
        await again.close()
