"""Test doubles that are real implementations of the protocols, just simple ones."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from actrone_pg.embedders import HashingEmbedder

if TYPE_CHECKING:
    from actrone_pg.models import Explain


class FixedEmbedder:
    """Returns the vector registered for each text; unknown texts fall back to hashing."""

    def __init__(
        self,
        vectors: Mapping[str, Sequence[float]] | None = None,
        *,
        dimensions: int = 4,
        relevance_threshold: float | None = None,
        name: str = "fixed",
        delay: float = 0.0,
    ) -> None:
        self.vectors = dict(vectors or {})
        self.dimensions = dimensions
        self.relevance_threshold = relevance_threshold
        self.name = name
        self.delay = delay
        self.calls: list[list[str]] = []
        self._fallback = HashingEmbedder(dimensions=max(8, dimensions))

    async def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        if self.delay:
            await asyncio.sleep(self.delay)
        out = []
        for t in texts:
            if t in self.vectors:
                out.append(list(map(float, self.vectors[t])))
            else:
                v = self._fallback.embed_one(t)[: self.dimensions].astype(float)
                v[-1] += 0.01  # never all zeros after truncation
                out.append(v.tolist())
        return out


class ScoreByKeywordReranker:
    """Scores a text by how many times it contains ``keyword``; records what it saw."""

    def __init__(self, keyword: str) -> None:
        self.keyword = keyword
        self.seen: list[list[str]] = []

    async def score(self, query: str, texts: Sequence[str]) -> list[float]:
        self.seen.append(list(texts))
        return [float(t.count(self.keyword)) for t in texts]


class SlowStore:
    """Wraps a store and delays its L1 read, to show that L1 and L2 overlap. It reads them in
    two calls, whatever the store it wraps (no ``fetch_context``, which would skip the delay)."""

    fetch_context = None  # not a ContextStore (typing.Protocol reads a None member so)

    def __init__(self, inner: Any, delay: float) -> None:
        self._inner = inner
        self.delay = delay
        self.backend = inner.backend

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def recent_turns(self, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(self.delay)
        return await self._inner.recent_turns(*args, **kwargs)


def np_unit(v: Sequence[float]) -> np.ndarray:
    a = np.asarray(v, dtype=np.float64)
    return a / np.linalg.norm(a)


def vector_for(text: str, dims: int) -> list[float]:
    """The server's deterministic 'embedding': character counts folded into ``dims`` slots."""
    v = [0.0] * dims
    for i, ch in enumerate(text):
        v[(ord(ch) + i) % dims] += 1.0
    return v


class FakeServer:
    """An OpenAI-compatible embeddings server on 127.0.0.1 (``http.server`` in a thread).

    Answers POST /v1/embeddings; ``script`` holds (status, headers) to answer first. With ``gate``
    set, each request waits (up to 10 s) for the gate before it is answered, and ``released``
    records whether it was opened in time; ``arrived`` is set once a request has come in.
    """

    def __init__(self, dims: int = 8) -> None:
        self.dims = dims
        self.script: list[tuple[int, dict[str, str]]] = []
        self.requests: list[dict[str, Any]] = []
        self.gate: threading.Event | None = None
        self.arrived = threading.Event()
        self.released: list[bool] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length))
                server.requests.append(
                    {"path": self.path, "auth": self.headers.get("Authorization"), "body": body}
                )
                server.arrived.set()
                if server.gate is not None:
                    server.released.append(server.gate.wait(10.0))
                if server.script:
                    status, headers = server.script.pop(0)
                    payload = json.dumps({"error": {"message": f"scripted {status}"}}).encode()
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                else:
                    status = 200
                    inputs = body["input"]
                    dims = body.get("dimensions", server.dims)
                    # Reversed, with indexes: the client must put them back in order.
                    data = [
                        {"object": "embedding", "index": i, "embedding": vector_for(t, dims)}
                        for i, t in enumerate(inputs)
                    ][::-1]
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


def assert_same_explain(got: Explain | None, want: Explain | None) -> None:
    """Two hits ranked alike: the same ranks in every channel, BM25 and fused scores equal but
    for the last bits of their summation order (SQL and numpy sum in the same order, yet may
    round differently)."""
    assert got is not None and want is not None
    assert (got.dense_rank, got.lexical_rank, got.recency_rank) == (
        want.dense_rank,
        want.lexical_rank,
        want.recency_rank,
    )
    assert (got.bm25 is None) == (want.bm25 is None)
    if want.bm25 is not None:
        assert got.bm25 == pytest.approx(want.bm25, rel=1e-9)
    assert got.fused_score == pytest.approx(want.fused_score, rel=1e-9)


def filter_examples() -> dict[str, Any]:
    """One value of each built-in filter key, as ``parse_filters`` returns it: what the statement
    tests compose every key's condition with. A new key adds its value here."""
    from datetime import UTC, datetime

    when = datetime(2026, 5, 1, tzinfo=UTC)
    return {
        "tags_any": ("tag-a", "tag-b"),
        "tags_all": ("tag-c",),
        "content_types": ("fact",),
        "session_id": "session-5d2b",
        "created_after": when,
        "created_before": when,
        "min_importance": 0.25,
        "metadata": {"lang": "pt"},
    }


async def assert_filtered_search_is_the_subsets(
    mm: Any, ref: Any, query: str, filters: Mapping[str, Any]
) -> list[Any]:
    """``mm``'s search with ``filters`` gives the hits, scores and ranks of ``ref``'s unfiltered
    search (``ref`` holds only the matching memories); returns ``ref``'s hits."""
    got = await mm.search_memories("agent", query, limit=50, explain=True, filters=filters)
    want = await ref.search_memories("agent", query, limit=50, explain=True)
    assert [m.id for m in got] == [m.id for m in want], query
    for g, w in zip(got, want, strict=True):
        assert_same_explain(g.explain, w.explain)
    return list(want)
