"""Latency of the Redis store's ``append_turn`` (one Lua script per turn).

Usage::

    python benchmarks/redis_append_turn.py [--turns 4000]

Redis comes from ``ACTRONE_REDIS_URL`` (default ``redis://127.0.0.1:6379``); Qdrant is not used
(local mode in memory). 50 agents, 200 sessions, turns of about 40 tokens; the first 500 calls
warm up and are not counted. Every key the run wrote is deleted afterwards. Run it at two
commits to compare what a change to the session scripts costs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import uuid
from datetime import UTC, datetime

from actrone_pg.models import Turn
from actrone_pg.stores.redis_qdrant import RedisQdrantSettings, RedisQdrantStore

WARMUP = 500


async def measure(turns: int) -> list[float]:
    prefix = "bench" + uuid.uuid4().hex[:12]
    url = os.environ.get("ACTRONE_REDIS_URL", "redis://127.0.0.1:6379")
    store = RedisQdrantStore(
        RedisQdrantSettings(redis_url=url, qdrant_url=":memory:", prefix=prefix)
    )
    await store.setup()
    latencies: list[float] = []
    try:
        for i in range(turns + WARMUP):
            turn = Turn(
                id=f"t{i}",
                agent_id=f"a{i % 50}",
                session_id=f"s{i % 200}",
                user_message="hello " * 20,
                assistant_message="world " * 20,
                tool_results=None,
                created_at=datetime.now(UTC),
                token_count=40,
            )
            started = time.perf_counter()
            await store.append_turn(turn, max_turns=50, ttl_seconds=3600.0)
            latencies.append((time.perf_counter() - started) * 1000.0)
    finally:
        client = store.servers.redis()
        # The prefix is ours and made of [a-z0-9]: safe as a SCAN pattern.
        keys = [k async for k in client.scan_iter(match=f"{prefix}:*", count=1000)]
        if keys:
            await client.delete(*keys)
        await store.close()
    return sorted(latencies[WARMUP:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=4000)
    args = parser.parse_args()
    lat = asyncio.run(measure(args.turns))
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
    print(f"append_turn ({len(lat)} turns)  p50 {statistics.median(lat):.3f} ms  p99 {p99:.3f} ms")


if __name__ == "__main__":
    main()
