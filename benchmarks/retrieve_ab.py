"""An A/B of ``retrieve()`` texts on the data of ``actrone-pg bench``: server CPU, rows compared.

Each text (a file, or ``REV`` for ``sql/0024_retrieve.sql`` as git revision ``REV`` has it, or
``head`` for the working tree's) is installed beside the schema's own ``retrieve()`` as
``retrieve_<n>`` (the first is ``retrieve_0``). The same calls (those ``retrieve_context`` sends:
session turns and a packed search) then run on one held connection, round-robin over the
agents, each call through every text back to back and through the plain nearest-500 and the
bare read of ``actrone-pg bench``, so a busy moment slows them all alike; each call starts at
the next of them in turn, so that every text runs in every place equally often. Reported: wall
and server CPU p50 per text (the backend's run time, ``/proc/PID/schedstat``: on a busy machine
wall time includes waiting for a core, CPU time mostly does not), and how many calls returned
rows other than the first text's (every column compared, floats to the bit).

    python benchmarks/retrieve_ab.py [--dsn DSN] [--agents 5] [--per-agent 1000]
        [--queries 300] [--repeat 3] main head

docs/notes/2026-12-05-one-read-path.md, "The fixed cost, server side", has the runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from psycopg import sql

from actrone_pg import MemoryManager
from actrone_pg._embedded import given_or_temporary_server
from actrone_pg.bench.floor import BARE_READ, PLAIN_NEAREST
from actrone_pg.bench.loaded import data_arguments, loaded_schema
from actrone_pg.bench.workload import (
    SESSION_ID,
    TOKEN_BUDGET,
    DatasetSpec,
    in_turn,
    schedule,
)
from actrone_pg.budget import split_budget
from actrone_pg.migrations import _files
from actrone_pg.stores.postgres import PostgresStore, builders

_FILE = "actrone_pg/migrations/sql/0024_retrieve.sql"
_ROOT = Path(__file__).resolve().parent.parent


def _text(source: str) -> str:
    """The text of ``source``: a file, ``head`` (the working tree's), or a git revision."""
    if source == "head":
        return (_ROOT / _FILE).read_text(encoding="utf-8")
    if Path(source).is_file():
        return Path(source).read_text(encoding="utf-8")
    return subprocess.run(
        ["git", "show", f"{source}:{_FILE}"], cwd=_ROOT, check=True, capture_output=True, text=True
    ).stdout


def _cpu_ns(pid: int) -> int:
    with open(f"/proc/{pid}/schedstat", encoding="ascii") as f:
        return int(f.read().split()[0])


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("texts", nargs="+", help="files, git revisions, or head")
    data_arguments(ap, repeat=3)
    args = ap.parse_args()
    # Read before the data is loaded, so that a wrong name fails at once.
    texts = []
    for source in args.texts:
        try:
            texts.append(_text(source))
        except subprocess.CalledProcessError:
            ap.error(f"{source!r} is not a file, 'head' or a git revision that has {_FILE}")
    with contextlib.ExitStack() as stack:
        dsn = stack.enter_context(given_or_temporary_server(args.dsn, prefix="actrone-bench-"))
        spec = DatasetSpec(agents=args.agents, per_agent=args.per_agent, queries=args.queries)
        async with loaded_schema(dsn, "ab", spec) as (mm, store, dataset):
            await _measure(mm, store, args, dataset, texts)


async def _measure(
    mm: MemoryManager, store: PostgresStore, args: Any, dataset: Any, texts: list[str]
) -> None:
    vs = store.db.vector_schema
    s_id = sql.Identifier(store.schema)
    share = split_budget(
        TOKEN_BUDGET, mm.config.budget_fraction_session, mm.config.budget_fraction_episodic
    ).episodic
    session = (SESSION_ID, mm.config.max_session_turns, mm.config.session_ttl_seconds)
    calls = []
    for a, q in schedule(dataset, args.queries):
        agent = dataset.agents[a]
        req = await mm._retrieval._request(agent.agent_id, agent.query_texts[q], share, None, None)
        built = builders.retrieve(
            req, schema=store.schema, terms=list(req.terms), session=session, ef_search=0
        )
        calls.append((built, req))
    pool = store.db.pool
    assert pool is not None
    held: Any = await pool.getconn()
    try:
        names = [f"retrieve_{i}" for i in range(len(args.texts))]
        for name, source in zip(names, texts, strict=True):
            text = source.replace(
                "FUNCTION {schema}.retrieve(", "FUNCTION {schema}." + name + "(", 1
            )
            await held.execute(_files.fill(text, store.schema, vs))
        pid = (await (await held.execute("SELECT pg_backend_pid()")).fetchone())[0]
        nearest_sql = sql.SQL(PLAIN_NEAREST).format(s=s_id, vs=sql.Identifier(vs))
        bare_sql = sql.SQL(BARE_READ).format(s=s_id, vs=sql.Identifier(vs))
        limit = mm.config.max_episodic_memories

        async def run(part: str, built: builders.Built, req: Any) -> list[Any]:
            if part == "plain nearest-500":
                params: Any = (req.agent_id, req.embedder, req.vector, limit)
                cur = await held.execute(nearest_sql, params, prepare=True)
            elif part == "bare read":
                cur = await held.execute(bare_sql, (req.agent_id, req.embedder), prepare=True)
            else:
                text = built[0].as_string(held).replace(".retrieve(", f".{part}(", 1)
                cur = await held.execute(text, built[1], prepare=True)
            return list(await cur.fetchall())

        parts = [*names, "plain nearest-500", "bare read"]
        differing = dict.fromkeys(names, 0)
        for built, req in calls:
            first = await run(names[0], built, req)
            for name in names[1:]:
                differing[name] += await run(name, built, req) != first
        for built, req in calls[:30]:  # warm-up
            for part in parts:
                await run(part, built, req)
        wall: dict[str, list[float]] = {p: [] for p in parts}
        cpu: dict[str, list[float]] = {p: [] for p in parts}
        for _ in range(args.repeat):
            for k, (built, req) in enumerate(calls):
                # Each call starts at the next part in turn: the part that runs first after a
                # call of another kind reads measurably slower than the ones after it, whatever
                # its text (docs/notes/2026-12-05-one-read-path.md, "The order of an A/B").
                for part in in_turn(parts, k):
                    c0, t0 = _cpu_ns(pid), time.perf_counter_ns()
                    await run(part, built, req)
                    t1, c1 = time.perf_counter_ns(), _cpu_ns(pid)
                    wall[part].append((t1 - t0) / 1e6)
                    cpu[part].append((c1 - c0) / 1e6)
        print(
            f"{args.agents} agents × {args.per_agent:,}, {len(calls) * args.repeat} calls of each,"
            f" interleaved; load average at the end {os.getloadavg()[0]:.1f}"
        )
        near = statistics.median(cpu["plain nearest-500"])
        print("| text | wall p50 ms | server CPU p50 ms | ÷ plain nearest (CPU) | rows differ |")
        print("| --- | ---: | ---: | ---: | ---: |")
        labels = dict(zip(names, args.texts, strict=True))
        for part in parts:
            c = statistics.median(cpu[part])
            diff = str(differing[part]) if part in differing else "—"
            print(
                f"| {labels.get(part, part)} | {statistics.median(wall[part]):.3f} | {c:.3f} |"
                f" {c / near:.2f}× | {diff} |"
            )
    finally:
        await held.execute("RESET ALL")
        await pool.putconn(held)


if __name__ == "__main__":
    asyncio.run(main())
