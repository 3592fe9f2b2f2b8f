"""Latency of PostgresStore.search (one call of ``retrieve()``, the whole ranking) and of three
ways to fetch L1 + L2.

10 agents x 10,000 memories of 384 dimensions (topic mixture, 8-20 words of text each), written
interleaved through ``upsert_memories`` (binary COPY) in batches of 1,000; then ``--queries``
searches (threshold set so a typical query admits ``--admit`` memories, 1,000 by default, so the
500 nearest are ranked; ``--admit 0`` admits everything), and the L1 + L2 fetch (the session's
recent turns and ``search`` packed into a 1,000-token L2 share) done three ways: one call after
the other, concurrently on two pooled connections, and in one call of ``retrieve()`` with the
session (``PostgresStore.fetch_context``, what ``retrieve_context`` uses); then
``MemoryManager.retrieve_context`` itself. Query vectors are precomputed: embedding excluded.
Recall is measured against numpy's exact top 500 of the same vectors.

    python benchmarks/experiments/pg_store_latency.py [--dsn DSN] [--agents 10] [--per-agent 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import gc
import statistics
import time
import uuid
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
from psycopg import sql

from actrone_pg._embedded import given_or_temporary_server
from actrone_pg.models import Memory, Turn
from actrone_pg.ranking import RankingParams, query_terms
from actrone_pg.stores.base import MemoryRecord, SearchRequest
from actrone_pg.stores.postgres import PostgresSettings, PostgresStore

DIM = 384
#: The L2 share of a 4,000-token budget (the manager's default 25 %).
L2_BUDGET = 1000


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * q))]


class _FixedEmbedder:
    """Returns precomputed vectors, so that timings exclude query embedding."""

    name = "bench-384"
    dimensions = DIM
    relevance_threshold: float | None = None

    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self.vectors = vectors

    async def embed_batch(self, texts: Sequence[str]) -> list[np.ndarray]:
        return [self.vectors[t] for t in texts]


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dsn")
    ap.add_argument("--agents", type=int, default=10)
    ap.add_argument("--per-agent", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument(
        "--admit",
        type=int,
        default=1000,
        help="memories a typical query admits; sets the threshold (0: threshold 0, all admitted)",
    )
    ap.add_argument("--reuse", metavar="SCHEMA", help="search an earlier run's schema (no ingest)")
    args = ap.parse_args()
    if args.admit > args.per_agent:
        ap.error(
            f"--admit {args.admit} exceeds --per-agent {args.per_agent}: a query can admit at"
            " most the agent's memories (--admit 0 admits them all)"
        )
    # Closed at exit, like the embedded server's own cleanup: deletes a throw-away server.
    stack = contextlib.ExitStack()
    atexit.register(stack.close)
    dsn = stack.enter_context(given_or_temporary_server(args.dsn, prefix="actrone-bench-"))
    schema = args.reuse or f"bench_{uuid.uuid4().hex[:8]}"
    store = PostgresStore(PostgresSettings(dsn, schema=schema, pool_max_size=4))
    await store.setup()
    rng = np.random.default_rng(7)
    topics = rng.normal(size=(50, DIM))
    topics /= np.linalg.norm(topics, axis=1, keepdims=True)
    vocab = [f"word{i}" for i in range(2000)]
    n = args.agents * args.per_agent
    vecs = topics[rng.integers(0, 50, n)] + rng.normal(0, 0.08, (n, DIM))
    vecs = (vecs / np.linalg.norm(vecs, axis=1, keepdims=True)).astype(np.float32)
    now = datetime.now(UTC)
    records = []
    for i in range(n):
        words = " ".join(vocab[j] for j in rng.integers(0, 2000, rng.integers(8, 21)))
        m = Memory(
            id=f"m{i:07d}",
            agent_id=f"agent-{i % args.agents}",
            session_id=None,
            content=words,
            content_type="fact",
            importance=0.5,
            tags=(),
            source="bench",
            sensitivity="none",
            created_at=now - timedelta(seconds=n - i),
            metadata={},
            embedder="bench-384",
            token_count=len(words) // 4,
        )
        records.append(MemoryRecord(memory=m, vector=vecs[i]))
    t0 = time.perf_counter()
    for start in range(0, 0 if args.reuse else n, 1000):
        # a batch per agent, agents interleaved, as concurrent writers would produce
        chunk = records[start : start + 1000]
        by_agent: dict[str, list[MemoryRecord]] = {}
        for r in chunk:
            by_agent.setdefault(r.memory.agent_id, []).append(r)
        for batch in by_agent.values():
            await store.upsert_memories(batch)
    if not args.reuse:
        ingest = n / (time.perf_counter() - t0)
        print(
            f"schema {schema}: ingest of {n:,} memories in batches of {1000 // args.agents}:"
            f" {ingest:,.0f} memories/s",
            flush=True,
        )
    for i in range(20 * args.agents):
        await store.append_turn(
            Turn(
                id=str(i),
                agent_id=f"agent-{i % args.agents}",
                session_id="s",
                user_message="hello " * 20,
                assistant_message="hi " * 20,
                tool_results=None,
                created_at=now,
                token_count=40,
            ),
            max_turns=50,
            ttl_seconds=3600,
        )
    # The harness's data is static from here on: out of the garbage collector's sight, as in
    # `actrone-pg bench`. Left in, each full collection during the timed calls took 40-120 ms
    # (gc.callbacks), and those pauses were search's p99 (101-115 ms against ~20 ms).
    del records
    gc.collect()
    gc.freeze()
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("VACUUM ANALYZE {}").format(sql.Identifier(schema, "memories")))
    qv = topics[rng.integers(0, 50, args.queries)] + rng.normal(0, 0.08, (args.queries, DIM))
    qv = (qv / np.linalg.norm(qv, axis=1, keepdims=True)).astype(np.float32)
    agent_rows = {
        a: np.array([i for i in range(n) if i % args.agents == a]) for a in range(args.agents)
    }
    texts = [" ".join(vocab[j] for j in rng.integers(0, 2000, 6)) for _ in range(args.queries)]
    embedder = _FixedEmbedder({t: qv[k] for k, t in enumerate(texts)})
    search_ms: list[float] = []
    retrieve_ms: list[float] = []
    seq_ms: list[float] = []
    par_ms: list[float] = []
    one_ms: list[float] = []
    recalls: list[float] = []
    admitted: list[int] = []
    results: list[tuple[int, int, set[str]]] = []
    threshold = 0.0
    if args.admit:
        # The median over the queries of the admit-th largest cosine in the queried agent.
        kth = []
        for k in range(args.queries):
            cos = vecs[agent_rows[k % args.agents]] @ qv[k]
            kth.append(float(np.partition(cos, -args.admit)[-args.admit]))
        threshold = round(statistics.median(kth), 4)
        time.sleep(1.0)  # let BLAS threads go idle before timing
    from actrone_pg import MemoryConfig, MemoryManager

    mm = await MemoryManager.create(
        MemoryConfig(backend="postgres", relevance_threshold=max(threshold, 1e-6)),
        store=store,
        embedder=embedder,
    )
    for rep in range(2):
        for k in range(args.queries):
            a = k % args.agents
            text = texts[k]
            req = SearchRequest(
                agent_id=f"agent-{a}",
                query=text,
                terms=tuple(query_terms(text)),
                vector=qv[k],
                embedder="bench-384",
                threshold=threshold,
                limit=500,
                params=RankingParams(),
                now=now,
            )
            t = time.perf_counter()
            hits = (await store.search(req)).hits
            s_ms = (time.perf_counter() - t) * 1000
            agent = req.agent_id
            t = time.perf_counter()
            await store.recent_turns(agent, "s", limit=50, ttl_seconds=3600)
            await store.search(replace(req, budget=L2_BUDGET))
            q_ms = (time.perf_counter() - t) * 1000
            t = time.perf_counter()
            await asyncio.gather(
                store.recent_turns(agent, "s", limit=50, ttl_seconds=3600),
                store.search(replace(req, budget=L2_BUDGET)),
            )
            p_ms = (time.perf_counter() - t) * 1000
            t = time.perf_counter()
            await store.fetch_context(
                agent, "s", limit=50, ttl_seconds=3600, request=replace(req, budget=L2_BUDGET)
            )
            o_ms = (time.perf_counter() - t) * 1000
            t = time.perf_counter()
            await mm.retrieve_context(f"agent-{a}", "s", text, 4000)
            r_ms = (time.perf_counter() - t) * 1000
            if rep:
                retrieve_ms.append(r_ms)
                search_ms.append(s_ms)
                seq_ms.append(q_ms)
                par_ms.append(p_ms)
                one_ms.append(o_ms)
                results.append((a, k, {h.memory.id for h in hits}))
    # Recall after all timed calls: numpy's BLAS threads spin for a while after a matrix product
    # and would steal the CPU from the server during the next timed call (2 cores here).
    for a, k, got in results:
        rows = agent_rows[a]
        cos = vecs[rows] @ qv[k]
        order = [i for i in np.argsort(-cos)[:500] if cos[i] >= threshold]
        top = {f"m{rows[i]:07d}" for i in order}
        recalls.append(len(top & got) / len(top) if top else 1.0)
        admitted.append(len(got))
    print(
        f"{args.agents} agents x {args.per_agent:,} memories, {DIM} dims, threshold {threshold}"
        f" (candidates ranked per query: median {statistics.median(admitted):.0f}),"
        f" {args.queries} queries"
    )
    for name, ms in (
        ("search (retrieve(), full ranking)", search_ms),
        ("L1 then L2 (packed search), sequential", seq_ms),
        ("L1 and L2 concurrently (two connections)", par_ms),
        ("L1 and L2 in one retrieve() (fetch_context)", one_ms),
        ("MemoryManager.retrieve_context (4,000 tokens)", retrieve_ms),
    ):
        print(f"  {name:44s} p50 {statistics.median(ms):6.2f} ms  p99 {pct(ms, 0.99):6.2f} ms")
    print(
        f"  candidate recall vs numpy exact top 500: mean {statistics.mean(recalls):.4f},"
        f" min {min(recalls):.4f}"
    )
    await store.close()


if __name__ == "__main__":
    asyncio.run(main())
