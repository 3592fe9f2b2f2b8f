"""Embedding throughput of all-MiniLM-L6-v2 (ONNX) and retrieve_context with it in the loop.

    python benchmarks/embedding_throughput.py [--model-dir DIR] [--memories 2000]

Prints, for this machine:

* texts per second at batch 1 and batch 64 (from the median per-call time over repeats) with the
  median and p99 of the per-call latency;
* ingest rate through ``MemoryManager.inject_memories`` (batches of ``embedding_batch_size``);
* ``retrieve_context`` latency on the in-memory backend with ``--memories`` memories, once with a
  fresh query every call (the query is embedded: the real embedder in the loop) and once with a
  repeated query (served from the query-embedding cache), medians and p99.

The model directory defaults to the test export (``scripts/export_test_model.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import time
from pathlib import Path

from actrone_pg import MemoryConfig, MemoryManager
from actrone_pg.embedders.onnx import OnnxEmbedder

SUBJECTS = [
    "The user",
    "Her manager",
    "The user's brother",
    "Their landlord",
    "The team",
    "His doctor",
    "The user's partner",
    "Our client",
]
VERBS = [
    "prefers",
    "asked about",
    "is planning",
    "mentioned",
    "wants to avoid",
    "booked",
    "is worried about",
    "recommended",
]
OBJECTS = [
    "a window seat on long flights",
    "vegetarian restaurants near the office",
    "the quarterly budget review on Thursday",
    "a trip to Lisbon in March",
    "peanut-free snacks for the kids",
    "switching the database to PostgreSQL",
    "running a half marathon in spring",
    "renewing the passport before August",
    "jazz concerts on weekends",
    "a new laptop with more memory",
    "the dentist appointment next Tuesday",
    "learning Japanese before the holiday",
]
# One paraphrase per object above, so a query admits the ~1/12 of the memories it is about.
QUERY_STEMS = [
    "seat preference on planes",
    "diet and places to eat",
    "finance meetings this week",
    "travel to Portugal",
    "snacks for children with allergies",
    "database migration",
    "races and running",
    "travel documents",
    "music on weekends",
    "computer hardware",
    "dental care",
    "studying a language",
]


def memory_texts(n: int) -> list[str]:
    """``n`` distinct, sentence-like memories."""
    out: list[str] = []
    i = 0
    while len(out) < n:
        s = SUBJECTS[i % len(SUBJECTS)]
        v = VERBS[(i // len(SUBJECTS)) % len(VERBS)]
        o = OBJECTS[(i // (len(SUBJECTS) * len(VERBS))) % len(OBJECTS)]
        out.append(f"{s} {v} {o} (note {i}).")
        i += 1
    return out


def pct(values: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(p / 100 * len(ordered) + 0.5) - 1))]


async def throughput(emb: OnnxEmbedder, batch: int, calls: int) -> dict[str, float]:
    """Per-call latencies of ``calls`` calls of ``batch`` texts each."""
    texts = memory_texts(batch * calls + batch)
    await emb.embed_batch(texts[:batch])  # warm-up: first run allocates
    lat = []
    for c in range(calls):
        chunk = texts[batch * (c + 1) : batch * (c + 2)]
        t0 = time.perf_counter()
        await emb.embed_batch(chunk)
        lat.append(time.perf_counter() - t0)
    med = statistics.median(lat)
    return {
        "texts_per_s": batch / med,
        "median_ms": med * 1000,
        "p99_ms": pct(lat, 99) * 1000,
    }


async def retrieval(emb: OnnxEmbedder, memories: int, queries: int) -> dict[str, object]:
    """Ingest ``memories`` memories, then time fresh and repeated queries."""
    cfg = MemoryConfig(backend="memory", query_cache_size=4096)
    async with await MemoryManager.create(cfg, embedder=emb) as mm:
        texts = memory_texts(memories)
        t0 = time.perf_counter()
        await mm.inject_memories("bench", texts)
        ingest_s = time.perf_counter() - t0
        await mm.store_turn("bench", "s", "hello", "hi, how can I help?")
        fresh, cached, admitted = [], [], []
        for i in range(queries):
            q = f"{QUERY_STEMS[i % len(QUERY_STEMS)]} #{i}"
            t0 = time.perf_counter()
            ctx = await mm.retrieve_context("bench", "s", q, 2000)
            fresh.append(time.perf_counter() - t0)
            admitted.append(ctx.candidates_considered)
        for i in range(queries):
            q = f"{QUERY_STEMS[i % len(QUERY_STEMS)]} #{i}"  # now in the cache
            t0 = time.perf_counter()
            await mm.retrieve_context("bench", "s", q, 2000)
            cached.append(time.perf_counter() - t0)
    return {
        "ingest_per_s": memories / ingest_s,
        "fresh_p50_ms": statistics.median(fresh) * 1000,
        "fresh_p99_ms": pct(fresh, 99) * 1000,
        "cached_p50_ms": statistics.median(cached) * 1000,
        "cached_p99_ms": pct(cached, 99) * 1000,
        "candidates_median": statistics.median(admitted),
    }


async def main_async(args: argparse.Namespace) -> None:
    """Run every measurement and print the report."""
    emb = OnnxEmbedder.from_directory(args.model_dir, threads=args.threads)
    print(
        f"{emb.name} · onnxruntime threads={args.threads or 'auto'} · {os.cpu_count()} CPUs · "
        f"{platform.processor() or platform.machine()} · Python {platform.python_version()} · "
        "load average %.2f %.2f %.2f at start" % os.getloadavg()
    )
    for batch, calls in ((1, args.calls_single), (64, args.calls_batch)):
        runs = [await throughput(emb, batch, calls) for _ in range(args.repeats)]
        best = statistics.median(r["texts_per_s"] for r in runs)
        med = statistics.median(r["median_ms"] for r in runs)
        p99 = statistics.median(r["p99_ms"] for r in runs)
        print(
            f"batch {batch:>2}: {best:8.1f} texts/s  (per call: median {med:7.2f} ms, "
            f"p99 {p99:7.2f} ms; median of {args.repeats} runs x {calls} calls)"
        )
    r = await retrieval(emb, args.memories, args.queries)
    print(
        f"ingest {args.memories} memories: {r['ingest_per_s']:.0f} memories/s "
        "(inject_memories, batches of 32)"
    )
    print(
        f"retrieve_context, in-memory, {args.memories} memories, {args.queries} queries, "
        f"threshold {emb.relevance_threshold} (median {r['candidates_median']} candidates):"
    )
    print(
        f"  fresh query (embedded in the loop): p50 {r['fresh_p50_ms']:6.2f} ms, "
        f"p99 {r['fresh_p99_ms']:6.2f} ms"
    )
    print(
        f"  repeated query (embedding cached):  p50 {r['cached_p50_ms']:6.2f} ms, "
        f"p99 {r['cached_p99_ms']:6.2f} ms"
    )


def main() -> None:
    """Parse arguments and run."""
    default_dir = os.environ.get("ACTRONE_TEST_MODEL_DIR") or str(
        Path.home() / ".cache" / "actrone-pg" / "test-models" / "all-MiniLM-L6-v2"
    )
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", default=default_dir)
    parser.add_argument("--threads", type=int, default=0, help="onnxruntime intra-op threads")
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--calls-single", type=int, default=200)
    parser.add_argument("--calls-batch", type=int, default=20)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
