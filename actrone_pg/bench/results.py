"""What ``actrone-pg bench`` measures, as data: latency summaries and one run's result.

Kept apart from the workload (:mod:`actrone_pg.bench.workload`) and the timed passes
(:mod:`actrone_pg.bench.runner`) so that the reference driver's results
(:mod:`actrone_pg.bench.reference`) and the tables (:mod:`actrone_pg.bench.tables`) share them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["BenchResult", "LatencyStats"]


@dataclass(frozen=True)
class LatencyStats:
    """Latency summary in milliseconds."""

    n: int
    p50: float
    p99: float
    mean: float
    min: float
    max: float
    #: Per-run p50 and p99 when the passes were repeated (the headline figures are their medians).
    p50_runs: list[float] = field(default_factory=list)
    p99_runs: list[float] = field(default_factory=list)

    @classmethod
    def of(cls, samples_ms: Sequence[float]) -> LatencyStats:
        """Summarise samples (nearest-rank percentiles)."""
        if not samples_ms:
            return cls(0, math.nan, math.nan, math.nan, math.nan, math.nan)
        data = sorted(samples_ms)
        return cls(
            n=len(data),
            p50=_percentile(data, 50),
            p99=_percentile(data, 99),
            mean=statistics.fmean(data),
            min=data[0],
            max=data[-1],
        )

    @classmethod
    def of_runs(cls, runs: Sequence[Sequence[float]]) -> LatencyStats:
        """Summarise repeated runs: p50 and p99 are the medians of each run's p50 and p99."""
        pooled = cls.of([x for run in runs for x in run])
        per_run = [cls.of(run) for run in runs if run]
        if len(per_run) < 2:
            return pooled
        return cls(
            n=pooled.n,
            p50=statistics.median(r.p50 for r in per_run),
            p99=statistics.median(r.p99 for r in per_run),
            mean=pooled.mean,
            min=pooled.min,
            max=pooled.max,
            p50_runs=[r.p50 for r in per_run],
            p99_runs=[r.p99 for r in per_run],
        )


def _percentile(sorted_data: Sequence[float], pct: float) -> float:
    rank = max(1, math.ceil(pct / 100.0 * len(sorted_data)))
    return sorted_data[rank - 1]


@dataclass(slots=True)
class BenchResult:
    """Everything one benchmark run measured."""

    backend: str
    agents: int
    per_agent: int
    dimensions: int
    threshold: float
    seed: int
    memories: int
    ingest_seconds: float
    ingest_rate: float
    retrieve: LatencyStats
    search: LatencyStats
    recall_mean: float
    recall_min: float
    recall_queries: int
    admitted_median: float
    admitted_min: int
    admitted_max: int
    returned_median: float
    context_memories_median: float
    warmup: int
    repeats: int = 1
    notes: list[str] = field(default_factory=list)
    #: ``retrieve_context`` with ``{"tags_any": [tag]}``, by tag (``filtered`` runs only).
    retrieve_filtered: dict[str, LatencyStats] = field(default_factory=dict)
    #: Share of each agent's memories carrying each tag, and the median L2 memories in context.
    filter_share: dict[str, float] = field(default_factory=dict)
    filter_context_median: dict[str, float] = field(default_factory=dict)
    #: ``versions`` runs: updates per updated memory, memories updated, update calls per second.
    versions: int = 0
    versioned_memories: int = 0
    update_rate: float = 0.0
    retrieve_versioned: LatencyStats | None = None
    search_versioned: LatencyStats | None = None
    #: Share of timed searches whose candidates after the updates equal those before.
    versioned_same_candidates: float | None = None
    #: ``search_memories`` with its default ``limit`` (10), what users call most; ``search`` is
    #: ``limit=max_episodic_memories`` (every admitted candidate, for recall).
    search_default: LatencyStats | None = None
    #: The backend's physical floor (:mod:`actrone_pg.bench.floor`), timed over the same queries,
    #: each call right after the store's calls of the same query; ``None`` where the spec names
    #: none.
    floor_name: str = ""
    floor: LatencyStats | None = None
    #: Each pass's retrieve_context p50 ÷ floor p50: the spread of the ratio (spec §7: ±20 %).
    retrieve_floor_ratios: list[float] = field(default_factory=list)
    #: PostgreSQL's plain nearest-neighbour query (:func:`actrone_pg.bench.floor.nearest_for`),
    #: timed like the floor.
    nearest_name: str = ""
    nearest: LatencyStats | None = None
    #: CPU time of this process (``time.process_time``: every thread of it) for each
    #: retrieve_context and floor call, in ms. For the in-process store it is the call's whole
    #: work, and unlike wall time it barely grows while other processes compete for the cores;
    #: for a server's store it is only the client's part.
    retrieve_cpu: LatencyStats | None = None
    floor_cpu: LatencyStats | None = None
    #: Each pass's retrieve_context CPU p50 ÷ floor CPU p50.
    retrieve_floor_cpu_ratios: list[float] = field(default_factory=list)
    #: The same for each plain nearest-neighbour query (PostgreSQL): the client's CPU of a query
    #: that returns 500 ids, to hold the client's part of retrieve_context against (spec §7).
    nearest_cpu: LatencyStats | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)
