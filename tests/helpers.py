"""Test doubles that are real implementations of the protocols, just simple ones."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from actrone_pg.embedders import HashingEmbedder


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
    """Wraps a store and delays its L1 read, to show that L1 and L2 overlap."""

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
