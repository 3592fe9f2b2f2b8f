"""MemoryManager's lifecycle: create() keeps the event loop free, close() closes what it built.

The embeddings server is a real HTTP server on 127.0.0.1 (``tests.helpers.FakeServer``); the
store is the real PostgreSQL of the test session.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest

from actrone_pg import MemoryConfig, MemoryManager
from actrone_pg._manager import consolidating
from actrone_pg.embedders.openai import OpenAIEmbedder
from actrone_pg.stores.postgres import PostgresStore
from tests.helpers import FakeServer

DIMS = 8


@pytest.fixture
def server() -> Iterator[FakeServer]:
    s = FakeServer(dims=DIMS)
    yield s
    s.close()


def openai_config(server: FakeServer, **kw: Any) -> MemoryConfig:
    settings: dict[str, Any] = {
        "backend": "memory",
        "embedding_provider": "openai",
        "embedding_api_url": server.url,
        "embedding_model": "probe-me",
        "relevance_threshold": 0.5,
    }
    return MemoryConfig(**{**settings, **kw})


async def test_create_probes_the_embeddings_server_off_the_event_loop(
    server: FakeServer,
) -> None:
    # No embedding_dimensions: create() asks the server (a blocking HTTP call). The server holds
    # its answer until a task on this event loop releases it, which can only happen if create()
    # is not blocking the loop meanwhile.
    server.gate = threading.Event()
    creating = asyncio.create_task(MemoryManager.create(openai_config(server)))
    while not server.arrived.is_set():
        await asyncio.sleep(0.01)
    server.gate.set()
    mm = await creating
    try:
        assert server.released == [True]
        assert mm.embedder.dimensions == DIMS
    finally:
        await mm.close()


@pytest.mark.postgres
async def test_close_closes_the_store_and_embedder_it_built(
    server: FakeServer, postgres_dsn: str, postgres_schema: str
) -> None:
    config = openai_config(
        server,
        embedding_dimensions=DIMS,
        backend="postgres",
        postgres_dsn=postgres_dsn,
        postgres_schema=postgres_schema,
    )
    mm = await MemoryManager.create(config)
    await mm.inject_memory("lifecycle-built", "a memory")  # the embedder opens its HTTP client
    store, embedder = mm.store, mm.embedder
    assert isinstance(store, PostgresStore) and isinstance(embedder, OpenAIEmbedder)
    client = embedder._client
    assert client is not None and not client.is_closed
    await mm.erase_agent("lifecycle-built")
    await mm.close()
    assert store.db.pool is None  # the pool is closed
    assert client.is_closed
    await mm.close()  # twice is harmless


@pytest.mark.postgres
async def test_close_leaves_open_what_the_caller_passed_in(
    server: FakeServer, store_postgres: PostgresStore
) -> None:
    embedder = OpenAIEmbedder(model="given", dimensions=DIMS, api_url=server.url)
    async with await MemoryManager.create(
        openai_config(server), store=store_postgres, embedder=embedder
    ) as mm:
        await mm.inject_memory("lifecycle-given", "a memory")
    assert mm.store is store_postgres
    # Both still work after the manager has closed.
    assert await store_postgres.count_memories("lifecycle-given") == 1
    client = embedder._client
    assert client is not None and not client.is_closed
    assert (await embedder.embed_batch(["still open"])).shape == (1, DIMS)
    await embedder.aclose()


# -- bounded state (spec §8): nothing grows with the sessions or managers a process has seen --


def _bookkeeping(mm: MemoryManager) -> dict[str, int]:
    c = mm._consolidation
    return {
        "new_turns": len(c._new_turns),
        "not_before": len(c._not_before),
        "live_until": len(c._live_until),
    }


async def test_clear_and_sweep_release_a_sessions_bookkeeping() -> None:
    # Before: 50,000 sessions stored and cleared left 50,000 entries (issue 38).
    cfg = MemoryConfig(backend="memory", embedding_provider="hashing", session_ttl_hours=1.0)
    async with await MemoryManager.create(cfg) as mm:
        for i in range(300):
            await mm.store_turn("agent", f"s{i}", "hello", "hi")
        assert _bookkeeping(mm) == {"new_turns": 300, "not_before": 0, "live_until": 300}
        for i in range(300):
            await mm.clear_session("agent", f"s{i}")
        assert _bookkeeping(mm) == {"new_turns": 0, "not_before": 0, "live_until": 0}
    short = MemoryConfig(
        backend="memory", embedding_provider="hashing", session_ttl_hours=0.2 / 3600
    )
    async with await MemoryManager.create(short) as mm:
        for i in range(20):
            await mm.store_turn("agent", f"s{i}", "I like green tea", "Noted.")
        await asyncio.sleep(0.4)
        assert await mm.sweep_expired_sessions() == 20
        assert _bookkeeping(mm) == {"new_turns": 0, "not_before": 0, "live_until": 0}


async def test_sessions_that_expire_elsewhere_are_forgotten(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Sessions another process sweeps (or nobody does) leave this manager's bookkeeping once it
    # has grown past a bound: it holds the live sessions, not every one it has seen.
    monkeypatch.setattr(consolidating, "_PRUNE_AT_LEAST", 8)
    cfg = MemoryConfig(backend="memory", embedding_provider="hashing", session_ttl_hours=0.2 / 3600)
    async with await MemoryManager.create(cfg) as mm:
        for i in range(20):
            await mm.store_turn("agent", f"old{i}", "hello", "hi")
        await asyncio.sleep(0.4)
        for i in range(20):
            await mm.store_turn("agent", f"new{i}", "hello", "hi")
        # Pruned at 32 entries (20 expired, 12 live), then 8 more: the 20 live ones.
        assert _bookkeeping(mm) == {"new_turns": 20, "not_before": 0, "live_until": 20}
        assert all(key[1].startswith("new") for key in mm._consolidation._new_turns)


async def _traced_growth(config: MemoryConfig, cycles: int, *, at_once: int = 1) -> int:
    """Bytes traced by tracemalloc that ``cycles`` create/close cycles of a manager leave,
    ``at_once`` of them running side by side (each cycle its own manager, as a web service
    serving several requests would make them)."""

    async def one_by_one(n: int) -> None:
        for _ in range(n):
            mm = await MemoryManager.create(config)
            await mm.close()

    async def cycle(n: int) -> None:
        await asyncio.gather(*(one_by_one(n // at_once) for _ in range(at_once)))

    await cycle(50)  # caches filled, modules imported
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        await cycle(cycles)
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    return sum(d.size_diff for d in after.compare_to(before, "filename"))


# Before the fix, each manager's meter and histograms stayed with OpenTelemetry's global proxy
# provider: about 1.5 KB a cycle, 2.2 MB over 1,500. What is left is noise (a few KB).
FLAT_BYTES = 64 * 1024


async def test_creating_and_closing_managers_leaves_memory_flat() -> None:
    cfg = MemoryConfig(backend="memory", embedding_provider="hashing")
    grown = await _traced_growth(cfg, 1500)
    assert grown < FLAT_BYTES, grown


@pytest.mark.postgres
@pytest.mark.slow
async def test_creating_and_closing_postgres_managers_leaves_memory_flat(
    postgres_dsn: str, postgres_schema: str
) -> None:
    cfg = MemoryConfig(
        backend="postgres",
        embedding_provider="hashing",
        postgres_dsn=postgres_dsn,
        postgres_schema=postgres_schema,
        postgres_pool_min_size=1,
    )
    # Each cycle opens a pool and checks the schema: about 50 ms, most of it waiting for the
    # server's connections, so 8 cycles run side by side (1,500 in about 50 s on a busy 2-core
    # machine, against about 100 s one by one). Before the fix each cycle left ~7.5 KB (the
    # meter, and pgvector's adapter classes per store): 11 MB over 1,500; the bound (64 KB) is
    # 44 bytes a cycle.
    grown = await _traced_growth(cfg, 1500, at_once=8)
    assert grown < FLAT_BYTES, grown
