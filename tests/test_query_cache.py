"""The manager's query-embedding cache: repeated queries skip inference (bounded, LRU)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from actrone_pg import MemoryConfig, MemoryManager
from actrone_pg.embedders import HashingEmbedder


class CountingEmbedder(HashingEmbedder):
    """The hashing embedder, counting every text it embeds."""

    def __init__(self) -> None:
        super().__init__()
        self.embedded: list[str] = []

    async def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        self.embedded.extend(texts)
        return await super().embed_batch(texts)


async def test_repeated_queries_skip_inference() -> None:
    emb = CountingEmbedder()
    cfg = MemoryConfig(backend="memory", query_cache_size=2)
    async with await MemoryManager.create(cfg, embedder=emb) as mm:
        await mm.inject_memory("a", "The user likes jazz")
        emb.embedded.clear()
        for _ in range(3):
            await mm.search_memories("a", "jazz")
            await mm.retrieve_context("a", "s", "jazz", token_budget=100)
        assert emb.embedded == ["jazz"]
        # LRU of 2: "b" and "c" push "jazz" out; it is embedded again, "c" is not.
        for q in ("b", "c", "jazz", "c"):
            await mm.search_memories("a", q)
        assert emb.embedded == ["jazz", "b", "c", "jazz"]
