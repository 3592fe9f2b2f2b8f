"""MemoryManager's lifecycle: create() keeps the event loop free, close() closes what it built.

The embeddings server is a real HTTP server on 127.0.0.1 (``tests.helpers.FakeServer``); the
store is the real PostgreSQL of the test session.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from actrone_pg import MemoryConfig, MemoryManager
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
