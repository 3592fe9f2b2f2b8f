"""The tables and the plot ``actrone-pg bench`` prints, built from its results (no I/O but the
plot's file)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from actrone_pg.bench.results import BenchResult, LatencyStats
from actrone_pg.bench.workload import FILTER_TAGS

__all__ = [
    "comparison_rows",
    "comparison_table",
    "growth_rows",
    "growth_table",
    "plot",
    "result_table",
]


def _fmt(value: float, digits: int = 2) -> str:
    return f"{value:,.{digits}f}"


def _runs(values: list[float]) -> str:
    return " / ".join(f"{v:.2f}" if v < 10 else f"{v:.1f}" for v in values) if values else "—"


def result_table(results: list[BenchResult], title: str) -> Any:
    """One column per run, one row per figure (fits an 80-column terminal)."""
    from rich.table import Table

    table = Table(title=title)
    table.add_column("")
    for r in results:
        table.add_column(r.backend, justify="right")
    rows: list[tuple[str, list[str]]] = [
        ("agents × memories", [f"{r.agents} × {r.per_agent:,}" for r in results]),
        ("admission threshold", [f"{r.threshold}" for r in results]),
        ("ingest (memories/s)", [_fmt(r.ingest_rate, 0) for r in results]),
        ("retrieve_context p50 (ms)", [_fmt(r.retrieve.p50) for r in results]),
        ("retrieve_context p99 (ms)", [_fmt(r.retrieve.p99) for r in results]),
        ("retrieve_context mean (ms)", [_fmt(r.retrieve.mean) for r in results]),
        ("search_memories p50 (ms), limit=500", [_fmt(r.search.p50) for r in results]),
        ("search_memories p99 (ms), limit=500", [_fmt(r.search.p99) for r in results]),
        (
            "search_memories p50 (ms), limit=10",
            [_stat(r.search_default, "p50") for r in results],
        ),
        (
            "search_memories p99 (ms), limit=10",
            [_stat(r.search_default, "p99") for r in results],
        ),
        ("retrieve p50 per pass (ms)", [_runs(r.retrieve.p50_runs) for r in results]),
        ("search p50 per pass (ms)", [_runs(r.search.p50_runs) for r in results]),
        (
            "timed calls (each), passes",
            [f"{r.retrieve.n:,}, {max(1, len(r.retrieve.p50_runs))}" for r in results],
        ),
        ("candidate recall mean", [f"{r.recall_mean:.4f}" for r in results]),
        ("candidate recall min", [f"{r.recall_min:.4f}" for r in results]),
        (
            "admitted by exact scan, median [min–max]",
            [f"{r.admitted_median:,.0f} [{r.admitted_min:,}–{r.admitted_max:,}]" for r in results],
        ),
        ("candidates returned, median", [f"{r.returned_median:,.0f}" for r in results]),
        ("L2 memories in context, median", [f"{r.context_memories_median:,.0f}" for r in results]),
    ]
    rows.extend(_floor_rows(results))
    rows.extend(_filter_rows(results))
    rows.extend(_version_rows(results))
    for label, values in rows:
        table.add_row(label, *values)
    return table


def _stat(stats: LatencyStats | None, pick: str) -> str:
    return "—" if stats is None else _fmt(getattr(stats, pick))


def _ratio(stats: LatencyStats | None, floor: LatencyStats | None) -> str:
    if stats is None or floor is None or not floor.p50 > 0:
        return "—"
    return f"{stats.p50 / floor.p50:.2f}×"


def _floor_rows(results: list[BenchResult]) -> list[tuple[str, list[str]]]:
    """The physical floor of spec §7, the plain nearest-neighbour query beside it, and
    retrieve_context's ratio to each, when measured."""
    rows: list[tuple[str, list[str]]] = []
    if any(r.floor is not None for r in results):
        rows += [
            ("floor p50 (ms)", [_stat(r.floor, "p50") for r in results]),
            ("floor p99 (ms)", [_stat(r.floor, "p99") for r in results]),
            (
                "floor p50 per pass (ms)",
                [_runs(r.floor.p50_runs if r.floor else []) for r in results],
            ),
            ("  floor", [r.floor_name or "—" for r in results]),
            ("retrieve_context p50 ÷ floor p50", [_ratio(r.retrieve, r.floor) for r in results]),
            (
                "  the same ratio per pass",
                [" / ".join(f"{x:.2f}" for x in r.retrieve_floor_ratios) or "—" for r in results],
            ),
        ]
    # CPU time where it is the whole call's work: the in-process store (docs/benchmarks.md).
    if any(r.floor_cpu is not None and r.backend == "memory" for r in results):
        rows += [
            (
                "retrieve_context CPU p50 (ms)",
                [_stat(r.retrieve_cpu, "p50") if r.backend == "memory" else "—" for r in results],
            ),
            ("floor CPU p50 (ms)", [_stat(r.floor_cpu, "p50") for r in results]),
            (
                "retrieve_context ÷ floor, CPU p50",
                [_ratio(r.retrieve_cpu, r.floor_cpu) for r in results],
            ),
            (
                "  the same ratio per pass",
                [
                    " / ".join(f"{x:.2f}" for x in r.retrieve_floor_cpu_ratios) or "—"
                    for r in results
                ],
            ),
        ]
    if any(r.nearest is not None for r in results):
        rows += [
            (
                "plain nearest p50 (ms)",
                [_stat(r.nearest, "p50") for r in results],
            ),
            ("  query", [r.nearest_name or "—" for r in results]),
            (
                "retrieve_context p50 ÷ plain nearest p50",
                [_ratio(r.retrieve, r.nearest) for r in results],
            ),
        ]
    # The client's own CPU (this process) against the plain query's (spec §7).
    if any(r.nearest_cpu is not None for r in results):
        rows += [
            (
                "client CPU p50, retrieve_context (ms)",
                [_stat(r.retrieve_cpu, "p50") if r.nearest_cpu else "—" for r in results],
            ),
            ("client CPU p50, plain nearest (ms)", [_stat(r.nearest_cpu, "p50") for r in results]),
            (
                "client CPU, retrieve_context ÷ plain nearest",
                [_ratio(r.retrieve_cpu, r.nearest_cpu) for r in results],
            ),
        ]
    return rows


def _filter_rows(results: list[BenchResult]) -> list[tuple[str, list[str]]]:
    """Rows of the ``--filters`` passes, when any result has them."""
    rows: list[tuple[str, list[str]]] = []
    for tag, _ in FILTER_TAGS:
        if not any(tag in r.retrieve_filtered for r in results):
            continue
        share = next(r.filter_share[tag] for r in results if tag in r.filter_share)
        name = f'retrieve_context, tags_any ["{tag}"] ({share:.0%})'
        for pick in ("p50", "p99"):
            rows.append(
                (
                    f"{name} {pick} (ms)",
                    [_stat(r.retrieve_filtered.get(tag), pick) for r in results],
                )
            )
        if any(r.floor is not None for r in results):
            rows.append(
                (
                    f"  p50 ÷ floor p50 ({tag})",
                    [_ratio(r.retrieve_filtered.get(tag), r.floor) for r in results],
                )
            )
        rows.append(
            (
                f"  L2 memories in context, median ({tag})",
                [
                    f"{r.filter_context_median[tag]:,.0f}"
                    if tag in r.filter_context_median
                    else "—"
                    for r in results
                ],
            )
        )
    return rows


def _version_rows(results: list[BenchResult]) -> list[tuple[str, list[str]]]:
    """Rows of the ``--versions`` passes, when any result has them."""
    if not any(r.versions for r in results):
        return []
    return [
        (
            "memories updated × versions",
            [f"{r.versioned_memories:,} × {r.versions}" for r in results],
        ),
        ("update_memory (calls/s)", [_fmt(r.update_rate, 0) for r in results]),
        (
            "retrieve_context after updates p50 (ms)",
            [_stat(r.retrieve_versioned, "p50") for r in results],
        ),
        (
            "retrieve_context after updates p99 (ms)",
            [_stat(r.retrieve_versioned, "p99") for r in results],
        ),
        (
            "search_memories after updates p50 (ms)",
            [_stat(r.search_versioned, "p50") for r in results],
        ),
        (
            "search_memories after updates p99 (ms)",
            [_stat(r.search_versioned, "p99") for r in results],
        ),
        (
            "same candidates after updates",
            [
                "—" if r.versioned_same_candidates is None else f"{r.versioned_same_candidates:.4f}"
                for r in results
            ],
        ),
    ]


def comparison_rows(ours: BenchResult, ref: BenchResult) -> list[dict[str, Any]]:
    """Side-by-side figures; ``ratio`` is how many times better actrone_pg is."""
    rows = [
        {
            "metric": "ingest (memories/s)",
            "actrone_pg": ours.ingest_rate,
            "reference": ref.ingest_rate,
            "ratio": ours.ingest_rate / ref.ingest_rate,
        }
    ]
    for name, a, b in (
        ("retrieve_context p50 (ms)", ours.retrieve.p50, ref.retrieve.p50),
        ("retrieve_context p99 (ms)", ours.retrieve.p99, ref.retrieve.p99),
        ("search_memories p50 (ms)", ours.search.p50, ref.search.p50),
        ("search_memories p99 (ms)", ours.search.p99, ref.search.p99),
    ):
        rows.append({"metric": name, "actrone_pg": a, "reference": b, "ratio": b / a})
    rows.append(
        {
            "metric": "candidate recall (mean)",
            "actrone_pg": ours.recall_mean,
            "reference": ref.recall_mean,
            "ratio": None,
        }
    )
    return rows


def comparison_table(rows: list[dict[str, Any]], ref_name: str, where: str) -> Any:
    from rich.table import Table

    table = Table(title=f"actrone_pg vs {ref_name} ({where})")
    table.add_column("metric")
    table.add_column("actrone_pg", justify="right")
    table.add_column(ref_name, justify="right")
    table.add_column("× better", justify="right")
    for row in rows:
        digits = 4 if "recall" in row["metric"] else (0 if "ingest" in row["metric"] else 2)
        ratio = "" if row["ratio"] is None else f"{row['ratio']:.1f}×"
        table.add_row(
            row["metric"], _fmt(row["actrone_pg"], digits), _fmt(row["reference"], digits), ratio
        )
    return table


def growth_rows(results: list[BenchResult]) -> list[dict[str, Any]]:
    base = results[0]
    rows = []
    for r in results:
        rows.append(
            {
                "per_agent": r.per_agent,
                "size_factor": r.per_agent / base.per_agent,
                "retrieve_p50": r.retrieve.p50,
                "retrieve_p99": r.retrieve.p99,
                "search_p50": r.search.p50,
                "search_p99": r.search.p99,
                "retrieve_p50_growth": r.retrieve.p50 / base.retrieve.p50,
                "search_p50_growth": r.search.p50 / base.search.p50,
                "ingest_rate": r.ingest_rate,
                "recall_mean": r.recall_mean,
            }
        )
    return rows


def growth_table(rows: list[dict[str, Any]], backend: str) -> Any:
    from rich.table import Table

    first = rows[0]["per_agent"]
    table = Table(title=f"latency growth with memories per agent ({backend}, 1 agent)")
    # Short headers: the table must fit an 80-column terminal.
    table.add_column("memories", justify="right", min_width=8, no_wrap=True)
    for col in ("retr p50", "retr p99", "srch p50", "srch p99", "retr ×", "srch ×", "recall"):
        table.add_column(col, justify="right")
    table.caption = (
        "latencies in ms (retr = retrieve_context, srch = search_memories); "
        f"× = p50 relative to {first:,} memories"
    )
    for row in rows:
        table.add_row(
            f"{row['per_agent']:,}",
            _fmt(row["retrieve_p50"]),
            _fmt(row["retrieve_p99"]),
            _fmt(row["search_p50"]),
            _fmt(row["search_p99"]),
            f"{row['retrieve_p50_growth']:.2f}×",
            f"{row['search_p50_growth']:.2f}×",
            f"{row['recall_mean']:.3f}",
        )
    return table


def plot(rows: list[dict[str, Any]], backend: str, path: Path) -> str:
    """Save the growth plot; returns a message saying where (or why not)."""
    from actrone_pg.bench import charts

    plt = charts.pyplot()
    if plt is None:
        return charts.MISSING
    sizes = [r["per_agent"] for r in rows]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for key, label in (
        ("retrieve_p50", "retrieve_context p50"),
        ("retrieve_p99", "retrieve_context p99"),
        ("search_p50", "search_memories p50"),
        ("search_p99", "search_memories p99"),
    ):
        ax.plot(sizes, [r[key] for r in rows], marker="o", label=label)
    base = rows[0]["retrieve_p50"]
    ax.plot(
        sizes,
        [base * s / sizes[0] for s in sizes],
        linestyle=":",
        color="grey",
        label="linear growth from retrieve p50",
    )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("memories per agent")
    ax.set_ylabel("latency (ms)")
    ax.set_title(f"actrone_pg latency vs agent size ({backend})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    charts.save(plt, fig, path)
    return f"plot saved to {path}"
