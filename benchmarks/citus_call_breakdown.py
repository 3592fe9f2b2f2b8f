"""Where a Citus ``retrieve_context`` call's time goes, beside one server, same data, one run.

Four ways to run the same call (one agent, the statement the store sends, its values bound),
each timed ``--calls`` times, alternating in blocks of 10, p50 and mean in milliseconds, and the
CPU time of every server process (the single server's and the cluster's nodes') per call while
that way ran, since the machine is shared (the load average is printed too):

- ``retrieve()`` on one embedded server (the single server's store: hybrid_search inside);
- ``agent_retrieve()`` on that server (the distributed store's function, on plain tables);
- ``agent_retrieve()`` called on the worker holding the agent's shards (Citus plans each of its
  statements there, against the local shards);
- ``agent_retrieve()`` through the coordinator (delegated to that worker: one more hop);
- with ``--shard-tables``, on that worker, copies of ``retrieve()`` and of ``agent_retrieve()``
  as their files write them, each reading the agent's shard tables by name: plain tables, so
  Citus plans nothing (what its planning costs, on the same node, same data, same rows).

    python benchmarks/citus_call_breakdown.py [--agents 4] [--per-agent 1000] [--calls 100]
        [--shard-tables]
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
from actrone_pg.migrations import _files, _render

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


_SCHEMA = "actrone_breakdown"
_SHARDED = ("memories", "turns", "sessions", "agent_stats", "term_stats")


def _on_shard_tables(
    cluster: Any, worker: str, agent: str, dist: tuple[Any, Any]
) -> dict[str, tuple[str, Any, Any]]:
    """Install on ``worker`` copies of the entry functions reading ``agent``'s shard tables by
    name (for this benchmark only: a shard's name changes when it moves); their calls."""
    shards = {t: cluster.shard_of(f"{_SCHEMA}.{t}", agent)[0] for t in _SHARDED}
    with psycopg.connect(cluster.dsn, autocommit=True) as conn:
        vs = conn.execute(
            "SELECT n.nspname FROM pg_extension AS e JOIN pg_namespace AS n"
            " ON n.oid = e.extnamespace WHERE e.extname = 'vector'"
        ).fetchone()
    assert vs is not None

    def copy(name: str, suffix: str) -> str:
        text = _files.read(_render.head_files()[name])
        text = text.replace(f"{{schema}}.{name}(", f"{{schema}}.{name}{suffix}(")
        for table, shard in shards.items():
            text = text.replace(f"{{schema}}.{table} ", f"{shard} ")
        return text.replace("{schema}", _SCHEMA).replace("{vector_schema}", f'"{vs[0]}"')

    with psycopg.connect(worker, autocommit=True) as conn:
        conn.execute("SET citus.enable_ddl_propagation = off")  # this worker only
        for name, suffix in (("retrieve", "_shards"), ("agent_retrieve", "_shards")):
            conn.execute(copy(name, suffix).encode())
    statement, params = dist
    text = statement.as_string(None) if hasattr(statement, "as_string") else str(statement)
    # retrieve()'s call: agent_retrieve's arguments without the candidates and statistics.
    given = ("candidates", "n_docs", "total_length", "doc_freqs")
    retrieve_params = {k: v for k, v in params.items() if k not in given}
    retrieve_text = text.replace(".agent_retrieve(", ".retrieve_shards(")
    for name, cast in (
        ("candidates", "text[]"),
        ("n_docs", "bigint"),
        ("total_length", "bigint"),
        ("doc_freqs", "int[]"),
    ):
        retrieve_text = retrieve_text.replace(f" %({name})s::{cast},", "")
    return {
        "retrieve() on the worker's shard tables": (worker, retrieve_text, retrieve_params),
        "agent_retrieve() on the worker's shard tables": (
            worker,
            text.replace(".agent_retrieve(", ".agent_retrieve_shards("),
            params,
        ),
    }


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
    parser.add_argument("--shard-tables", action="store_true")
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
            if args.shard_tables:
                ways.update(_on_shard_tables(cluster, worker_dsn, agents[0], dist))
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
