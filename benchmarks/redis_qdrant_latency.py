"""retrieve_context latency of the Redis + Qdrant store (query embedding excluded).

Usage::

    python benchmarks/redis_qdrant_latency.py [--sizes 2000 10000] [--queries 200]

Redis comes from ``ACTRONE_REDIS_URL`` (default ``redis://127.0.0.1:6379``); Qdrant from
``ACTRONE_QDRANT_URL`` (default ``:memory:``, qdrant-client's local mode, which scans with numpy in
this process; a real server behaves differently). Each size gets a fresh key and collection
prefix, one measured agent holding N memories and a neighbour agent holding N/4 (so the tenant
filter has something to exclude). "excl. Qdrant query" subtracts the time spent inside
qdrant-client's ``query_points`` (local mode: a Python scan of the collection), leaving the
store's own work (Redis, exact cosines, BM25, ranking) and the manager's. Vectors are
384-dimensional, seeded from the text: the "embedder" costs microseconds and every query vector
is cached before timing starts. The in-memory reference store runs the same workload for
comparison.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import statistics
import time
import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np

from actrone_pg import MemoryConfig, MemoryManager
from actrone_pg.stores.memory import InMemoryStore

DIM = 384
WORDS = (
    "peanut allergy hiking alps cat miso vegetarian coffee tea python rust garden piano "
    "bicycle paris tokyo budget meeting deadline birthday doctor dentist recipe soup"
).split()


class SeededEmbedder:
    """A 384-dimensional vector seeded from the text's hash: fast and deterministic."""

    name = "seeded-384"
    dimensions = DIM
    relevance_threshold: float | None = None

    async def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        out = np.empty((len(texts), DIM), dtype=np.float32)
        for i, t in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(t.encode(), digest_size=8).digest(), "little")
            out[i] = np.random.default_rng(seed).standard_normal(DIM)
        return out


def texts(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [f"{i} " + " ".join(rng.choice(WORDS, int(rng.integers(4, 12)))) for i in range(n)]


def time_qdrant_queries(mm: MemoryManager) -> list[float]:
    """Record the time of every Qdrant query_points call (ms) the store makes."""
    spent: list[float] = []
    client = getattr(mm.store, "_qdrant", None)
    if client is None:
        return spent
    real = client.query_points

    async def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await real(*args, **kwargs)
        finally:
            spent.append((time.perf_counter() - t0) * 1000.0)

    client.query_points = timed
    return spent


async def measure(
    mm: MemoryManager, queries: list[str], agent: str
) -> tuple[list[float], list[float], float]:
    """Latencies (ms), latencies minus the Qdrant query, and the mean candidate count."""
    for q in queries:  # warm the query-vector cache: embedding is excluded from the timings
        await mm.retrieve_context(agent, "s", q, 4000)
    spent = time_qdrant_queries(mm)
    lat, rest, cands = [], [], []
    for q in queries:
        spent.clear()
        t0 = time.perf_counter()
        ctx = await mm.retrieve_context(agent, "s", q, 4000)
        lat.append((time.perf_counter() - t0) * 1000.0)
        rest.append(lat[-1] - sum(spent))
        cands.append(ctx.candidates_considered)
    return lat, rest, statistics.fmean(cands)


def pct(values: list[float], p: float) -> float:
    return float(np.percentile(np.asarray(values), p))


async def run_size(n: int, n_queries: int, threshold: float) -> list[str]:
    emb = SeededEmbedder()
    prefix = "bench" + uuid.uuid4().hex[:10]
    common: dict[str, Any] = {"relevance_threshold": threshold, "query_cache_size": 4 * n_queries}
    cfg = MemoryConfig(
        backend="redis_qdrant",
        redis_url=os.environ.get("ACTRONE_REDIS_URL", "redis://127.0.0.1:6379"),
        qdrant_url=os.environ.get("ACTRONE_QDRANT_URL", ":memory:"),
        qdrant_collection_prefix=prefix,
        **common,
    )
    rows = []
    rq = await MemoryManager.create(cfg, embedder=emb)
    ref = await MemoryManager.create(MemoryConfig(**common), embedder=emb, store=InMemoryStore())
    try:
        corpus = texts(n, seed=n)
        neighbour = texts(n // 4, seed=n + 1)
        queries = texts(n_queries, seed=7)
        for name, mm in (("redis_qdrant", rq), ("memory", ref)):
            t0 = time.perf_counter()
            await mm.inject_memories("agent", corpus)
            ingest_s = time.perf_counter() - t0
            await mm.inject_memories("neighbour", neighbour)
            for i in range(50):
                await mm.store_turn("agent", "s", f"question {i}", f"answer {i}")
            lat, rest, cands = await measure(mm, queries, "agent")
            rows.append(
                f"| {name:<12} | {n:>8} | {pct(lat, 50):7.2f} | {pct(lat, 99):7.2f} | "
                f"{pct(rest, 50):7.2f} | {pct(rest, 99):7.2f} | {cands:10.0f} | "
                f"{n / ingest_s:8.0f} |"
            )
        await rq.erase_agent("agent")
        await rq.erase_agent("neighbour")
    finally:
        await rq.close()
        await ref.close()
        import redis.asyncio as aioredis

        r = aioredis.Redis.from_url(cfg.redis_url)
        keys = [k async for k in r.scan_iter(match=f"{prefix}:*")]
        if keys:
            await r.delete(*keys)
        await r.aclose()
    return rows


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 10000])
    parser.add_argument("--queries", type=int, default=200)
    # Random 384-d unit vectors have cosines ~ N(0, 0.051): 0.05 admits about 16% of memories,
    # so the 500-candidate cap binds at 10,000 memories and not at 2,000.
    parser.add_argument("--threshold", type=float, default=0.05)
    args = parser.parse_args()
    print(
        f"retrieve_context, {args.queries} queries, budget 4000, 384 dims, "
        f"threshold {args.threshold}, qdrant={os.environ.get('ACTRONE_QDRANT_URL', ':memory:')}"
    )
    print(
        "| backend      | memories |  p50 ms |  p99 ms | p50 excl. Qdrant query | p99 excl. "
        "| candidates | ingest/s |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for n in args.sizes:
        for row in await run_size(n, args.queries, args.threshold):
            print(row)


if __name__ == "__main__":
    asyncio.run(main())
