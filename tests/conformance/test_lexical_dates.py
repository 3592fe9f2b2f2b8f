"""``lexical_dates``: a memory's date joins its BM25 terms, alike on every backend.

The rule lives in ``ranking.Analyzer.document_terms``; every store indexes through it. Here:
the terms computed by hand, then each backend (memory, PostgreSQL, Redis + Qdrant, Citus) with
the option on, ranked against the in-memory reference with the option on, filters included,
after updates, deletions, expiry and an erased agent, whose statistics must equal those of a
store that only ever held the final memories.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pytest

from actrone_pg.filters import MemoryFilter
from actrone_pg.models import Memory
from actrone_pg.ranking import RankingParams, analyzer, date_text, query_terms
from actrone_pg.stores.base import MemoryRecord, Store
from actrone_pg.stores.memory import InMemoryStore
from tests.conftest import BACKENDS
from tests.factories import NOW, memory, request

VOCAB = "coffee tea meeting project paris london doctor garden piano budget family cat".split()
MONTHS = "January February March April May June July August September October November December"


def test_date_terms_computed_by_hand() -> None:
    may = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert date_text(may) == "8 May 2023"
    # the day in UTC, whatever zone the datetime carries; a naive one is taken as UTC
    assert date_text(datetime(2023, 5, 8, 22, 30, tzinfo=timezone(timedelta(hours=-5)))) == (
        "9 May 2023"
    )
    assert date_text(datetime(2024, 1, 1, 0, 0)) == "1 January 2024"
    assert [date_text(datetime(2025, m, 1, tzinfo=UTC)).split()[1] for m in range(1, 13)] == (
        MONTHS.split()
    )
    dated, plain = analyzer("english", dates=True), analyzer("english")
    assert (dated.index_name, plain.index_name) == ("english+dates", "english")
    assert dated.document_counts("Cats were running", may) == (
        {"cat": 1, "were": 1, "run": 1, "8": 1, "may": 1, "2023": 1},
        6,
    )
    assert plain.document_counts("Cats were running", may) == ({"cat": 1, "were": 1, "run": 1}, 3)
    assert analyzer("simple", dates=True).document_terms("Cats", may) == [
        "cats",
        "8",
        "may",
        "2023",
    ]
    # only documents: a query's terms are its own
    assert (
        dated.query_terms("cats in May")
        == plain.query_terms("cats in May")
        == [
            "cat",
            "in",
            "may",
        ]
    )


@pytest.fixture(params=BACKENDS)
async def dated(request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    """A fresh, empty store of each backend with ``lexical_dates`` on (its own schema/prefix)."""
    backend = request.param
    if backend == "memory":
        store: Store = InMemoryStore(lexical_dates=True)
        await store.setup()
        yield store
        await store.close()
        return
    if backend == "redis_qdrant":
        from tests.backends.redis_qdrant import isolated_store

        async with isolated_store(lexical_dates=True) as store:
            yield store
        return
    import psycopg
    from psycopg import sql

    from actrone_pg.migrations import migrate
    from actrone_pg.stores.postgres import PostgresSettings, PostgresStore

    # (the _rls backends' row security is not what this suite tests: their plain servers)
    citus = backend.startswith("citus")
    dsn = request.getfixturevalue("citus_dsn" if citus else "postgres_dsn")
    distribute = "citus" if citus else "off"
    schema = f"actrone_d_{uuid.uuid4().hex[:10]}"
    try:
        migrate(dsn, schema, distribute=distribute)
        store = PostgresStore(
            PostgresSettings(
                dsn, schema=schema, pool_max_size=4, distribute=distribute, lexical_dates=True
            )
        )
        await store.setup()
        try:
            yield store
        finally:
            await store.close()
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def _vector(rng: random.Random) -> np.ndarray:
    # components 0 or ±0.5, four of them: unit norm, every cosine a multiple of 0.25 in any
    # float arithmetic, so rankings must match exactly (as in test_parity.py)
    v = np.zeros(16, dtype=np.float32)
    for i in rng.sample(range(16), 4):
        v[i] = rng.choice((-0.5, 0.5))
    return v


def _dataset(rng: random.Random) -> list[MemoryRecord]:
    records = []
    for n in range(150):
        # two years of days, a few memories per day, some just before or after midnight UTC
        day = NOW - timedelta(days=rng.randrange(0, 730))
        created = day.replace(hour=rng.choice([0, 9, 23]), minute=rng.choice([0, 59]))
        text = " ".join(rng.choice(VOCAB) for _ in range(rng.randint(1, 6)))
        if rng.random() < 0.2:  # some turns name a date themselves
            text += f" on {rng.randint(1, 28)} {rng.choice(MONTHS.split())}"
        m = memory(
            rng.choice(["A", "b"]),
            f"m{n}",
            text,
            created_at=created,
            tags=(rng.choice(["work", "home"]),),
        )
        records.append(MemoryRecord(m, _vector(rng)))
    return records


def _queries(rng: random.Random) -> list[str]:
    out = []
    for _ in range(40):
        day = NOW - timedelta(days=rng.randrange(0, 730))
        words = " ".join(rng.choice(VOCAB) for _ in range(rng.randint(0, 2)))
        out.append(
            rng.choice(
                [
                    f"What did I do in {MONTHS.split()[day.month - 1]} {day.year}?",
                    f"{words} on {day.day} {MONTHS.split()[day.month - 1]}",
                    f"{words} in {day.year}",
                    words or "coffee",
                ]
            )
        )
    return out


FILTERS = [
    None,
    MemoryFilter(tags_any=["work"]),
    MemoryFilter(created_after=NOW - timedelta(days=400)),
]


def _ranked(store_hits: list) -> list[tuple[str, int | None, int | None, float | None]]:  # type: ignore[type-arg]
    return [
        (h.memory.id, h.explain.lexical_rank, h.explain.dense_rank, h.explain.bm25)
        for h in store_hits
    ]


async def _rank_all(store: Store, queries: list[str], rng: random.Random) -> list[object]:
    out = []
    for q, query in enumerate(queries):
        for flt in FILTERS:
            req = request(
                "A" if q % 2 else "b",
                query,
                _vector(random.Random(q)).tolist(),
                threshold=-1.0,
                limit=30,
                params=RankingParams(rrf_weights=(1.0, 4.0, 0.1), bm25_b=0.3),
            )
            hits = (await store.search(replace(req, filter=flt))).hits
            out.append(
                [
                    (i, lex, dense, None if b is None else round(b, 9))
                    for i, lex, dense, b in _ranked(hits)
                ]
            )
    return out


async def _write_then_change(store: Store, records: list[MemoryRecord]) -> None:
    """Batch ingest, then updates, deletions, a replacement batch, expiry and an erased agent."""
    for start in range(0, len(records), 40):
        await store.upsert_memories(records[start : start + 40])

    async def build(current: Memory) -> MemoryRecord:
        new = replace(
            current, content=current.content + " piano", version=current.version + 1, valid_from=NOW
        )
        return MemoryRecord(new, _vector(random.Random(current.id)))

    for rec in records[:8]:  # update_memory keeps created_at: the date terms stay
        await store.update_memory(rec.memory.agent_id, rec.memory.id, build)
    for rec in records[8:14]:
        await store.delete_memory(rec.memory.agent_id, rec.memory.id)
    # the same ids again in a batch, with another date: the old date's terms must leave
    moved = [
        MemoryRecord(
            replace(r.memory, created_at=r.memory.created_at - timedelta(days=31)), r.vector
        )
        for r in records[14:20]
    ]
    await store.upsert_memories(moved)
    gone = [
        MemoryRecord(replace(r.memory, expires_at=datetime.now(UTC) - timedelta(hours=1)), r.vector)
        for r in records[20:26]
    ]
    await store.upsert_memories(gone)
    await store.sweep_expired_memories(limit=1000)
    await store.upsert_memories(
        [MemoryRecord(memory("C", "c1", "coffee", created_at=NOW), records[0].vector)]
    )
    await store.erase_agent("C")


def _final(records: list[MemoryRecord]) -> list[MemoryRecord]:
    """What a store holds after :func:`_write_then_change`, written once."""
    out = []
    for i, r in enumerate(records):
        m = r.memory
        if i < 8:
            out.append(
                MemoryRecord(
                    replace(m, content=m.content + " piano", version=m.version + 1, valid_from=NOW),
                    _vector(random.Random(m.id)),
                )
            )
        elif i < 14 or 20 <= i < 26:
            continue
        elif i < 20:
            out.append(
                MemoryRecord(replace(m, created_at=m.created_at - timedelta(days=31)), r.vector)
            )
        else:
            out.append(r)
    return out


async def test_every_backend_ranks_dated_terms_as_the_reference(dated: Store) -> None:
    rng = random.Random("lexical-dates")
    records = _dataset(rng)
    queries = _queries(rng)
    reference = InMemoryStore(lexical_dates=True)
    await _write_then_change(reference, records)
    await _write_then_change(dated, records)
    # exact statistics: the same as a store that only ever held the final memories
    fresh = InMemoryStore(lexical_dates=True)
    await fresh.upsert_memories(_final(records))
    want = await _rank_all(reference, queries, rng)
    assert await _rank_all(fresh, queries, rng) == want
    assert await _rank_all(dated, queries, rng) == want
    # the dates are really ranked: without them the lexical ranks differ
    undated = InMemoryStore(lexical_dates=False)
    await undated.upsert_memories(_final(records))
    assert await _rank_all(undated, queries, rng) != want
    # ... and they are terms only: the stored content is the memory's own
    stored = await dated.get_memory(records[30].memory.agent_id, records[30].memory.id)
    assert stored is not None and stored.content == records[30].memory.content


async def test_a_query_naming_the_month_meets_the_memories_of_that_month(dated: Store) -> None:
    v = [1.0] + [0.0] * 15
    may, june = datetime(2023, 5, 8, 12, tzinfo=UTC), datetime(2023, 6, 2, 12, tzinfo=UTC)
    await dated.upsert_memories(
        [
            MemoryRecord(
                memory("A", "may", "we painted the lake", created_at=may), np.array(v, np.float32)
            ),
            MemoryRecord(
                memory("A", "june", "we painted the lake", created_at=june), np.array(v, np.float32)
            ),
        ]
    )
    req = request("A", "what did we paint in May 2023", v)
    assert query_terms(req.query) == list(req.terms)
    hits = {h.memory.id: h.explain for h in (await dated.search(req)).hits}
    # both share "we", "paint" and "2023"; only the May memory holds "may": it ranks first
    # lexically (the June one, newer, still comes first in dense and recency ties)
    assert (hits["may"].lexical_rank, hits["june"].lexical_rank) == (1, 2)
    assert hits["may"].bm25 > hits["june"].bm25 > 0
