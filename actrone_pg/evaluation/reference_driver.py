"""Drive actrone-memory 0.3.0 (the reference system) through ``actrone-pg eval``'s conversations.

``actrone-pg eval --reference`` runs this script with the *reference* virtual environment's
Python (actrone-memory installed there, never in actrone_pg's environment), so it imports only
the standard library and ``actrone_memory``. It reads what the evaluation wrote to ``--data``:
every conversation's turns (content, id, time) and questions, and the vectors actrone_pg's
embedder computed for them, so both systems see identical vectors.

For each conversation it writes every turn into actrone-memory's own in-process store
(``InMemoryStore``, the store of its default ``backend="memory"``) as a ``MemoryEntry`` with the
turn's time as its ``timestamp`` (``inject_memory`` cannot set a time, and recency matters here),
then asks each question with ``MemoryManager.search_memories(limit=N)`` under its default
configuration. The embedder declares actrone-memory's own calibrated threshold for the model when
it has one (``MINILM_RELEVANCE_THRESHOLD`` for all-MiniLM-L6-v2), as its default would; with
``--threshold`` it uses that one instead.

Input (``--data``): ``meta.json`` and ``vectors.f32`` (little-endian float32, row-major, one row
per text of ``meta["texts"]``). Output: one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import array
import asyncio
import json
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any


def _load_rows(path: Path, dims: int) -> list[list[float]]:
    data = array.array("f")
    data.frombytes(path.read_bytes())
    if sys.byteorder != "little":  # pragma: no cover - the evaluation writes little-endian
        data.byteswap()
    return [data[i : i + dims].tolist() for i in range(0, len(data), dims)]


def _own_threshold(embedder_name: str) -> float | None:
    """actrone-memory's calibrated threshold for the same model, if it ships one."""
    from actrone_memory.l2 import embedder as ref

    name = embedder_name.lower()
    if "minilm-l6" in name:
        return float(ref.MINILM_RELEVANCE_THRESHOLD)
    if "bge-small" in name:
        return float(ref.BGE_SMALL_RELEVANCE_THRESHOLD)
    return None


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Ingest each conversation, ask its questions, return the ranked ids and timings."""
    from importlib.metadata import version

    from actrone_memory import MemoryConfig, MemoryManager
    from actrone_memory.in_memory import InMemoryStore
    from actrone_memory.l2.embedder import Embedder
    from actrone_memory.models import MemoryEntry

    data_dir = Path(args.data)
    meta = json.loads((data_dir / "meta.json").read_text())
    dims = int(meta["dimensions"])
    lookup = dict(zip(meta["texts"], _load_rows(data_dir / "vectors.f32", dims), strict=True))
    if args.threshold is not None:
        threshold: float | None = args.threshold
    else:
        threshold = _own_threshold(meta["embedder"])
        if threshold is None:
            threshold = float(meta["threshold"])

    class FixedVectorEmbedder(Embedder):
        """The vectors actrone_pg's embedder computed, looked up by text."""

        async def embed(self, text: str) -> list[float]:
            return lookup[text]

        async def embed_batch(self, texts: list[str]) -> list[list[float]]:
            return [lookup[t] for t in texts]

        @property
        def dimensions(self) -> int:
            return dims

        @property
        def relevance_threshold(self) -> float | None:
            return threshold

    # Its defaults, except what would need a network or a key (summaries, a model download:
    # the embedder is given).
    config = MemoryConfig(backend="memory", embedding_provider="hashing", auto_summarise=False)
    store = InMemoryStore(
        max_turns=config.max_session_turns,
        relevance_weight=config.relevance_weight,
        recency_weight=config.recency_weight,
    )
    embedder = FixedVectorEmbedder()
    mm = await MemoryManager.create(config, l1=store, l2=store, embedder=embedder)
    limit = int(meta["limit"])
    results = []
    try:
        for conv in meta["conversations"]:
            agent = f"eval-{conv['id']}"
            for turn in conv["turns"]:
                content = turn["content"]
                await store.upsert(
                    MemoryEntry(
                        id=turn["id"],
                        agent_id=agent,
                        session_id=turn["session"] or "eval",
                        content=content,
                        content_type="injected",
                        embedding=lookup[content],
                        token_count=max(1, len(content) // 4),
                        timestamp=datetime.fromisoformat(turn["created_at"]),
                        source="eval",
                    )
                )
            for question in conv["questions"]:
                t0 = time.perf_counter_ns()
                found = await mm.search_memories(agent, question, limit=limit)
                elapsed = (time.perf_counter_ns() - t0) / 1e6
                results.append({"ranked": [m.id for m in found], "ms": elapsed})
            await store.delete_agent_memories(agent)
    finally:
        await mm.close()
    return {
        "system": "actrone-memory",
        "version": version("actrone-memory"),
        "store": "InMemoryStore",
        "threshold": mm.relevance_threshold,
        "results": results,
    }


def main() -> int:
    """Parse the arguments, run, print the JSON result."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="directory the evaluation wrote")
    parser.add_argument("--threshold", type=float, default=None, help="admission threshold")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
