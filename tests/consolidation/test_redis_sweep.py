"""Redis: a session whose process died before its TTL is consolidated by another process's sweep.

Process A stores turns (fewer than ``consolidate_after_turns``, so nothing is consolidated in the
background) and is killed with SIGKILL: no ``close()``, no timer, nothing of it survives but what
it wrote to Redis. After the TTL, process B (this test) sweeps: the session's turns become
memories with their lineage, and the session is deleted.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from actrone_pg import MemoryConfig, MemoryManager
from actrone_pg.consolidation.run import memory_id
from actrone_pg.embedders import HashingEmbedder
from tests.backends.redis_qdrant import cleanup, redis_qdrant_settings, unique_prefix
from tests.servers import qdrant_url

pytestmark = [pytest.mark.redis, pytest.mark.qdrant]
pytest.importorskip("actrone_pg.stores.redis_qdrant")

TTL_SECONDS = 1.0
LINES = [f"I met my friend Anna on Monday to plan trip number {i}." for i in range(7)]

# Process A: store the turns through a manager, then die without closing it.
_PROCESS_A = textwrap.dedent(
    """
    import asyncio, json, os, signal, sys
    from actrone_pg import MemoryConfig, MemoryManager
    from actrone_pg.embedders import HashingEmbedder

    settings, lines = json.loads(sys.argv[1]), json.loads(sys.argv[2])

    async def main():
        mm = await MemoryManager.create(MemoryConfig(**settings), embedder=HashingEmbedder())
        for i, line in enumerate(lines):
            await mm.store_turn("ag", "s", line, "Have fun!", turn_id=f"turn-{i}")
        print("stored", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

    asyncio.run(main())
    """
)


def _settings(prefix: str, qdrant: str) -> dict[str, Any]:
    return redis_qdrant_settings(
        prefix,
        qdrant_url=qdrant,
        embedding_provider="hashing",
        session_ttl_hours=TTL_SECONDS / 3600,
        consolidate_after_turns=20,
    )


@pytest.mark.slow
async def test_a_session_whose_process_died_is_consolidated_by_another_processs_sweep(
    tmp_path: Path,
) -> None:
    import json

    prefix = unique_prefix()
    url = qdrant_url()
    # Local mode keeps points inside one process: both processes share a directory instead
    # (one at a time; A's file lock goes with it).
    qdrant = url if url.startswith(("http://", "https://")) else str(tmp_path / "qdrant")
    settings = _settings(prefix, qdrant)
    try:
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-c", _PROCESS_A, json.dumps(settings), json.dumps(LINES)],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert done.returncode == -signal.SIGKILL, done.stderr
        assert done.stdout.strip() == "stored"

        await asyncio.sleep(TTL_SECONDS + 0.5)
        cfg = MemoryConfig(**settings)
        mm = await MemoryManager.create(cfg, embedder=HashingEmbedder())
        try:
            # Expired for every read, like on the other backends...
            assert await mm.get_recent_turns("ag", "s") == []
            assert await mm.get_session("ag", "s") is None
            assert await mm.count_memories("ag") == 0
            # ...but still in Redis, in its grace, for this process's sweeper.
            assert await mm.sweep_expired_sessions() == 1
            assert await mm.count_memories("ag") == len(LINES)
            for i, line in enumerate(LINES):
                content = f"User: {line}"
                m = await mm.get_memory("ag", memory_id("ag", (f"turn-{i}",), content))
                assert m is not None, i
                assert (m.content, m.source, m.source_turn_ids, m.session_id) == (
                    content,
                    "consolidated",
                    (f"turn-{i}",),
                    "s",
                )
            # The session is gone, keys included, and a second sweep finds nothing.
            assert await mm.store.get_session("ag", "s", ttl_seconds=3600) is None
            assert await mm.sweep_expired_sessions() == 0
        finally:
            await mm.close()
    finally:
        await cleanup(prefix)
