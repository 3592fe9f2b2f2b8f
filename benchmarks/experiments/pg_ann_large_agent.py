"""What an HNSW index would buy one large agent: top-500 latency and recall, and its write cost.

Loads ``--per-agent`` memories of one agent (the generator of ``actrone-pg bench``: clusters of
2,000, about 1,000 admitted per query) through ``MemoryManager.inject_memories`` into an embedded
PostgreSQL (or ``--dsn``), builds a partial HNSW index for that agent and embedder, then for each
``hnsw.ef_search`` times the agent's 500 nearest through the index (``strict_order`` iterative
scan, exact cosine re-checked against the threshold) and compares them with numpy's exact
admitted top 500. Finally it ingests ``--write-agents`` × 10,000 memories into a fresh schema
twice, without and with a maintained HNSW index, to show what the index costs writers.

    python benchmarks/experiments/pg_ann_large_agent.py [--dsn DSN] [--per-agent 100000]

The numbers in ``docs/postgres.md`` ("Large agents: an HNSW index of their own") come from this
script; the store builds and searches such an index itself for agents past
``postgres_ann_min_memories``. Recall is counted against the exact scan with the stores' tie
order (``tie_keys``), as ``actrone-pg bench`` counts it.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql

from actrone_pg._embedded import given_or_temporary_server
from actrone_pg.bench.workload import (
    Dataset,
    DatasetSpec,
    FixedVectorEmbedder,
    build_dataset,
    exact_candidates,
    ingest,
    tie_keys,
    unit_rows,
)
from actrone_pg.config import MemoryConfig
from actrone_pg.manager import MemoryManager

LIMIT = 500


def _index_ddl(schema: str, name: str, embedder: str, agent: str | None) -> sql.Composed:
    predicate = sql.SQL("embedder = {}").format(sql.Literal(embedder))
    if agent is not None:
        predicate = sql.SQL("agent_id = {} AND {}").format(sql.Literal(agent), predicate)
    return sql.SQL(
        "CREATE INDEX {} ON {}.memories USING hnsw ((embedding::vector(384)) vector_ip_ops)"
        " WITH (m = 16, ef_construction = 64) WHERE {}"
    ).format(sql.Identifier(name), sql.Identifier(schema), predicate)


async def _manager(dsn: str, schema: str, dataset: Dataset) -> MemoryManager:
    """A manager on ``schema`` whose embedder knows every text of ``dataset``."""
    embedder = FixedVectorEmbedder(384)
    for agent in dataset.agents:
        embedder.add(agent.texts, agent.vectors)
    config = MemoryConfig(
        backend="postgres",
        postgres_dsn=dsn,
        postgres_schema=schema,
        relevance_threshold=dataset.threshold,
        embedding_batch_size=1000,
    )
    return await MemoryManager.create(config, embedder=embedder)


async def _load(dsn: str, schema: str, agents: int, per_agent: int) -> tuple[float, Dataset]:
    dataset = build_dataset(DatasetSpec(agents=agents, per_agent=per_agent, queries=40))
    async with await _manager(dsn, schema, dataset) as mm:
        seconds = await ingest(mm, dataset)
    return dataset.total_memories / seconds, dataset


def search_large_agent(dsn: str, per_agent: int, ef_values: list[int]) -> None:
    schema = "ann_bench_read"
    rate, dataset = asyncio.run(_load(dsn, schema, 1, per_agent))
    agent = dataset.agents[0]
    embedder = FixedVectorEmbedder(384).name
    print(f"1 agent x {per_agent:,} memories ingested at {rate:,.0f}/s")
    with psycopg.connect(dsn, autocommit=True, prepare_threshold=None) as conn:
        register_vector(conn)
        conn.execute("SET maintenance_work_mem = '2GB'")
        conn.execute("SET max_parallel_maintenance_workers = 1")
        t0 = time.perf_counter()
        conn.execute(_index_ddl(schema, "ix_ann_bench", embedder, agent.agent_id))
        print(f"HNSW index built in {time.perf_counter() - t0:.1f} s")
        conn.execute("SET hnsw.iterative_scan = strict_order")
        conn.execute("SET hnsw.max_scan_tuples = 50000")
        query = sql.SQL(
            "SELECT n.id FROM (SELECT m.id, m.embedding FROM {}.memories AS m"
            " WHERE m.agent_id = %s AND m.embedder = %s"
            " ORDER BY (m.embedding::vector(384)) <#> %s::vector(384) LIMIT %s) AS n"
            " WHERE -(n.embedding <#> %s) >= %s"
        ).format(sql.Identifier(schema))
        stored = unit_rows(agent.vectors)
        ties = tie_keys(agent)
        ids = np.array(agent.ids)
        print(f"{'ef_search':>9}  {'p50 ms':>7}  {'p99 ms':>7}  recall mean / min")
        for ef in ef_values:
            conn.execute(sql.SQL("SET hnsw.ef_search = {}").format(sql.Literal(ef)))
            times, recalls = [], []
            for j in range(len(agent.query_vectors)):
                q = unit_rows(agent.query_vectors[j : j + 1])[0]
                t = time.perf_counter()
                params = (agent.agent_id, embedder, q, LIMIT, q, dataset.threshold)
                rows = conn.execute(query, params).fetchall()
                times.append((time.perf_counter() - t) * 1e3)
                _, exact = exact_candidates(stored, q, dataset.threshold, LIMIT, ties)
                want = set(ids[exact])
                got = {r[0] for r in rows}
                recalls.append(len(got & want) / len(want) if want else 1.0)
            timed = sorted(times[5:])  # the first few warm the index's pages
            p99 = timed[max(0, int(len(timed) * 0.99) - 1)]
            print(
                f"{ef:>9}  {statistics.median(timed):7.2f}  {p99:7.2f}"
                f"  {statistics.fmean(recalls):.4f} / {min(recalls):.4f}"
            )
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


async def _ingest_rate(dsn: str, schema: str, agents: int, with_index: bool) -> float:
    dataset = build_dataset(DatasetSpec(agents=agents, per_agent=10_000, queries=10))
    async with await _manager(dsn, schema, dataset) as mm:
        first = dataset.agents[0]
        # registers the embedder, so that the index can name it before the timed ingest
        await mm.inject_memories(first.agent_id, [{"content": first.texts[0]}])
        if with_index:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(_index_ddl(schema, "ix_ann_write", mm.embedder.name, None))
        seconds = await ingest(mm, dataset)
    return dataset.total_memories / seconds


def write_cost(dsn: str, agents: int) -> None:
    schema = "ann_bench_write"
    for with_index in (False, True):
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
        rate = asyncio.run(_ingest_rate(dsn, schema, agents, with_index))
        label = "with a maintained HNSW index" if with_index else "without an HNSW index"
        print(f"ingest {agents} x 10,000 {label}: {rate:,.0f} memories/s")
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dsn", help="a server with pgvector (default: a temporary embedded one)")
    ap.add_argument("--per-agent", type=int, default=100_000)
    ap.add_argument("--ef-search", default="40,100,200,400,800", help="comma-separated values")
    ap.add_argument(
        "--write-agents", type=int, default=2, help="agents of the write test (0: skip)"
    )
    args = ap.parse_args()
    with given_or_temporary_server(args.dsn, prefix="actrone-ann-bench-") as dsn:
        if not args.dsn:
            print(f"embedded PostgreSQL for this run: {dsn}")
        search_large_agent(dsn, args.per_agent, [int(x) for x in args.ef_search.split(",")])
        if args.write_agents > 0:
            write_cost(dsn, args.write_agents)


if __name__ == "__main__":
    main()
