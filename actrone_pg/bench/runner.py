"""The timed passes of ``actrone-pg bench``: ingest, retrieval, the floors beside it, recall.

:func:`run_benchmark` runs one backend over a dataset of :mod:`actrone_pg.bench.workload` (whose
module doc describes the data, the optional filter and version passes and the recall) and
returns a :class:`~actrone_pg.bench.results.BenchResult`. Free of terminal output, so the
command (:mod:`actrone_pg.bench.command`) and the smoke test share it.
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from actrone_pg.bench.results import BenchResult, LatencyStats
from actrone_pg.bench.workload import (
    FILTER_TAGS,
    SESSION_ID,
    TOKEN_BUDGET,
    VERSION_EVERY,
    AgentData,
    Dataset,
    FixedVectorEmbedder,
    Progress,
    agents_of,
    exact_candidates,
    in_turn,
    ingest,
    schedule,
    tie_keys,
    unit_rows,
)
from actrone_pg.manager import MemoryManager

if TYPE_CHECKING:
    from actrone_pg.bench.floor import Floor

__all__ = ["run_benchmark"]


async def run_benchmark(
    mm: MemoryManager,
    embedder: FixedVectorEmbedder,
    dataset: Dataset,
    *,
    queries: int | None = None,
    warmup: int = 50,
    batch_size: int = 1000,
    progress: Progress | None = None,
    clean: bool = True,
    repeats: int = 1,
    after_ingest: Callable[[], Awaitable[None]] | None = None,
    query_progress: Progress | None = None,
    filtered: bool = False,
    versions: int = 0,
    floor: Floor | None = None,
    nearest: Floor | None = None,
) -> BenchResult:
    """Ingest ``dataset`` through ``mm``, then time retrieval and measure recall.

    The timed passes run ``repeats`` times; in each, every query goes through
    ``retrieve_context``, ``search_memories`` with ``limit=max_episodic_memories`` and with the
    default limit, then ``floor`` and ``nearest`` (if given), back to back. Recall is measured
    on the first pass.
    ``after_ingest`` (untimed) runs between ingest and the queries, for example ``ANALYZE``.
    ``progress`` is called with the memories of each ingested batch, ``query_progress`` with 1
    after each timed call (``3 × queries × repeats`` in all, ``queries × repeats`` more for each
    of ``floor`` and ``nearest``, plus ``len(FILTER_TAGS) × queries × repeats`` with
    ``filtered`` and ``2 × queries × repeats`` with ``versions``).

    ``filtered`` and ``versions`` add the passes described in the module doc, after the
    unfiltered ones.

    ``mm`` must use ``embedder`` and the dataset's threshold. With ``clean`` every agent of the
    dataset is erased first (the benchmark's agent ids start with ``bench-agent-``).
    """
    if versions < 0:
        raise ValueError("versions must be 0 or more")
    if mm.relevance_threshold != dataset.threshold:
        raise ValueError("the manager's relevance_threshold must be the dataset's threshold")
    spec = dataset.spec
    queries = spec.queries if queries is None else queries
    limit = mm.config.max_episodic_memories
    for agent in dataset.agents:
        embedder.add(agent.texts, agent.vectors)
        embedder.add(agent.query_texts, agent.query_vectors)
        if clean:
            await mm.erase_agent(agent.agent_id)

    # The harness's own data (100,000 texts and vectors, their dicts) is static: move it out of
    # the garbage collector's sight. Left in, every full collection walked it, and those pauses
    # became search_memories' p99 (docs/notes/benchmarks.md, "Measurements behind the code").
    # Objects the store creates from here on (the in-memory store's memories) are still collected.
    gc.freeze()
    try:
        seconds = await ingest(
            mm, dataset, batch_size=batch_size, progress=progress, filtered=filtered
        )
        for agent in dataset.agents:
            for j, (user, assistant) in enumerate(agent.turns):
                await mm.store_turn(
                    agent.agent_id, SESSION_ID, user, assistant, turn_id=f"{agent.agent_id}-t{j}"
                )

        if after_ingest is not None:
            await after_ingest()

        async def retrieve(agent: AgentData, q: int) -> Any:
            return await mm.retrieve_context(
                agent.agent_id, SESSION_ID, agent.query_texts[q], TOKEN_BUDGET
            )

        async def search(agent: AgentData, q: int) -> Any:
            return await mm.search_memories(agent.agent_id, agent.query_texts[q], limit=limit)

        # Warm-up: caches, connection pools, query plans, the in-memory store's matrices.
        for agent, q in agents_of(dataset, schedule(dataset, warmup)):
            await retrieve(agent, q)
            await search(agent, q)

        async def search_default(agent: AgentData, q: int) -> Any:
            return await mm.search_memories(agent.agent_id, agent.query_texts[q])

        # Every timed call of a query runs back to back with the others of the same query
        # (floor and plain query included), so a busy second of the machine slows them alike
        # and their ratios hold; timed one pass after another, the floor once read 0.15 ms in
        # one run and 12 ms in the next of the same command.
        calls: list[tuple[str, Callable[[AgentData, int], Awaitable[Any]]]] = [
            ("retrieve", retrieve),
            ("search", search),
            ("search_default", search_default),
        ]
        if floor is not None:
            calls.append(("floor", floor.call))
        if nearest is not None:
            calls.append(("nearest", nearest.call))
        runs: dict[str, list[list[float]]] = {name: [] for name, _ in calls}
        cpu_runs: dict[str, list[list[float]]] = {"retrieve": [], "floor": [], "nearest": []}
        context_sizes: list[int] = []
        recalls: list[float] = []
        admitted: list[int] = []
        returned: list[int] = []
        found: list[tuple[str, ...]] = []
        pairs = agents_of(dataset, schedule(dataset, queries))
        for rep in range(repeats):
            samples: dict[str, list[float]] = {name: [] for name, _ in calls}
            cpu: dict[str, list[float]] = {name: [] for name in cpu_runs}
            for k, (agent, q) in enumerate(pairs):
                # Each query starts at the next call in turn: in a fixed order the plain query,
                # last, found the agent's index pages its own search had just read.
                for name, call in in_turn(calls, k):
                    c0 = time.process_time_ns()
                    t0 = time.perf_counter_ns()
                    out = await call(agent, q)
                    samples[name].append((time.perf_counter_ns() - t0) / 1e6)
                    if name in cpu:
                        cpu[name].append((time.process_time_ns() - c0) / 1e6)
                    if rep == 0 and name == "retrieve":
                        context_sizes.append(len(out.episodic_memories))
                    elif rep == 0 and name == "search":
                        # A tuple of strings, not a set: the collector stops tracking such
                        # tuples, whereas 1,000 live sets of 500 ids made every full collection
                        # walk 500,000 entries, pauses that became search_memories' p99
                        # (docs/benchmarks.md).
                        found.append(tuple(h.id for h in out))
                    del out
                    if query_progress is not None:
                        query_progress(1)
            for name, taken in samples.items():
                runs[name].append(taken)
            for name, taken in cpu.items():
                cpu_runs[name].append(taken)
        retrieve_runs, search_runs = runs["retrieve"], runs["search"]
        floor_stats = LatencyStats.of_runs(runs["floor"]) if floor is not None else None
        nearest_stats = LatencyStats.of_runs(runs["nearest"]) if nearest is not None else None

        extra = await _filter_and_version_passes(
            mm, dataset, pairs, found, filtered, versions, repeats, query_progress
        )

        # Stored vectors, normalised exactly as the manager normalised them, for the exact scan.
        stored = {a.agent_id: unit_rows(a.vectors) for a in dataset.agents}
        ties = {a.agent_id: tie_keys(a) for a in dataset.agents}
        # Recall after all timing: numpy's exact scan between timed calls would leave BLAS threads
        # spinning on this 2-core machine and slow the next call down.
        for (agent, q), got in zip(pairs, found, strict=True):
            qv = unit_rows(agent.query_vectors[q : q + 1])[0]
            n_admitted, exact = exact_candidates(
                stored[agent.agent_id], qv, dataset.threshold, limit, ties[agent.agent_id]
            )
            admitted.append(n_admitted)
            returned.append(len(got))
            want = {agent.ids[int(i)] for i in exact}
            recalls.append(len(want.intersection(got)) / len(want) if want else 1.0)

        return BenchResult(
            backend=mm.backend,
            agents=spec.agents,
            per_agent=spec.per_agent,
            dimensions=spec.dimensions,
            threshold=dataset.threshold,
            seed=spec.seed,
            memories=dataset.total_memories,
            ingest_seconds=seconds,
            ingest_rate=dataset.total_memories / seconds if seconds > 0 else math.inf,
            retrieve=LatencyStats.of_runs(retrieve_runs),
            search=LatencyStats.of_runs(search_runs),
            search_default=LatencyStats.of_runs(runs["search_default"]),
            retrieve_floor_ratios=_pass_ratios(retrieve_runs, runs.get("floor")),
            recall_mean=statistics.fmean(recalls),
            recall_min=min(recalls),
            recall_queries=len(recalls),
            admitted_median=statistics.median(admitted),
            admitted_min=min(admitted),
            admitted_max=max(admitted),
            returned_median=statistics.median(returned),
            context_memories_median=statistics.median(context_sizes),
            warmup=warmup,
            repeats=repeats,
            floor_name="" if floor is None else floor.name,
            floor=floor_stats,
            nearest_name="" if nearest is None else nearest.name,
            nearest=nearest_stats,
            retrieve_cpu=LatencyStats.of_runs(cpu_runs["retrieve"]),
            floor_cpu=LatencyStats.of_runs(cpu_runs["floor"]) if floor is not None else None,
            nearest_cpu=(
                LatencyStats.of_runs(cpu_runs["nearest"]) if nearest is not None else None
            ),
            retrieve_floor_cpu_ratios=_pass_ratios(
                cpu_runs["retrieve"], cpu_runs["floor"] if floor is not None else None
            ),
            **extra,
        )
    finally:
        gc.unfreeze()


def _pass_ratios(runs: list[list[float]], floor: list[list[float]] | None) -> list[float]:
    """Each pass's p50 of ``runs`` ÷ the same pass's p50 of ``floor``."""
    if not floor:
        return []
    return [
        LatencyStats.of(a).p50 / LatencyStats.of(b).p50
        for a, b in zip(runs, floor, strict=True)
        if a and b and LatencyStats.of(b).p50 > 0
    ]


async def _timed_runs(
    call: Callable[[AgentData, int], Awaitable[Any]],
    pairs: list[tuple[AgentData, int]],
    repeats: int,
    query_progress: Progress | None,
) -> tuple[list[list[float]], list[Any]]:
    """``repeats`` timed passes of ``call`` over ``pairs``; returns the samples and pass 1's."""
    runs: list[list[float]] = []
    first: list[Any] = []
    for rep in range(repeats):
        samples: list[float] = []
        for agent, q in pairs:
            t0 = time.perf_counter_ns()
            out = await call(agent, q)
            samples.append((time.perf_counter_ns() - t0) / 1e6)
            if rep == 0:
                first.append(out)
            if query_progress is not None:
                query_progress(1)
        runs.append(samples)
    return runs, first


async def _filter_and_version_passes(
    mm: MemoryManager,
    dataset: Dataset,
    pairs: list[tuple[AgentData, int]],
    found: list[tuple[str, ...]],
    filtered: bool,
    versions: int,
    repeats: int,
    query_progress: Progress | None,
) -> dict[str, Any]:
    """The optional passes of the module doc; returns :class:`BenchResult` fields."""
    out: dict[str, Any] = {}
    limit = mm.config.max_episodic_memories
    if filtered:
        stats: dict[str, LatencyStats] = {}
        share: dict[str, float] = {}
        context: dict[str, float] = {}
        for tag, every in FILTER_TAGS:
            flt = {"tags_any": [tag]}

            async def retrieve(agent: AgentData, q: int, flt: dict[str, Any] = flt) -> Any:
                return await mm.retrieve_context(
                    agent.agent_id, SESSION_ID, agent.query_texts[q], TOKEN_BUDGET, filters=flt
                )

            runs, ctxs = await _timed_runs(retrieve, pairs, repeats, query_progress)
            stats[tag] = LatencyStats.of_runs(runs)
            n = dataset.spec.per_agent
            share[tag] = len(range(0, n, every)) / n
            context[tag] = statistics.median(len(c.episodic_memories) for c in ctxs)
        out.update(retrieve_filtered=stats, filter_share=share, filter_context_median=context)
    if versions:
        updated = 0
        t0 = time.perf_counter()
        for agent in dataset.agents:
            for i in range(1, len(agent.ids), VERSION_EVERY):
                for k in range(versions):
                    await mm.update_memory(
                        agent.agent_id, agent.ids[i], metadata={"bench_version": k + 1}
                    )
            updated += len(range(1, len(agent.ids), VERSION_EVERY))
        elapsed = time.perf_counter() - t0

        async def retrieve_all(agent: AgentData, q: int) -> Any:
            return await mm.retrieve_context(
                agent.agent_id, SESSION_ID, agent.query_texts[q], TOKEN_BUDGET
            )

        async def search_all(agent: AgentData, q: int) -> Any:
            hits = await mm.search_memories(agent.agent_id, agent.query_texts[q], limit=limit)
            return tuple(h.id for h in hits)

        r_runs, _ = await _timed_runs(retrieve_all, pairs, repeats, query_progress)
        s_runs, after = await _timed_runs(search_all, pairs, repeats, query_progress)
        same = sum(set(a) == set(b) for a, b in zip(found, after, strict=True))
        out.update(
            versions=versions,
            versioned_memories=updated,
            update_rate=updated * versions / elapsed if elapsed > 0 else math.inf,
            retrieve_versioned=LatencyStats.of_runs(r_runs),
            search_versioned=LatencyStats.of_runs(s_runs),
            versioned_same_candidates=same / len(found) if found else 1.0,
        )
    return out
