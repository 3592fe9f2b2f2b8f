"""Ingest and retrieve_context with row-level security off and on: one embedded server, or a Citus
coordinator (``--citus-dsn``: both schemas distributed), one run.

Sides (each its own schema on the same server; batches and calls alternate between them, so
drift of a shared machine hits both alike):

* ``agent_write``: the store as it is (one agent_write() call per agent, then the rows by COPY);
* ``row security``: the same with ``postgres_row_security=True``, connected as a role without
  BYPASSRLS (docs/postgres.md, "Row-level security per agent"): the agent set on every
  connection, the rows by pipelined INSERTs.

    python benchmarks/pg_write_paths.py [--agents 10] [--per-agent 1000] [--queries 300]
    python benchmarks/pg_write_paths.py --citus-dsn postgresql://postgres@127.0.0.1:9700/postgres

On Citus, row security runs each call in a transaction that carries the agent to the workers
(docs/postgres.md, "On Citus"). The schemas are dropped first, so a run starts empty.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time

import psycopg
from psycopg.conninfo import make_conninfo

from actrone_pg import MemoryConfig, MemoryManager
from actrone_pg._embedded import temporary_server
from actrone_pg.embedders import HashingEmbedder

WORDS = (
    "apple river stone cloud garden lamp violin harbour candle meadow copper forest lantern orbit "
    "pepper quartz saddle tunnel willow zebra amber beacon cedar delta coffee travel music piano"
).split()
ROLE = "actrone_bench_app"


def _items(rng: random.Random, n: int) -> list[dict[str, object]]:
    return [{"content": " ".join(rng.choices(WORDS, k=rng.randint(8, 20)))} for _ in range(n)]


async def _manager(dsn: str, schema: str, **extra: object) -> MemoryManager:
    cfg = MemoryConfig(
        backend="postgres",
        postgres_dsn=dsn,
        postgres_schema=schema,
        embedding_provider="hashing",
        relevance_threshold=0.05,
        **extra,  # type: ignore[arg-type]
    )
    return await MemoryManager.create(cfg, embedder=HashingEmbedder(dimensions=384))


def _role_dsn(dsn: str, schema: str) -> str:
    """A login role without BYPASSRLS, granted what the store needs in ``schema``."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (ROLE,)).fetchone():
            conn.execute(f"DROP OWNED BY {ROLE}")
        conn.execute(f"DROP ROLE IF EXISTS {ROLE}")
        conn.execute(f"CREATE ROLE {ROLE} LOGIN PASSWORD 'bench' NOBYPASSRLS")
        conn.execute(f"GRANT USAGE ON SCHEMA {schema} TO {ROLE}")
        conn.execute(
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {ROLE}"
        )
        conn.execute(f"GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA {schema} TO {ROLE}")
    return make_conninfo(dsn, user=ROLE, password="bench")


async def main(args: argparse.Namespace, dsn: str) -> None:
    distribute = "citus" if args.citus_dsn else "off"
    with psycopg.connect(dsn, autocommit=True) as conn:
        for schema in ("bench_agent_write", "bench_rls"):
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    rng = random.Random(7)
    agents = [f"agent-{i}" for i in range(args.agents)]
    data = {
        a: [_items(rng, args.batch) for _ in range(args.per_agent // args.batch)] for a in agents
    }
    queries = [(rng.choice(agents), " ".join(rng.choices(WORDS, k=4))) for _ in range(args.queries)]
    sides: dict[str, MemoryManager] = {}
    on = {"postgres_row_security": True, "postgres_distribute": distribute}
    sides["agent_write"] = await _manager(dsn, "bench_agent_write", postgres_distribute=distribute)
    owner = await _manager(dsn, "bench_rls", **on)  # installs the policies
    await owner.close()
    sides["row security"] = await _manager(_role_dsn(dsn, "bench_rls"), "bench_rls", **on)
    spent: dict[str, list[float]] = {name: [] for name in sides}
    times: dict[str, list[float]] = {name: [] for name in sides}
    try:
        for batches in zip(*data.values(), strict=True):
            for agent, batch in zip(data, batches, strict=True):
                for name, mm in sides.items():
                    started = time.perf_counter()
                    await mm.inject_memories(agent, batch)
                    spent[name].append(time.perf_counter() - started)
        for mm in sides.values():
            for agent, query in queries[:20]:
                await mm.retrieve_context(agent, "s", query, 2000)
        for agent, query in queries:
            for name, mm in sides.items():
                started = time.perf_counter()
                await mm.retrieve_context(agent, "s", query, 2000)
                times[name].append((time.perf_counter() - started) * 1000)
    finally:
        for mm in sides.values():
            await mm.close()
    total = args.agents * (args.per_agent // args.batch) * args.batch
    first = next(iter(sides))
    print(f"{args.agents} agents x {args.per_agent} memories in batches of {args.batch},")
    where = "a Citus coordinator" if args.citus_dsn else "one embedded server"
    print(f"384 dimensions, {args.queries} retrieve_context calls; {where}")
    print()
    print("| | ingest (memories/s) | ratio | retrieve p50 (ms) | p99 (ms) | p50 ratio |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    base_rate = total / sum(spent[first])
    base_p50 = statistics.median(times[first])
    for name in sides:
        rate = total / sum(spent[name])
        ordered = sorted(times[name])
        p50 = statistics.median(ordered)
        p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
        print(
            f"| {name} | {rate:,.0f} | {rate / base_rate:.2f} | {p50:.2f} | {p99:.2f}"
            f" | {p50 / base_p50:.2f} |"
        )


def cli() -> None:
    """Parse the arguments, start the server, run."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=10)
    parser.add_argument("--per-agent", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--citus-dsn", help="a Citus coordinator (superuser) to run on instead")
    args = parser.parse_args()
    if args.citus_dsn:
        asyncio.run(main(args, args.citus_dsn))
        return
    with temporary_server(prefix="actrone-write-paths-") as dsn:
        asyncio.run(main(args, dsn))


if __name__ == "__main__":
    cli()
