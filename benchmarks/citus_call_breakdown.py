"""Where a Citus ``retrieve_context`` call's time goes, beside one server, same data, one run.

Four ways to run the same call (one agent, the statement the store sends, its values bound),
each timed ``--calls`` times, alternating, p50 in milliseconds:

- ``retrieve()`` on one embedded server (the single server's store: hybrid_search inside);
- ``agent_retrieve()`` on that server (the distributed store's function, on plain tables);
- ``agent_retrieve()`` called on the worker holding the agent's shards (Citus plans each of its
  statements there, against the local shards);
- ``agent_retrieve()`` through the coordinator (delegated to that worker: one more hop).

    python benchmarks/citus_call_breakdown.py [--agents 4] [--per-agent 1000] [--calls 100]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
from pgvector.psycopg import register_vector

from actrone_pg import MemoryConfig, MemoryManager
from actrone_pg._embedded import temporary_server
from actrone_pg.embedders import HashingEmbedder

WORDS = "apple river stone cloud garden lamp violin harbour candle meadow copper forest".split()


async def _load_and_capture(dsn: str, agents: list[str], per_agent: int) -> tuple[Any, Any]:
    """Ingest the same memories, then one retrieve_context: the statement it sent."""
    cfg = MemoryConfig(
        backend="postgres",
        postgres_dsn=dsn,
        postgres_schema="actrone_breakdown",
        embedding_provider="hashing",
        relevance_threshold=0.05,
    )
    mm = await MemoryManager.create(cfg, embedder=HashingEmbedder(dimensions=384))
    rng = random.Random(5)
    try:
        for agent in agents:
            items = [{"content": " ".join(rng.choices(WORDS, k=12))} for _ in range(per_agent)]
            for i in range(0, per_agent, 100):
                await mm.inject_memories(agent, items[i : i + 100])
        store: Any = mm.store
        calls: list[tuple[Any, Any]] = []
        fetch = store.db.fetch

        async def spy(conn: Any, statement: Any, params: Any, **kw: Any) -> Any:
            calls.append((statement, params))
            return await fetch(conn, statement, params, **kw)

        store.db.fetch = spy
        await mm.retrieve_context(agents[0], "s", "river stone garden", 2000)
        return calls[-1]
    finally:
        await mm.close()


def _timed(dsn: str, statement: Any, params: Any, calls: int) -> list[float]:
    out = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        register_vector(conn)
        for _ in range(calls):
            started = time.perf_counter()
            conn.cursor(binary=True).execute(statement, params).fetchall()
            out.append((time.perf_counter() - started) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=4)
    parser.add_argument("--per-agent", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=100)
    args = parser.parse_args()
    agents = [f"agent-{i}" for i in range(args.agents)]
    with temporary_server(prefix="actrone-breakdown-") as single:
        sys.path.insert(0, str(Path(__file__).resolve().parent))  # loaded by path in the tests
        from citus_cluster import CitusCluster

        cluster = CitusCluster(2, shard_count=32, extra_conf="")
        try:
            one = asyncio.run(_load_and_capture(single, agents, args.per_agent))
            dist = asyncio.run(_load_and_capture(cluster.dsn, agents, args.per_agent))
            worker = cluster.worker_of("actrone_breakdown", agents[0])
            worker_dsn = f"postgresql://postgres@127.0.0.1:{worker}/postgres"
            ways = {
                "retrieve() on one server": (single, *one),
                "agent_retrieve() on one server": (single, *dist),
                "agent_retrieve() on the worker": (worker_dsn, *dist),
                "agent_retrieve() via the coordinator": (cluster.dsn, *dist),
            }
            for dsn, statement, params in ways.values():  # warm: plans, caches
                _timed(dsn, statement, params, 10)
            times: dict[str, list[float]] = {name: [] for name in ways}
            for _ in range(args.calls // 10):
                for name, (dsn, statement, params) in ways.items():
                    times[name] += _timed(dsn, statement, params, 10)
        finally:
            cluster.close()
    print(f"{args.agents} agents x {args.per_agent} memories, 384 dimensions, {args.calls} calls")
    print("| call | p50 (ms) | mean (ms) |")
    print("| --- | ---: | ---: |")
    for name, values in times.items():
        print(f"| {name} | {statistics.median(values):.2f} | {statistics.mean(values):.2f} |")


if __name__ == "__main__":
    main()
