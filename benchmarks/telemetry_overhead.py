"""What OpenTelemetry adds to retrieval, off, absent, with the API alone and with the SDK.

Two measurements (docs/observability.md, "Measured"):

- ``--bench MODE`` runs ``actrone-pg bench --backend memory --agents 2 --per-agent 5000
  --queries 300`` in this process under one mode: ``absent`` (the ``opentelemetry`` import is
  blocked), ``off`` (``ACTRONE_OTEL_ENABLED=false``), ``api`` (installed, no provider
  configured) or ``sdk`` (the SDK's ``TracerProvider`` with a ``BatchSpanProcessor`` into an
  in-memory exporter, and a ``MeterProvider``). Run the modes interleaved, several rounds, and
  compare like with like: the machine's noise is larger than the effect.
- without arguments, one process calls ``retrieve_context`` on two managers over one
  ``InMemoryStore``, one call per mode in turn, the order rotated each round (a load spike hits
  every mode alike), first
  without a provider (the guarded method without the telemetry wrapper, off, on), then with the
  SDK configured (off, on); a nearly empty call (``get_session``) off and on without a provider,
  where the wrapper's own cost shows; and the no-op's pieces alone.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import timeit
from collections.abc import Callable
from typing import Any

BENCH = ["bench", "--backend", "memory", "--agents", "2", "--per-agent", "5000", "--queries", "300"]
MODES = ("absent", "off", "api", "sdk")


def configure_sdk() -> Callable[[], None]:
    """Set the SDK's tracer and meter providers globally; returns their shutdown."""
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(InMemorySpanExporter()))
    trace.set_tracer_provider(tracer_provider)
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    metrics.set_meter_provider(meter_provider)

    def shutdown() -> None:
        tracer_provider.shutdown()
        meter_provider.shutdown()

    return shutdown


def run_bench(mode: str) -> int:
    shutdown: Callable[[], None] | None = None
    if mode == "absent":
        sys.modules["opentelemetry"] = None  # type: ignore[assignment]
    elif mode == "off":
        os.environ["ACTRONE_OTEL_ENABLED"] = "false"
    elif mode == "sdk":
        shutdown = configure_sdk()
    from actrone_pg.cli import main

    try:
        return main(BENCH)
    finally:
        if shutdown is not None:
            shutdown()


async def compare(label: str, managers: dict[str, tuple[Any, Any]], calls: int = 3000) -> None:
    for mm, fn in managers.values():
        for i in range(100):
            await fn(mm, "a", "s", f"what about t{i % 50} and t{i % 37}", 4000)
    samples: dict[str, list[float]] = {k: [] for k in managers}
    items = list(managers.items())
    for i in range(calls):
        query = f"what about t{i % 50} and t{i % 37}"
        # Rotated, so no mode always runs first or right after another one.
        k = i % len(items)
        for key, (mm, fn) in items[k:] + items[:k]:
            t0 = time.perf_counter_ns()
            await fn(mm, "a", "s", query, 4000)
            samples[key].append((time.perf_counter_ns() - t0) / 1000)
    base = statistics.median(next(iter(samples.values())))
    for key, xs in samples.items():
        p50 = statistics.median(xs)
        p25 = statistics.quantiles(xs, n=4)[0]
        print(
            f"{label:7} {key:27} p25 {p25:7.1f}  p50 {p50:7.1f} µs"
            f"  Δp50 vs first {p50 - base:+6.1f} µs"
        )


async def cheap_call(off: Any, on: Any, rounds: int = 10, calls: int = 20_000) -> None:
    """A method that does almost nothing (``get_session`` of a missing session): the wrapper's
    own cost shows, instead of drowning in a millisecond of retrieval."""
    times: dict[str, list[float]] = {"off": [], "on": []}
    for r in range(rounds):
        order = [("off", off), ("on", on)] if r % 2 else [("on", on), ("off", off)]
        for key, mm in order:
            t0 = time.perf_counter_ns()
            for _ in range(calls):
                await mm.get_session("a", "no-such-session")
            times[key].append((time.perf_counter_ns() - t0) / calls / 1000)
    print(
        "get_session, median of blocks: off {:.2f} µs, on (API without SDK) {:.2f} µs".format(
            statistics.median(times["off"]), statistics.median(times["on"])
        )
    )


async def in_process() -> None:
    from actrone_pg import MemoryConfig, MemoryManager
    from actrone_pg._telemetry import NO_TELEMETRY
    from actrone_pg.stores.memory import InMemoryStore

    store = InMemoryStore()
    cfg = MemoryConfig(backend="memory", embedding_provider="hashing")
    off = await MemoryManager.create(cfg.replace(otel_enabled=False), store=store)
    on = await MemoryManager.create(cfg, store=store)
    texts = [f"memory {i} on topic t{i % 500} and t{i % 37}" for i in range(5000)]
    await off.inject_memories("a", texts)
    for j in range(20):
        await off.store_turn("a", "s", f"user says {j}", f"assistant answers {j}")
    traced = MemoryManager.retrieve_context
    untraced = traced.__wrapped__  # type: ignore[attr-defined]
    await compare(
        "no SDK",
        {
            "no wrapper, no-op steps": (off, untraced),
            "off (otel_enabled=False)": (off, traced),
            "on, API without SDK": (on, traced),
        },
    )
    await cheap_call(off, on)
    shutdown = configure_sdk()
    await compare(
        "SDK", {"off (otel_enabled=False)": (off, traced), "on, SDK + batch exporter": (on, traced)}
    )
    shutdown()

    async def nothing() -> int:
        return 1

    n = 200_000
    coro = nothing()
    step = timeit.timeit(lambda: NO_TELEMETRY.step("actrone.l1", coro), number=n) / n * 1e9
    coro.close()
    span = timeit.timeit(
        "with span('actrone.l1.pack'): pass", globals={"span": NO_TELEMETRY.span}, number=n
    )
    print(f"no-op step(): {step:.0f} ns, no-op span(): {span / n * 1e9:.0f} ns")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--bench", choices=MODES, help="run actrone-pg bench under this mode")
    args = parser.parse_args()
    if args.bench:
        return run_bench(args.bench)
    asyncio.run(in_process())
    return 0


if __name__ == "__main__":
    sys.exit(main())
