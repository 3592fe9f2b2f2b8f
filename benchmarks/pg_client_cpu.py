"""Where the client's CPU of one ``retrieve_context`` goes on PostgreSQL, beside the plain query's.

``actrone-pg bench`` prints one ratio of spec §7: the CPU time of this process for a
``retrieve_context`` call ÷ the same for the plain ``ORDER BY embedding <=> q LIMIT 500`` (the
bench's own call, :func:`actrone_pg.bench.floor.nearest_for`). This script loads the bench's data
(the same seed and sizes give the same memories, then ``ANALYZE``) and times, interleaved (each
query runs every part back to back), the CPU time of this process (``time.process_time``) for:

- the whole call, and the plain query as the bench sends it;
- ``retrieve()`` sent through the store's pool with its parameters built beforehand and its rows
  left as psycopg returns them: what any Python client of this statement pays (checkout, the
  parameters' adaptation, one round trip, 65 rows of 26 columns parsed), before any record exists;
- an empty query through the pool (checkout and one round trip, nothing else), and a one-row
  query without server work and with about 4 ms of it (the same client work: the difference is
  what the server's run on the same machine costs the client, its caches taken meanwhile);
- without I/O: the request's build (its terms and vector from the query cache),
  the parameters' adaptation (psycopg's query conversion) and the rows' decoding
  (:func:`actrone_pg.stores.postgres.rows.retrieved`, without explanations, as
  ``retrieve_context`` asks for none).

    python benchmarks/pg_client_cpu.py [--dsn DSN] [--agents 5] [--per-agent 1000]
        [--queries 300] [--repeat 2]

A part timed alone on a warm CPU (the ones without I/O) costs less than the same code run after
a round trip, when the server's work has taken the caches: read those rows as a lower bound.
docs/benchmarks.md, "The client's CPU per call", has the table this printed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from psycopg._queries import PostgresQuery
from psycopg.adapt import Transformer

from actrone_pg import MemoryManager
from actrone_pg._embedded import given_or_temporary_server
from actrone_pg.bench.floor import nearest_for
from actrone_pg.bench.loaded import data_arguments, loaded_schema
from actrone_pg.bench.workload import (
    SESSION_ID,
    TOKEN_BUDGET,
    AgentData,
    DatasetSpec,
    agents_of,
    schedule,
)
from actrone_pg.budget import split_budget
from actrone_pg.stores.postgres import PostgresStore, builders, lookups, rows

Call = Callable[[AgentData, int], Awaitable[Any]]

#: The same client work twice, one row of one integer: without server work, and while the server
#: computes (about 4 ms here, the time retrieve() takes at 5 × 1,000): what a round trip costs the
#: client in CPU when the server runs on the same machine meanwhile.
ONE_ROW = "SELECT 1"
ONE_ROW_BUSY = "SELECT count(*) FROM generate_series(1, 120000)"


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    data_arguments(ap, repeat=2)
    args = ap.parse_args()
    with given_or_temporary_server(args.dsn, prefix="actrone-bench-") as dsn:
        spec = DatasetSpec(agents=args.agents, per_agent=args.per_agent, queries=args.queries)
        async with loaded_schema(dsn, "client", spec, consolidate_after_turns=0) as loaded:
            mm, store, dataset = loaded
            await _measure(mm, store, dataset, args)


async def _measure(mm: MemoryManager, store: PostgresStore, dataset: Any, args: Any) -> None:
    db = store.db
    share = split_budget(
        TOKEN_BUDGET, mm.config.budget_fraction_session, mm.config.budget_fraction_episodic
    ).episodic
    session = (SESSION_ID, mm.config.max_session_turns, mm.config.session_ttl_seconds)
    pairs = agents_of(dataset, schedule(dataset, args.queries))
    nearest = nearest_for(mm, dataset, mm.config.max_episodic_memories)
    assert nearest is not None
    built: dict[tuple[str, int], builders.Built] = {}
    fetched: dict[tuple[str, int], tuple[tuple[str, ...], list[tuple[Any, ...]]]] = {}
    for agent, q in pairs:
        key = (agent.agent_id, q)
        if key not in built:
            request = await mm._retrieval._request(
                agent.agent_id, agent.query_texts[q], share, None, None
            )
            terms = await lookups.query_terms(db, request.query, request.terms)
            built[key] = builders.retrieve(
                request, schema=db.schema, terms=terms, session=session, ef_search=db.ann_ef_search
            )
    async with db.conn() as conn:
        for key in list(built)[:20]:
            fetched[key] = await db.fetch_tuples(conn, *built[key])
    samples = list(fetched)

    async def whole(agent: AgentData, q: int) -> Any:
        return await mm.retrieve_context(
            agent.agent_id, SESSION_ID, agent.query_texts[q], TOKEN_BUDGET
        )

    async def statement(agent: AgentData, q: int) -> Any:
        async with db.conn() as conn:
            cur = conn.cursor(binary=True)
            await cur.execute(*built[(agent.agent_id, q)])
            return await cur.fetchall()

    async def empty(agent: AgentData, q: int) -> Any:
        async with db.conn() as conn:
            await conn.execute("")

    async def one_row(agent: AgentData, q: int) -> Any:
        async with db.conn() as conn:
            return await (await conn.execute(ONE_ROW)).fetchall()

    async def one_row_busy(agent: AgentData, q: int) -> Any:
        async with db.conn() as conn:
            return await (await conn.execute(ONE_ROW_BUSY)).fetchall()

    async def build_request(agent: AgentData, q: int) -> Any:
        return await mm._retrieval._request(agent.agent_id, agent.query_texts[q], share, None, None)

    async def adapt(agent: AgentData, q: int) -> Any:
        async with db.conn() as conn:
            started = time.process_time_ns()
            PostgresQuery(Transformer(conn)).convert(*built[(agent.agent_id, q)])
            return time.process_time_ns() - started

    async def decode(agent: AgentData, q: int) -> Any:
        key = samples[q % len(samples)]
        started = time.process_time_ns()
        rows.retrieved(key[0], SESSION_ID, *fetched[key], explain=False)
        return time.process_time_ns() - started

    parts: list[tuple[str, Call, bool]] = [
        ("retrieve_context (the bench's call)", whole, False),
        ("plain ORDER BY embedding <=> q LIMIT 500 (the bench's call)", nearest.call, False),
        ("retrieve(), parameters built before, rows as psycopg returns them", statement, False),
        ("empty query (checkout, one round trip)", empty, False),
        ("one row, no server work (SELECT 1)", one_row, False),
        ("one row, the server busy for about 4 ms meanwhile", one_row_busy, False),
        ("  request build: SearchRequest, query cache hit (no I/O)", build_request, False),
        ("  parameter adaptation (no I/O)", adapt, True),
        ("  decoding the rows as retrieve_context does (no I/O)", decode, True),
    ]
    for agent, q in pairs[:50]:  # warm-up: pools, prepared statements, caches
        for _, call, _ in parts:
            await call(agent, q)
    gc.freeze()  # as the bench does, the harness's data out of the collector's sight
    cpu: dict[str, list[float]] = {name: [] for name, _, _ in parts}
    for _ in range(args.repeat):
        for agent, q in pairs:
            for name, call, own in parts:
                started = time.process_time_ns()
                out = await call(agent, q)
                taken = out if own else time.process_time_ns() - started
                cpu[name].append(taken / 1e6)
    plain = statistics.median(cpu[parts[1][0]])
    print(
        f"{args.agents} agents × {args.per_agent:,}, {len(pairs) * args.repeat} calls of each "
        f"part, interleaved; load average at the end {os.getloadavg()[0]:.1f}"
    )
    print("| part | client CPU p50 (ms) | ÷ plain query |\n| --- | ---: | ---: |")
    for name, _, _ in parts:
        p50 = statistics.median(cpu[name])
        print(f"| {name} | {p50:.3f} | {p50 / plain:.2f}× |")


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
