"""MemoryManager's lifecycle: create() keeps the event loop free, close() closes what it built.

The embeddings server is a real HTTP server on 127.0.0.1 (``http.server`` in a thread); the
store is the real PostgreSQL of the test session.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from actrone_pg import MemoryConfig, MemoryManager
from actrone_pg.embedders.openai import OpenAIEmbedder
from actrone_pg.stores.postgres import PostgresStore

DIMS = 8


class EmbeddingsServer:
    """Answers POST /v1/embeddings with ``DIMS``-dimensional vectors.

    With ``gate`` set, each request waits (up to 10 s) for ``gate`` to be released before it is
    answered, and records whether it was: a test releases it from the event loop.
    """

    def __init__(self) -> None:
        self.gate: threading.Event | None = None
        self.arrived = threading.Event()
        self.released: list[bool] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                server.arrived.set()
                if server.gate is not None:
                    server.released.append(server.gate.wait(10.0))
                data = [
                    {"index": i, "embedding": [float(len(t) % 5 + 1), *([1.0] * (DIMS - 1))]}
                    for i, t in enumerate(body["input"])
                ]
                payload = json.dumps({"object": "list", "data": data}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[EmbeddingsServer]:
    s = EmbeddingsServer()
    yield s
    s.close()


def openai_config(server: EmbeddingsServer, **kw: Any) -> MemoryConfig:
    settings: dict[str, Any] = {
        "backend": "memory",
        "embedding_provider": "openai",
        "embedding_api_url": server.url,
        "embedding_model": "probe-me",
        "relevance_threshold": 0.5,
    }
    return MemoryConfig(**{**settings, **kw})


async def test_create_probes_the_embeddings_server_off_the_event_loop(
    server: EmbeddingsServer,
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
    server: EmbeddingsServer, postgres_dsn: str, postgres_schema: str
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
    assert store._pool is None  # the pool is closed
    assert client.is_closed
    await mm.close()  # twice is harmless


@pytest.mark.postgres
async def test_close_leaves_open_what_the_caller_passed_in(
    server: EmbeddingsServer, store_postgres: PostgresStore
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
