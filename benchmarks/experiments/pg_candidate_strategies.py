"""Measure candidate-search strategies: one agent's top 500 among 10 agents x 10,000 memories.

Builds 100,000 random 384-dimensional unit vectors (a mixture of 50 topics, so that neighbours
are meaningful) for 10 agents, inserted interleaved as a live system writes them, in an embedded
PostgreSQL (or ``--dsn``). Then, for each of ``--queries`` queries, runs every strategy in turn
(round-robin, so that load from other processes on the machine hits them all alike) and reports
p50/p99 latency and recall against the exact top 500 (cosine, then newer, then id).

    python benchmarks/experiments/pg_candidate_strategies.py [--dsn DSN] [--hnsw]

The numbers beside the choice in ``actrone_pg/stores/postgres/__init__.py`` and in
``docs/postgres.md`` come from this script.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import statistics
import time
from datetime import UTC, datetime
from typing import Any

import numpy as np
import psycopg
from pgvector import HalfVector
from pgvector.psycopg import register_vector
from psycopg import sql

from actrone_pg._embedded import given_or_temporary_server

DIM = 384
LIMIT = 500
MARGIN = 200

EXACT = (
    "SELECT id FROM bench.{t} WHERE agent_id = %(agent)s AND embedder = 'e'"
    " ORDER BY embedding <#> %(q)s, created_at DESC, id LIMIT 500"
)


def exact(table: str) -> sql.Composed:
    """The exact top-500 query on ``bench.<table>``."""
    return sql.SQL(EXACT).format(t=sql.Identifier(table))


STRATEGIES: dict[str, str | sql.Composed] = {
    "exact float, heap in arrival order, btree(agent_id, embedder)": exact("scattered"),
    "exact float, covering btree INCLUDE (vector), index-only": exact("covered"),
    "exact float, heap written agent by agent (as CLUSTER leaves it)": exact("clustered"),
    "halfvec covering index top 700, exact float rescore": (
        "WITH pre AS (SELECT id FROM bench.covered WHERE agent_id = %(agent)s AND embedder = 'e'"
        " ORDER BY half <#> %(h)s LIMIT 700)"
        " SELECT c.id FROM pre JOIN bench.covered AS c ON c.agent_id = %(agent)s AND c.id = pre.id"
        " ORDER BY c.embedding <#> %(q)s, c.created_at DESC, c.id LIMIT 500"
    ),
}
HNSW: dict[str, tuple[str, list[str]]] = {
    "hnsw (m 16, ef_search 40) + agent filter": ("", []),
    "hnsw iterative relaxed_order, ef_search 200": (
        "",
        ["SET hnsw.iterative_scan = relaxed_order", "SET hnsw.ef_search = 200"],
    ),
}
HNSW_QUERY = (
    "SELECT id FROM bench.scattered WHERE agent_id = %(agent)s AND embedder = 'e'"
    " ORDER BY embedding::vector(384) <#> %(q)s LIMIT 500"
)


def unit(rng: np.random.Generator, n: int, topics: np.ndarray) -> np.ndarray:
    v = topics[rng.integers(0, len(topics), n)] + rng.normal(0.0, 0.08, (n, DIM))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v.astype(np.float32)


def table_ddl(name: str, columns: str) -> sql.Composed:
    """CREATE TABLE bench.<name> with rows kept inline (vectors must not be TOASTed)."""
    return sql.SQL("CREATE TABLE {} (" + columns + ") WITH (toast_tuple_target = 8160)").format(
        sql.Identifier("bench", name)
    )


def build(conn: psycopg.Connection[Any], agents: int, per_agent: int, topics: np.ndarray) -> None:
    rng = np.random.default_rng(7)
    n = agents * per_agent
    vecs = unit(rng, n, topics)
    conn.execute("DROP SCHEMA IF EXISTS bench CASCADE")
    conn.execute("CREATE SCHEMA bench")
    cols = (
        'agent_id text COLLATE "C" NOT NULL, embedder text COLLATE "C" NOT NULL,'
        ' id text COLLATE "C" NOT NULL, created_at timestamptz NOT NULL,'
        " embedding vector NOT NULL, half halfvec NOT NULL, PRIMARY KEY (agent_id, id)"
    )
    for t in ("scattered", "covered"):
        conn.execute(table_ddl(t, cols))
    t0 = time.perf_counter()
    base = time.time() - n
    with conn.cursor().copy(
        "COPY bench.scattered (agent_id, embedder, id, created_at, embedding, half)"
        " FROM STDIN (FORMAT BINARY)"
    ) as copy:
        copy.set_types(["text", "text", "text", "timestamptz", "vector", "halfvec"])
        for i in range(n):
            # interleaved: row i belongs to agent i % agents, as writes arrive in production
            copy.write_row(
                (
                    f"agent-{i % agents}",
                    "e",
                    f"m{i:07d}",
                    datetime.fromtimestamp(base + i, UTC),
                    vecs[i],
                    HalfVector(vecs[i]),
                )
            )
    print(f"loaded {n:,} rows in {time.perf_counter() - t0:.1f} s (binary COPY)")
    conn.execute("INSERT INTO bench.covered SELECT * FROM bench.scattered")
    conn.execute("CREATE INDEX ON bench.scattered (agent_id, embedder)")
    conn.execute(
        "CREATE INDEX ON bench.covered (agent_id, embedder) INCLUDE (created_at, id, embedding)"
    )
    conn.execute("CREATE INDEX ON bench.covered (agent_id, embedder) INCLUDE (id, half)")
    conn.execute(table_ddl("clustered", cols))
    conn.execute(
        "INSERT INTO bench.clustered SELECT * FROM bench.scattered ORDER BY agent_id, embedder"
    )
    conn.execute("CREATE INDEX ON bench.clustered (agent_id, embedder)")
    for t in ("scattered", "covered", "clustered"):
        conn.execute(sql.SQL("VACUUM ANALYZE {}").format(sql.Identifier("bench", t)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dsn", help="a server with pgvector (default: a temporary embedded one)")
    ap.add_argument("--agents", type=int, default=10)
    ap.add_argument("--per-agent", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--hnsw", action="store_true", help="also build and time an HNSW index")
    ap.add_argument("--skip-build", action="store_true", help="reuse the bench schema")
    args = ap.parse_args()
    # Closed at exit, like the embedded server's own cleanup: deletes a throw-away server.
    stack = contextlib.ExitStack()
    atexit.register(stack.close)
    dsn = stack.enter_context(given_or_temporary_server(args.dsn, prefix="actrone-bench-"))
    conn = psycopg.connect(dsn, autocommit=True)
    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    register_vector(conn)
    conn.execute("SET jit = off")
    conn.execute("SET max_parallel_workers_per_gather = 0")
    topics = np.random.default_rng(3).normal(0.0, 1.0, (50, DIM))
    topics /= np.linalg.norm(topics, axis=1, keepdims=True)
    if not args.skip_build:
        build(conn, args.agents, args.per_agent, topics)
    strategies: dict[str, str | sql.Composed] = dict(STRATEGIES)
    setups: dict[str, list[str]] = {name: [] for name in strategies}
    if args.hnsw:
        t0 = time.perf_counter()
        conn.execute("SET maintenance_work_mem = '512MB'")
        conn.execute(
            "CREATE INDEX IF NOT EXISTS scattered_hnsw ON bench.scattered USING hnsw"
            " ((embedding::vector(384)) vector_ip_ops) WHERE embedder = 'e'"
        )
        print(f"hnsw build {time.perf_counter() - t0:.1f} s")
        for name, (_, settings) in HNSW.items():
            strategies[name] = HNSW_QUERY
            setups[name] = settings
    rng = np.random.default_rng(11)
    qv = unit(rng, args.queries, topics)
    queries = [(f"agent-{i % args.agents}", qv[i]) for i in range(args.queries)]
    truth = []
    for agent, q in queries:
        rows = conn.execute(exact("scattered"), {"agent": agent, "q": q})
        truth.append({r[0] for r in rows.fetchall()})
    times: dict[str, list[float]] = {name: [] for name in strategies}
    recall: dict[str, list[float]] = {name: [] for name in strategies}
    for rep in range(2):  # the first pass warms the caches and is not recorded
        for (agent, q), want in zip(queries, truth, strict=True):
            params = {"agent": agent, "q": q, "h": HalfVector(q)}
            for name, query in strategies.items():
                conn.execute("RESET ALL")
                conn.execute("SET jit = off")
                conn.execute("SET max_parallel_workers_per_gather = 0")
                for s in setups[name]:
                    conn.execute(s)
                t0 = time.perf_counter()
                got = {r[0] for r in conn.execute(query, params).fetchall()}
                ms = (time.perf_counter() - t0) * 1000.0
                if rep:
                    times[name].append(ms)
                    recall[name].append(len(got & want) / len(want))
    print(
        f"{args.agents} agents x {args.per_agent:,} memories, {DIM} dims, top {LIMIT},"
        f" {args.queries} queries"
    )
    for name in strategies:
        ts = sorted(times[name])
        p99 = ts[min(len(ts) - 1, int(len(ts) * 0.99))]
        print(
            f"  {name:62s} p50 {statistics.median(ts):6.2f} ms  p99 {p99:6.2f} ms"
            f"  recall {statistics.mean(recall[name]):.3f} (min {min(recall[name]):.3f})"
        )


if __name__ == "__main__":
    main()
