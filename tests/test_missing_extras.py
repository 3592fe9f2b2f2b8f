"""Without an extra, building what needs it fails with the exact ``pip install`` line.

Every optional dependency is installed in the test environment, so its absence is a fault these
tests cannot produce otherwise: each case runs in a fresh interpreter whose ``sys.modules`` holds
``None`` for the missing package, which makes any import of it (or of a submodule) fail as an
uninstalled one does.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

# (the package taken away, MemoryConfig arguments that need it, the extra that installs it)
CASES = [
    (
        "psycopg",
        {"backend": "postgres", "postgres_dsn": "postgresql://u@127.0.0.1:1/x"},
        "postgres",
    ),
    (
        "psycopg_pool",
        {"backend": "postgres", "postgres_dsn": "postgresql://u@127.0.0.1:1/x"},
        "postgres",
    ),
    (
        "pgvector",
        {"backend": "postgres", "postgres_dsn": "postgresql://u@127.0.0.1:1/x"},
        "postgres",
    ),
    ("redis", {"backend": "redis_qdrant", "qdrant_url": ":memory:"}, "redis"),
    ("qdrant_client", {"backend": "redis_qdrant", "qdrant_url": ":memory:"}, "qdrant"),
    ("onnxruntime", {"embedding_provider": "onnx"}, "onnx"),
    ("tokenizers", {"embedding_provider": "onnx"}, "onnx"),
    (
        "httpx",
        {
            "embedding_provider": "openai",
            "embedding_api_url": "http://127.0.0.1:1/v1",
            "embedding_model": "m",
        },
        "openai",
    ),
    ("onnxruntime", {"embedding_provider": "hashing", "rerank_enabled": True}, "onnx"),
    (
        "httpx",
        {
            "embedding_provider": "hashing",
            "consolidator": "llm",
            "consolidator_api_url": "http://127.0.0.1:1/v1",
            "consolidator_model": "m",
        },
        "openai",
    ),
]

PROGRAM = """
import asyncio, sys
sys.modules[{missing!r}] = None
from actrone_pg import MemoryConfig, MemoryManager
from actrone_pg.errors import MissingDependencyError

async def main():
    config = MemoryConfig(**{config!r})
    try:
        await MemoryManager.create(config)
    except MissingDependencyError as exc:
        print(type(exc).__name__, exc, sep=": ")
    else:
        print("built without", {missing!r})

asyncio.run(main())
"""


@pytest.mark.parametrize(
    ("missing", "config", "extra"), CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES]
)
def test_a_missing_extra_names_its_pip_line(
    missing: str, config: dict[str, object], extra: str
) -> None:
    code = textwrap.dedent(PROGRAM.format(missing=missing, config=config))
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    line = done.stdout.strip().splitlines()[-1]
    assert line.startswith("MissingDependencyError: "), line
    assert line.endswith(f'pip install "actrone-pg[{extra}]"'), line
