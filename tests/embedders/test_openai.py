"""OpenAIEmbedder against a real HTTP server on 127.0.0.1 (``http.server`` in a thread).

The server replays a script of responses and records every request, so retries, headers and
payloads are checked on the wire rather than through a mocked client.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from actrone_pg import EmbedderError, MemoryConfig, MemoryManager
from actrone_pg.embedders import create_embedder
from actrone_pg.embedders.openai import OpenAIEmbedder, embeddings_url
from tests.helpers import FakeServer, vector_for


@pytest.fixture
def server() -> Iterator[FakeServer]:
    s = FakeServer()
    yield s
    s.close()


def make(server: FakeServer, **kw: Any) -> OpenAIEmbedder:
    args: dict[str, Any] = {
        "model": "test-model",
        "dimensions": 8,
        "api_url": server.url,
        "api_key": "sk-test",
        "backoff": 0.01,
    }
    args.update(kw)
    return OpenAIEmbedder(**args)


async def test_vectors_come_back_in_order_with_the_key_and_model(server: FakeServer) -> None:
    emb = make(server)
    out = await emb.embed_batch(["alpha", "beta", "gamma"])
    assert out.shape == (3, 8)
    assert np.array_equal(out, [vector_for(t, 8) for t in ("alpha", "beta", "gamma")])
    (req,) = server.requests
    assert req["path"] == "/v1/embeddings"
    assert req["auth"] == "Bearer sk-test"
    assert req["body"] == {"model": "test-model", "input": ["alpha", "beta", "gamma"]}
    assert emb.name == "openai:test-model:8"
    assert emb.relevance_threshold is None
    await emb.aclose()


async def test_a_transient_503_is_retried(server: FakeServer) -> None:
    server.script = [(503, {})]
    emb = make(server)
    out = await emb.embed_batch(["x"])
    assert np.array_equal(out[0], vector_for("x", 8))
    assert len(server.requests) == 2
    await emb.aclose()


async def test_429_with_retry_after_is_retried(server: FakeServer) -> None:
    server.script = [(429, {"Retry-After": "0"}), (502, {})]
    emb = make(server)
    await emb.embed_batch(["x"])
    assert len(server.requests) == 3
    await emb.aclose()


async def test_retries_give_up_with_a_clear_error(server: FakeServer) -> None:
    server.script = [(503, {})] * 3
    emb = make(server, max_retries=2)
    with pytest.raises(EmbedderError, match=r"HTTP 503 3 times: scripted 503"):
        await emb.embed_batch(["x"])
    assert len(server.requests) == 3
    await emb.aclose()


async def test_401_fails_at_once_naming_the_key_setting(server: FakeServer) -> None:
    server.script = [(401, {})]
    emb = make(server)
    with pytest.raises(EmbedderError, match="ACTRONE_EMBEDDING_API_KEY") as info:
        await emb.embed_batch(["x"])
    assert "HTTP 401" in str(info.value)
    assert len(server.requests) == 1
    await emb.aclose()


async def test_unreachable_server_is_an_embedder_error() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    emb = OpenAIEmbedder(
        model="m", dimensions=4, api_url=f"http://127.0.0.1:{port}", max_retries=1, backoff=0
    )
    with pytest.raises(EmbedderError, match="unreachable after 2 attempts"):
        await emb.embed_batch(["x"])


async def test_wrong_dimensions_from_the_server_are_reported(server: FakeServer) -> None:
    emb = make(server, dimensions=5)
    with pytest.raises(EmbedderError, match="embedding_dimensions"):
        await emb.embed_batch(["x"])
    await emb.aclose()


def test_url_forms() -> None:
    assert embeddings_url("http://h:1") == "http://h:1/v1/embeddings"
    assert embeddings_url("http://h:1/v1/") == "http://h:1/v1/embeddings"
    assert embeddings_url("http://h:1/v1/embeddings") == "http://h:1/v1/embeddings"


async def test_through_the_config_and_the_manager(server: FakeServer) -> None:
    cfg = MemoryConfig(
        backend="memory",
        embedding_provider="openai",
        embedding_api_url=server.url,
        embedding_api_key="sk-cfg",
        embedding_model="my-model",
        relevance_threshold=0.5,
    )
    emb = create_embedder(cfg)  # unknown model, no dimensions: one probe request
    assert emb.dimensions == 8 and emb.name == "openai:my-model:8"
    assert server.requests[0]["body"]["input"] == ["dimension probe"]
    async with await MemoryManager.create(cfg, embedder=emb) as mm:
        mid = await mm.inject_memory("a", "alpha beta")
        hits = await mm.search_memories("a", "alpha beta")
        assert [h.id for h in hits] == [mid]
    assert all(r["auth"] == "Bearer sk-cfg" for r in server.requests)
    # With embedding_dimensions set, it is sent to the server and no probe is made.
    before = len(server.requests)
    sized = create_embedder(cfg.replace(embedding_dimensions=6))
    assert len(server.requests) == before
    out = await sized.embed_batch(["z"])
    assert out.shape == (1, 6) and server.requests[-1]["body"]["dimensions"] == 6
