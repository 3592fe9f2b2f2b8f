"""Consolidation throughput (turns per second, extractive) and what it costs ``store_turn``.

    python benchmarks/consolidation_throughput.py [--locomo DIR] [--backend memory|postgres]
                                                  [--dsn DSN] [--turns 2000]

Text: the turns of the LoCoMo conversations in ``--locomo`` (each thing said is a turn's user
message, as ``actrone-pg eval --memories consolidated`` writes them), else synthetic turns made
from templates (deterministic). Three measures, medians over ``--repeat`` runs:

1. the extractive consolidator alone: ``consolidate(turns)`` over every turn, windows of 1 and 4;
2. ``consolidate_session`` end to end (read the session, consolidate, embed with the hashing
   embedder, write, set the marker) on the chosen backend, sessions of 20 turns;
3. ``store_turn`` with ``consolidator="none"`` and with the default background consolidation
   every 20 turns (cooldown 0): p50 and p99 of the call, which does not wait for consolidation,
   and the wall time of the whole run including the background work.

The machine is shared: absolute figures are noisy; compare the rows of one run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from actrone_pg import MemoryConfig, MemoryManager
from actrone_pg.consolidation import ExtractiveConsolidator
from actrone_pg.embedders import HashingEmbedder
from actrone_pg.models import Turn
from actrone_pg.stores import create_store

PEOPLE = ["Anna", "Bjorn", "Carla", "Dmitri", "Elif", "Farid", "Greta", "Hiro"]
TEMPLATES = [
    "I went hiking with {p} last {d} and we saw a moose near the lake.",
    "Thanks, that sounds great!",
    "My sister {p} just started a new job as a nurse in Bergen.",
    "Do you think I should learn the piano or the guitar?",
    "We are planning a trip to Lisbon in {m} for our anniversary.",
    "Haha, yes.",
    "I prefer working from home on {d}s because the office is loud.",
    "That is a good point; I had not thought about it that way.",
]
DAYS = ["Monday", "Wednesday", "Friday", "Sunday"]
MONTHS = ["March", "June", "October"]


def synthetic(n: int) -> list[str]:
    return [
        TEMPLATES[i % len(TEMPLATES)].format(p=PEOPLE[i % 8], d=DAYS[i % 4], m=MONTHS[i % 3])
        for i in range(n)
    ]


def locomo(path: Path, n: int) -> list[str]:
    from actrone_pg.evaluation import load_conversations

    texts = [t.content() for c in load_conversations([path]) for t in c.turns]
    return (texts * (n // max(len(texts), 1) + 1))[:n]


def as_turns(texts: list[str], session: str) -> list[Turn]:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    return [
        Turn(f"{session}-{i}", "bench", session, text, "", None, start + timedelta(seconds=i), 0)
        for i, text in enumerate(texts)
    ]


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * q))]


@contextlib.contextmanager
def server(backend: str, dsn: str | None) -> Iterator[str | None]:
    if backend != "postgres":
        yield None
        return
    from actrone_pg._embedded import given_or_temporary_server

    with given_or_temporary_server(dsn) as uri:
        yield uri


async def main_async(args: argparse.Namespace, texts: list[str], dsn: str | None) -> None:
    turns = as_turns(texts, "alone")
    print(f"{len(texts):,} turns ({'LoCoMo' if args.locomo else 'synthetic'} text)\n")
    print("1. extractive consolidator alone")
    for window in (1, 4):
        c = ExtractiveConsolidator(window_turns=window, user_label="")
        times = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            out = await c.consolidate(turns, None)  # type: ignore[arg-type]
            times.append(time.perf_counter() - started)
        rate = len(turns) / statistics.median(times)
        print(f"   window {window}: {rate:>10,.0f} turns/s   ({len(out):,} memories)")

    base = MemoryConfig(
        backend=args.backend,
        embedding_provider="hashing",
        postgres_dsn=dsn,
        postgres_schema="bench_consolidation",
        max_session_turns=50,
    )
    sessions = len(texts) // 20

    print(f"\n2. consolidate_session end to end ({args.backend}, {sessions} sessions of 20 turns)")
    cfg = base.replace(consolidate_after_turns=0)
    async with await MemoryManager.create(cfg, embedder=HashingEmbedder()) as mm:
        await mm.erase_agent("bench")
        for s in range(sessions):
            for i, text in enumerate(texts[s * 20 : s * 20 + 20]):
                await mm.store_turn("bench", f"s{s}", text, "", turn_id=f"{s}-{i}")
        started = time.perf_counter()
        written = 0
        for s in range(sessions):
            written += len(await mm.consolidate_session("bench", f"s{s}"))
        elapsed = time.perf_counter() - started
        print(
            f"   {sessions * 20 / elapsed:>10,.0f} turns/s   ({written:,} memories, "
            f"{elapsed * 1000 / sessions:.1f} ms per session)"
        )
        await mm.erase_agent("bench")

    print(f"\n3. store_turn ({args.backend}), {sessions * 20:,} turns in {sessions} sessions")
    for label, consolidator in (("consolidator none", "none"), ("extractive, every 20", None)):
        cfg = base.replace(consolidate_after_turns=20, consolidate_cooldown_seconds=0)
        if consolidator:
            cfg = cfg.replace(consolidator=consolidator)
        store = create_store(cfg)
        mm = await MemoryManager.create(cfg, store=store, embedder=HashingEmbedder())
        await mm.erase_agent("bench")
        calls: list[float] = []
        started = time.perf_counter()
        for s in range(sessions):
            for i, text in enumerate(texts[s * 20 : s * 20 + 20]):
                t0 = time.perf_counter()
                await mm.store_turn("bench", f"s{s}", text, "", turn_id=f"{s}-{i}")
                calls.append((time.perf_counter() - t0) * 1000)
        await mm.close()  # waits for the background consolidations
        wall = time.perf_counter() - started
        memories = await store.count_memories("bench")
        await store.erase_agent("bench")
        await store.close()
        print(
            f"   {label:<22} p50 {statistics.median(calls):6.3f} ms  p99 {pct(calls, 0.99):6.3f} ms"
            f"  wall {wall:6.2f} s  memories {memories:,}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--locomo", type=Path, help="LoCoMo file or directory for real text")
    parser.add_argument("--backend", choices=["memory", "postgres"], default="memory")
    parser.add_argument("--dsn", help="PostgreSQL server (default: a temporary embedded one)")
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    texts = locomo(args.locomo, args.turns) if args.locomo else synthetic(args.turns)
    with server(args.backend, args.dsn) as dsn:
        asyncio.run(main_async(args, texts, dsn))


if __name__ == "__main__":
    main()
