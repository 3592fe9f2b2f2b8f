"""Drive actrone-memory 0.3.0 (the reference system) through the benchmark's data and queries.

``actrone-pg bench --reference`` runs this script with the *reference* virtual environment's
Python (actrone-memory and asyncpg installed there, never in actrone_pg's environment), so it
imports only the standard library and ``actrone_memory``. It reads the data the benchmark wrote
to ``--data`` and uses actrone-memory's own Postgres stores, ``PostgresStore`` (L1, turns) and
``PgVectorStore`` (L2, memories), on the server ``--dsn`` names, in tables whose names start with
``--table-prefix`` (dropped before and after the run).

What it does, mirroring the actrone_pg side of the benchmark:

1. ingest every memory through ``MemoryManager.inject_memory`` (actrone-memory 0.3.0 has no batch
   ingest; this is the call its documentation gives for seeding memories), timed in total;
2. store the same L1 turns (untimed);
3. run the warm-up schedule, then time ``retrieve_context`` and ``search_memories(limit=N)`` over
   the same query schedule, recording the indices of the memories each search returned.

The embedder returns the benchmark's precomputed vectors looked up by text, so query embedding
is excluded here too. actrone-memory's ``inject_memory`` cannot set a memory's timestamp, so its
recency channel sees every memory as written "now"; this changes its ranking order, not the
candidate set or the timings.

Input (``--data`` directory): ``meta.json`` and, per agent ``i``, ``vectors_i.f32`` and
``queries_i.f32`` (little-endian float32, row-major). Output: one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import array
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any


def _load_rows(path: Path, dims: int) -> list[list[float]]:
    data = array.array("f")
    data.frombytes(path.read_bytes())
    if sys.byteorder != "little":  # pragma: no cover - the benchmark writes little-endian
        data.byteswap()
    return [data[i : i + dims].tolist() for i in range(0, len(data), dims)]


def _log(message: str) -> None:
    print(f"[reference] {message}", file=sys.stderr, flush=True)


async def _drop(dsn: str, prefix: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        for suffix in ("memories", "turns", "turns_locks"):
            # Identifiers cannot be bound; the prefix is checked to be a plain identifier below.
            await conn.execute(f"DROP TABLE IF EXISTS {prefix}_{suffix}")
    finally:
        await conn.close()


async def _server_version(dsn: str) -> str:
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        version = await conn.fetchval("SHOW server_version")
        ext = await conn.fetchval("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
    finally:
        await conn.close()
    return f"PostgreSQL {version}, pgvector {ext}"


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the whole reference benchmark and return its raw measurements."""
    from importlib.metadata import version

    from actrone_memory import MemoryConfig, MemoryManager
    from actrone_memory.l1.postgres_store import PostgresStore
    from actrone_memory.l2.embedder import Embedder
    from actrone_memory.l2.pgvector_store import PgVectorStore

    data_dir = Path(args.data)
    meta = json.loads((data_dir / "meta.json").read_text())
    dims = int(meta["dimensions"])
    prefix = args.table_prefix
    if not prefix.replace("_", "a").isalnum() or not prefix[0].isalpha():
        raise SystemExit(f"--table-prefix must be a plain identifier, got {prefix!r}")

    lookup: dict[str, list[float]] = {}
    agents = meta["agents"]
    vectors_by_agent = []
    for i, agent in enumerate(agents):
        vectors = _load_rows(data_dir / f"vectors_{i}.f32", dims)
        queries = _load_rows(data_dir / f"queries_{i}.f32", dims)
        lookup.update(zip(agent["texts"], vectors, strict=True))
        lookup.update(zip(agent["query_texts"], queries, strict=True))
        vectors_by_agent.append(vectors)

    class FixedVectorEmbedder(Embedder):
        """Precomputed vectors looked up by text (query embedding excluded from timings)."""

        async def embed(self, text: str) -> list[float]:
            return lookup[text]

        async def embed_batch(self, texts: list[str]) -> list[list[float]]:
            return [lookup[t] for t in texts]

        @property
        def dimensions(self) -> int:
            return dims

    await _drop(args.dsn, prefix)
    l1 = await PostgresStore.from_dsn(args.dsn, table=f"{prefix}_turns")
    l2 = await PgVectorStore.from_dsn(args.dsn, table=f"{prefix}_memories", dimensions=dims)
    config = MemoryConfig(
        backend="memory",
        embedding_provider="hashing",
        relevance_threshold=float(meta["threshold"]),
        max_episodic_memories=int(meta["limit"]),
        hybrid_retrieval=True,
        auto_summarise=False,
    )
    mm = await MemoryManager.create(config, l1=l1, l2=l2, embedder=FixedVectorEmbedder())
    out: dict[str, Any] = {
        "system": "actrone-memory",
        "version": version("actrone-memory"),
        "server": await _server_version(args.dsn),
        "stores": "PostgresStore (L1) + PgVectorStore (L2)",
    }
    try:
        # -- ingest: one inject_memory per memory, as actrone-memory offers no batch call --
        index_of: list[dict[str, int]] = []
        total = sum(len(a["texts"]) for a in agents)
        done = 0
        started = time.perf_counter()
        for agent in agents:
            ids: dict[str, int] = {}
            for j, text in enumerate(agent["texts"]):
                mid = await mm.inject_memory(agent["agent_id"], text, importance=0.5)
                ids[mid] = j
                done += 1
                if done % 1000 == 0:
                    _log(f"ingested {done:,}/{total:,}")
            index_of.append(ids)
        ingest_seconds = time.perf_counter() - started
        out.update(
            memories=total, ingest_seconds=ingest_seconds, ingest_rate=total / ingest_seconds
        )
        _log(f"ingest: {total / ingest_seconds:,.0f} memories/s")

        for agent in agents:
            for user, assistant in agent["turns"]:
                await mm.store_turn(agent["agent_id"], meta["session_id"], user, assistant)

        limit = int(meta["limit"])

        async def retrieve(a: int, q: int) -> Any:
            agent = agents[a]
            return await mm.retrieve_context(
                agent["agent_id"],
                meta["session_id"],
                agent["query_texts"][q],
                int(meta["token_budget"]),
            )

        async def search(a: int, q: int) -> Any:
            agent = agents[a]
            return await mm.search_memories(agent["agent_id"], agent["query_texts"][q], limit=limit)

        for a, q in meta["warmup_schedule"]:
            await retrieve(a, q)
            await search(a, q)

        retrieve_ms = []
        context_sizes = []
        for a, q in meta["schedule"]:
            t0 = time.perf_counter_ns()
            ctx = await retrieve(a, q)
            retrieve_ms.append((time.perf_counter_ns() - t0) / 1e6)
            context_sizes.append(len(ctx.episodic_memories))
        _log("retrieve_context timed")

        search_ms = []
        hits = []
        for a, q in meta["schedule"]:
            t0 = time.perf_counter_ns()
            found = await search(a, q)
            search_ms.append((time.perf_counter_ns() - t0) / 1e6)
            hits.append([index_of[a][m.id] for m in found])
        _log("search_memories timed")
        out.update(
            retrieve_ms=retrieve_ms,
            search_ms=search_ms,
            search_hits=hits,
            context_sizes=context_sizes,
        )
    finally:
        await mm.close()
        if not args.keep:
            await _drop(args.dsn, prefix)
    return out


def main() -> int:
    """Parse the arguments, run, print the JSON result."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="directory the benchmark wrote")
    parser.add_argument("--dsn", required=True, help="PostgreSQL server (with pgvector)")
    parser.add_argument("--table-prefix", default="actrone_ref_bench")
    parser.add_argument("--keep", action="store_true", help="keep the tables afterwards")
    args = parser.parse_args()
    result = asyncio.run(run(args))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
