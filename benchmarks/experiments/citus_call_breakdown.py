"""Where a Citus ``retrieve_context`` call's time goes, beside one server, same data, one run.

The store's one read is one call of ``retrieve()`` on every server (docs/postgres.md, "One read
path"). Three ways to run the same call (one agent, the statement the store sends, its values
bound), each timed ``--calls`` times, alternating in blocks of 10, p50 and mean in
milliseconds, and the CPU time of every server process (the single server's and the cluster's
nodes') per call while that way ran, since the machine is shared (the load average is printed
too):

- ``retrieve()`` on one embedded server (the single server's store);
- ``retrieve()`` called on the worker holding the agent's shards (where the function runs its
  statement prepared over the agent's shard tables, so Citus plans none of it);
- ``retrieve()`` through the coordinator (delegated to that worker: one more hop).

    python benchmarks/experiments/citus_call_breakdown.py [--agents 4] [--per-agent 1000]
        [--calls 100]
"""

from __future__ import annotations

import argparse
import asyncio
import os
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
        fetch_tuples = store.db.fetch_tuples

        async def spy(conn: Any, statement: Any, params: Any, **kw: Any) -> Any:
            calls.append((statement, params))
            return await fetch_tuples(conn, statement, params, **kw)

        # The read path's statement (rows as tuples, decoded by rows.retrieved).
        store.db.fetch_tuples = spy
        await mm.retrieve_context(agents[0], "s", "river stone garden", 2000)
        return calls[-1]
    finally:
        await mm.close()


def _tree(postmaster: int) -> list[int]:
    """A server's postmaster and every process under it, from /proc."""
    found = [postmaster]
    for pid in found:
        try:
            found += [int(k) for k in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
        except OSError:
            pass
    return found


def _postmaster(dsn: str) -> int:
    """The postmaster of the server at ``dsn`` (the parent of a backend)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        # Read while the backend lives: it is gone once the connection closes.
        status = Path(f"/proc/{row[0]}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))


def _cpu_ms(postmasters: list[int]) -> float:
    """CPU time so far of every process of these servers, in ms (0 where /proc lacks it)."""
    total = 0
    for postmaster in postmasters:
        for pid in _tree(postmaster):
            try:
                total += int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                pass
    return total / 1e6


def _timed(conn: psycopg.Connection[Any], statement: Any, params: Any, calls: int) -> list[float]:
    out = []
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
        # citus_cluster.py is one folder up, in benchmarks/ (also when loaded by path in the tests)
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from citus_cluster import CitusCluster

        cluster = CitusCluster(2, shard_count=32, extra_conf="")
        try:
            one = asyncio.run(_load_and_capture(single, agents, args.per_agent))
            dist = asyncio.run(_load_and_capture(cluster.dsn, agents, args.per_agent))
            worker = cluster.worker_of("actrone_breakdown", agents[0])
            worker_dsn = f"postgresql://postgres@127.0.0.1:{worker}/postgres"
            ways = {
                "retrieve() on one server": (single, *one),
                "retrieve() on the agent's worker": (worker_dsn, *dist),
                "retrieve() via the coordinator": (cluster.dsn, *dist),
            }
            with psycopg.connect(cluster.dsn, autocommit=True) as conn:
                nodes = [int(r[0]) for r in conn.execute("SELECT nodeport FROM pg_dist_node")]
            servers = [_postmaster(single), _postmaster(cluster.dsn)] + [
                _postmaster(f"postgresql://postgres@127.0.0.1:{p}/postgres") for p in nodes
            ]
            servers = list(dict.fromkeys(servers))  # the coordinator may be a node too
            # One connection per way for the whole run: a backend's CPU time is read while it
            # lives, and the coordinator keeps its connection to the worker.
            conns = {
                name: psycopg.connect(dsn, autocommit=True) for name, (dsn, *_) in ways.items()
            }
            for name, (_, statement, params) in ways.items():  # warm: plans, caches
                register_vector(conns[name])
                _timed(conns[name], statement, params, 10)
            times: dict[str, list[float]] = {name: [] for name in ways}
            cpu = dict.fromkeys(ways, 0.0)
            load = os.getloadavg()[0]
            for _ in range(args.calls // 10):
                for name, (_, statement, params) in ways.items():
                    before = _cpu_ms(servers)
                    times[name] += _timed(conns[name], statement, params, 10)
                    cpu[name] += _cpu_ms(servers) - before
            for conn in conns.values():
                conn.close()
        finally:
            cluster.close()
    print(f"{args.agents} agents x {args.per_agent} memories, 384 dimensions, {args.calls} calls")
    print(f"load average (1 min): {load:.2f} before, {os.getloadavg()[0]:.2f} after")
    print("| call | p50 (ms) | mean (ms) | server CPU per call (ms) |")
    print("| --- | ---: | ---: | ---: |")
    for name, values in times.items():
        print(
            f"| {name} | {statistics.median(values):.2f} | {statistics.mean(values):.2f}"
            f" | {cpu[name] / len(values):.2f} |"
        )


if __name__ == "__main__":
    main()
