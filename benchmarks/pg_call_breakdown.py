"""Where one ``retrieve_context`` call's time goes on PostgreSQL: client side and server side.

The data, threshold and queries are those of ``actrone-pg bench`` (the same seed and sizes give
the same memories), loaded through a ``MemoryManager`` on the postgres backend, then
``VACUUM (ANALYZE)`` as ``--analyze`` does. Every part below is timed over the same queries,
round-robin over the agents, **interleaved** (each query runs every part back to back, so a busy
moment of the machine slows them all alike), and reported as p50 / p99 in milliseconds:

- the whole call (``retrieve_context``) and its two halves as the store runs them (L1:
  ``recent_turns``; L2: ``search`` of the request the manager builds), and the request's build;
- the client's pieces: one pool checkout with its connection check (``_conn``), an empty query
  (one round trip), ``retrieve()`` (migration 0024, the one statement of every read) sent on a
  connection already held with and without the session's turns, the parameters' adaptation
  (psycopg's query conversion, no I/O) and the rows' decoding (``rows.retrieved``);
- the server's pieces: ``retrieve()``, the same call with nothing to rank (its limit 0: the
  PL/pgSQL, the look-ups, the session's turns and the statement's start and end, what every
  call pays before a candidate is read), ``hybrid_search`` alone, and
  its body run as a prepared statement cut after each step (candidate scan and dense rank, BM25
  statistics, the candidates' rows with BM25 and the other two rankings, fusion, the final
  order), so that each step's cost is the
  difference of two cumulative times; the plain ``ORDER BY embedding <=> q LIMIT 500`` and the
  bare read of ``actrone-pg bench`` beside them; the planning time of the body.

    python benchmarks/pg_call_breakdown.py [--dsn DSN] [--agents 5] [--per-agent 1000]
        [--queries 300] [--repeat 2] [--plans]

Each part run on the held connection also reports the server's CPU time for it (the backend
process's run time from ``/proc/PID/schedstat``, when the server runs on this machine): on a
busy machine wall time includes waiting for a core, CPU time mostly does not.

``--plans`` also prints ``EXPLAIN (ANALYZE, BUFFERS)`` of the body for the first query.
docs/benchmarks.md, "Where one call's time goes", has the tables this printed.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import os
import re
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from psycopg import sql
from psycopg._queries import PostgresQuery
from psycopg.adapt import Transformer

from actrone_pg import MemoryManager
from actrone_pg._embedded import given_or_temporary_server
from actrone_pg.bench.floor import BARE_READ, PLAIN_NEAREST
from actrone_pg.bench.loaded import data_arguments, loaded_schema
from actrone_pg.bench.workload import (
    SESSION_ID,
    TOKEN_BUDGET,
    AgentData,
    DatasetSpec,
    schedule,
    unit_rows,
)
from actrone_pg.budget import split_budget
from actrone_pg.migrations import _files, _render
from actrone_pg.stores.postgres import PostgresStore, builders, rows

#: hybrid_search's parameters (migrations 0013 and 0015) in order, with their types.
_PARAMS = [
    ("agent_id", "text"),
    ("embedder", "text"),
    ("terms", "text[]"),
    ("vector", "{vs}.vector"),
    ("threshold", "float8"),
    ("limit", "int"),
    ("hybrid", "bool"),
    ("rrf_k", "int"),
    ("rrf_weights", "float8[]"),
    ("relevance_weight", "float8"),
    ("recency_weight", "float8"),
    ("now", "timestamptz"),
    ("content", "bool"),
    ("candidates", "text[]"),
    ("bm25_k1", "float8"),
    ("bm25_b", "float8"),
    ("excluded", "text[]"),
    ("n_docs", "bigint"),
    ("total_length", "bigint"),
    ("doc_freqs", "int[]"),
]
#: The body cut after each step: (label, the CTE whose rows are counted; None: the whole body).
_STEPS = [
    ("candidate scan, admission, nearest 500 sorted, dense rank", "nearest"),
    ("+ BM25 statistics (agent_stats, term_stats probes)", "term_idf"),
    ("+ the candidates' rows by primary key, BM25, recency and lexical ranks", "ranked"),
    ("+ fusion", "fused"),
    ("+ final order and output (whole body)", None),
]


def _body(schema: str, vector_schema: str) -> str:
    """hybrid_search's body (its newest file), its parameters as named placeholders."""
    text = _files.read(_render.head_files()["hybrid_search"])
    body = text.split("AS $$", 1)[1].rsplit("$$", 1)[0]
    body = body.replace("{schema}", f'"{schema}"').replace("{vector_schema}", f'"{vector_schema}"')
    for name, kind in _PARAMS:
        body = re.sub(
            rf"\bp_{name}\b", f"(%({name})s::{kind.replace('{vs}', vector_schema)})", body
        )
    return body


def _cut(body: str, cte: str | None) -> str:
    if cte is None:
        return f"SELECT count(*) FROM ({body}) AS q"
    head = body[: body.rindex("\nSELECT")]
    return f"{head}\nSELECT count(*) FROM {cte}"


def _cpu_ns(pid: int) -> int | None:
    """The run time of process ``pid`` so far, in ns (None where /proc does not have it)."""
    try:
        with open(f"/proc/{pid}/schedstat", encoding="ascii") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * len(s)) - 1))]


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    data_arguments(ap, repeat=2)
    ap.add_argument("--plans", action="store_true")
    args = ap.parse_args()
    stack = contextlib.ExitStack()
    atexit.register(stack.close)
    dsn = stack.enter_context(given_or_temporary_server(args.dsn, prefix="actrone-bench-"))
    spec = DatasetSpec(agents=args.agents, per_agent=args.per_agent, queries=args.queries)
    async with loaded_schema(dsn, "breakdown", spec) as (mm, store, dataset):
        await _measure(mm, store, dataset.agents, args, dataset)


async def _measure(
    mm: MemoryManager, store: PostgresStore, agents: list[AgentData], args: Any, dataset: Any
) -> None:
    vs = store.db.vector_schema
    s_id = sql.Identifier(store.schema)
    share = split_budget(
        TOKEN_BUDGET, mm.config.budget_fraction_session, mm.config.budget_fraction_episodic
    ).episodic
    limit = mm.config.max_episodic_memories
    pairs = [(dataset.agents[a], q) for a, q in schedule(dataset, args.queries)]
    unit = {a.agent_id: unit_rows(a.query_vectors) for a in agents}
    body = _body(store.schema, vs)
    # Requests and parameters are built once per query, outside the timings that do not
    # include them.
    requests = {}
    prepared: dict[tuple[str, int], builders.Built] = {}
    entry: dict[tuple[str, int], builders.Built] = {}
    nothing: dict[tuple[str, int], builders.Built] = {}
    for agent, q in pairs:
        key = (agent.agent_id, q)
        if key in requests:
            continue
        req = await mm._retrieval._request(agent.agent_id, agent.query_texts[q], share, None, None)
        requests[key] = req
        terms = list(req.terms)
        prepared[key] = builders.retrieve(
            req, schema=store.schema, terms=terms, session=None, ef_search=store.db.ann_ef_search
        )
        entry[key] = builders.retrieve(
            req,
            schema=store.schema,
            terms=terms,
            session=(SESSION_ID, mm.config.max_session_turns, mm.config.session_ttl_seconds),
            ef_search=store.db.ann_ef_search,
        )
        # The same call with nothing admitted: the fixed cost of every call.
        nothing[key] = (entry[key][0], {**entry[key][1], "limit": 0})

    # One connection held for the pieces that run on a connection already checked out.
    # (from the pool itself: _conn() would sever it at its deadline, 35 s on)
    pool = store.db.pool
    assert pool is not None
    held: Any = await pool.getconn()
    try:
        excluded = {}
        for agent, q in pairs:
            key = (agent.agent_id, q)
            if key not in excluded:
                cur = await held.execute(
                    sql.SQL(
                        "SELECT array_agg(e.id) FROM {s}.memories AS e WHERE e.agent_id = %s"
                        " AND e.expires_at <= %s"
                    ).format(s=s_id),
                    (agent.agent_id, requests[key].now),
                )
                excluded[key] = (await cur.fetchone())[0]
        backend_pid = (await (await held.execute("SELECT pg_backend_pid()")).fetchone())[0]
        await held.execute("SET plan_cache_mode = force_generic_plan")
        await held.execute("SET enable_nestloop = off")
        cuts = [sql.SQL(_cut(body, cte)) for _, cte in _STEPS]
        search_sql = prepared[next(iter(prepared))][0]

        def body_args(key: tuple[str, int]) -> dict[str, Any]:
            p = prepared[key][1]
            names = {"agent_id": "agent"}
            out = {n: p.get(names.get(n, n)) for n, _ in _PARAMS}
            out.update(content=False, candidates=None, excluded=excluded[key])
            return out

        hybrid_alone = (
            sql.SQL("SELECT count(*) FROM {s}.hybrid_search(").format(s=s_id)
            + sql.SQL(", ".join(["%s"] * len(_PARAMS)))
            + sql.SQL(")")
        )
        nearest_sql = sql.SQL(PLAIN_NEAREST).format(s=s_id, vs=sql.Identifier(vs))
        bare_sql = sql.SQL(BARE_READ).format(s=s_id, vs=sql.Identifier(vs))
        packed_params = {key: built[1] for key, built in prepared.items()}
        sample_rows: dict[tuple[str, int], tuple[tuple[str, ...], list[tuple[Any, ...]]]] = {}
        for key in list(prepared)[:20]:
            sample_rows[key] = await store.db.fetch_tuples(held, search_sql, packed_params[key])

        async def whole(agent: AgentData, q: int) -> Any:
            return await mm.retrieve_context(
                agent.agent_id, SESSION_ID, agent.query_texts[q], TOKEN_BUDGET
            )

        async def build(agent: AgentData, q: int) -> Any:
            return await mm._retrieval._request(
                agent.agent_id, agent.query_texts[q], share, None, None
            )

        async def l1(agent: AgentData, q: int) -> Any:
            return await store.recent_turns(
                agent.agent_id,
                SESSION_ID,
                limit=mm.config.max_session_turns,
                ttl_seconds=mm.config.session_ttl_seconds,
            )

        async def l2(agent: AgentData, q: int) -> Any:
            return await store.search(requests[(agent.agent_id, q)])

        async def checkout(agent: AgentData, q: int) -> Any:
            async with store.db.conn():
                pass

        async def empty(agent: AgentData, q: int) -> Any:
            await held.execute("")

        async def statement(agent: AgentData, q: int) -> Any:
            cur = held.cursor(binary=True)
            await cur.execute(search_sql, packed_params[(agent.agent_id, q)])
            return await cur.fetchall()

        async def retrieve(agent: AgentData, q: int) -> Any:
            cur = held.cursor(binary=True)
            await cur.execute(*entry[(agent.agent_id, q)])
            return await cur.fetchall()

        async def fixed(agent: AgentData, q: int) -> Any:
            cur = held.cursor(binary=True)
            await cur.execute(*nothing[(agent.agent_id, q)])
            return await cur.fetchall()

        async def adapt(agent: AgentData, q: int) -> Any:
            pq = PostgresQuery(Transformer(held))
            pq.convert(search_sql, packed_params[(agent.agent_id, q)])

        keys = list(sample_rows)

        async def decode(agent: AgentData, q: int) -> Any:
            key = keys[q % len(keys)]
            return rows.retrieved(key[0], None, *sample_rows[key])

        async def function(agent: AgentData, q: int) -> Any:
            args = tuple(body_args((agent.agent_id, q)).values())
            cur = await held.execute(hybrid_alone, args, binary=True)
            return await cur.fetchone()

        def step(i: int) -> Callable[[AgentData, int], Awaitable[Any]]:
            async def run(agent: AgentData, q: int) -> Any:
                # prepared by psycopg after the first calls: planned once (generic plan)
                cur = await held.execute(
                    cuts[i], body_args((agent.agent_id, q)), binary=True, prepare=True
                )
                return await cur.fetchone()

            return run

        async def nearest(agent: AgentData, q: int) -> Any:
            cur = await held.execute(
                nearest_sql, (agent.agent_id, mm.embedder.name, unit[agent.agent_id][q], limit)
            )
            return await cur.fetchall()

        async def bare(agent: AgentData, q: int) -> Any:
            cur = await held.execute(bare_sql, (agent.agent_id, mm.embedder.name))
            return await cur.fetchone()

        parts: list[tuple[str, Callable[[AgentData, int], Awaitable[Any]]]] = [
            ("retrieve_context (manager, whole call)", whole),
            ("  request build (terms, cached query vector)", build),
            ("  L1: store.recent_turns (checkout included)", l1),
            ("  L2: store.search (checkout included)", l2),
            ("pool checkout + connection check (_conn)", checkout),
            ("empty query on a held connection (one round trip)", empty),
            ("retrieve() on a held connection, L2 alone (search)", statement),
            ("  parameter adaptation (no I/O)", adapt),
            ("retrieve() on a held connection (L1 + L2, retrieve_context)", retrieve),
            ("  decoding the rows (rows.retrieved, no I/O)", decode),
            ("retrieve() with nothing to rank (limit 0: the fixed cost)", fixed),
            ("hybrid_search alone, count(*)", function),
            *((f"body: {label}", step(i)) for i, (label, _) in enumerate(_STEPS)),
            ("plain ORDER BY embedding <=> q LIMIT 500", nearest),
            ("bare read of the candidate index", bare),
        ]
        for agent, q in pairs[:30]:  # warm-up
            for _, call in parts:
                await call(agent, q)
        samples: dict[str, list[float]] = {name: [] for name, _ in parts}
        cpu: dict[str, list[float]] = {name: [] for name, _ in parts}
        off_held = {l1, l2, whole, checkout}
        for _ in range(args.repeat):
            for agent, q in pairs:
                for name, call in parts:
                    c0 = _cpu_ns(backend_pid)
                    t0 = time.perf_counter_ns()
                    await call(agent, q)
                    samples[name].append((time.perf_counter_ns() - t0) / 1e6)
                    c1 = _cpu_ns(backend_pid)
                    if c0 is not None and c1 is not None and call not in off_held:
                        cpu[name].append((c1 - c0) / 1e6)
        print(
            f"{args.agents} agents × {args.per_agent:,}, threshold {dataset.threshold}, "
            f"{len(pairs) * args.repeat} calls of each part, interleaved"
        )
        print(f"load average at the end: {os.getloadavg()[0]:.1f}")
        print("| part | p50 ms | p99 ms | server CPU p50 ms |\n| --- | ---: | ---: | ---: |")
        for name, _ in parts:
            v = samples[name]
            c = f"{statistics.median(cpu[name]):.3f}" if cpu[name] else "—"
            print(f"| {name} | {statistics.median(v):.3f} | {_pct(v, 0.99):.3f} | {c} |")
        # planning: the body planned for each call (custom plan) against the generic plan
        await held.execute("SET plan_cache_mode = force_custom_plan")
        plan_ms = []
        for agent, q in pairs[:50]:
            cur = await held.execute(
                sql.SQL("EXPLAIN (ANALYZE, TIMING OFF, SUMMARY ON, FORMAT JSON) ") + cuts[-1],
                body_args((agent.agent_id, q)),
            )
            plan = (await cur.fetchone())[0][0]
            plan_ms.append(float(plan["Planning Time"]))
        print(f"planning the body afresh (custom plan): p50 {statistics.median(plan_ms):.3f} ms")
        if args.plans:
            await held.execute("SET plan_cache_mode = force_generic_plan")
            agent, q = pairs[0]
            cur = await held.execute(
                sql.SQL("EXPLAIN (ANALYZE, BUFFERS) ") + cuts[-1], body_args((agent.agent_id, q))
            )
            for (line,) in await cur.fetchall():
                print(line)
    finally:
        await held.execute("RESET ALL")
        await pool.putconn(held)


if __name__ == "__main__":
    asyncio.run(main())
