"""Python's side of ``bench/retrieve.mjs``: one JSON object on stdin, its answer on stdout.

``write``: inject ``items`` for ``agent`` (the postgres backend, hashing embedder).
``time``: ``retrieve_context`` for each query, ``rounds`` times over, after ``warmup`` calls;
the latencies in milliseconds. With ``backend="memory"`` the items are injected first into a
fresh in-process store.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from actrone_pg import MemoryConfig, MemoryManager  # noqa: E402


def _config(a: dict[str, Any]) -> MemoryConfig:
    if a["backend"] == "memory":
        return MemoryConfig(
            backend="memory", embedding_provider="hashing", relevance_threshold=a["threshold"]
        )
    return MemoryConfig(
        backend="postgres",
        postgres_dsn=a["dsn"],
        postgres_schema=a["schema"],
        embedding_provider="hashing",
        relevance_threshold=a["threshold"],
    )


def _items(a: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "content": it["content"],
            "session_id": it["sessionId"],
            "created_at": datetime.fromisoformat(it["createdAt"].replace("Z", "+00:00")),
        }
        for it in a["items"]
    ]


async def write(a: dict[str, Any]) -> dict[str, Any]:
    async with await MemoryManager.create(_config(a)) as mm:
        await mm.inject_memories(a["agent"], _items(a))
        for i in range(a.get("turns", 0)):
            await mm.store_turn(a["agent"], "bench", f"question {i}", f"answer {i}")
    return {}


async def timings(a: dict[str, Any]) -> dict[str, Any]:
    async with await MemoryManager.create(_config(a)) as mm:
        if a["backend"] == "memory":
            await mm.inject_memories(a["agent"], _items(a))
        for q in a["queries"][: a["warmup"]]:
            await mm.retrieve_context(a["agent"], "bench", q, a["budget"])
        out = []
        for _ in range(a["rounds"]):
            for q in a["queries"]:
                start = time.perf_counter()
                await mm.retrieve_context(a["agent"], "bench", q, a["budget"])
                out.append((time.perf_counter() - start) * 1000.0)
    return {"ms": out}


def main() -> None:
    args = json.loads(sys.stdin.read())
    fn = {"write": write, "time": timings}[sys.argv[1]]
    sys.stdout.write(json.dumps(asyncio.run(fn(args))))


if __name__ == "__main__":
    main()
