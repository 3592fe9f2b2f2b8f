"""Fixtures for the fault tests: servers of their own, which the tests freeze, kill and flush.

The server helpers are those of the fault harness (``benchmarks/faults.py``), loaded from its
file: an embedded PostgreSQL in a temporary directory (unix socket only) and ``redis-server`` on
a free port other than 6379. The suite's shared servers are never touched.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

HARNESS = Path(__file__).resolve().parents[2] / "benchmarks" / "faults.py"


def load_harness() -> ModuleType:
    """``benchmarks/faults.py`` as a module (it is a script, not part of the package)."""
    name = "actrone_faults_harness"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, HARNESS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def private_postgres() -> Iterator[Any]:
    """An embedded PostgreSQL of this module's own (frozen and killed by its tests)."""
    server = load_harness().EmbeddedPostgres()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def private_redis() -> Iterator[Any]:
    """A ``redis-server`` without persistence on a free port, for this test only."""
    if shutil.which("redis-server") is None:
        pytest.fail("redis-server is not installed (apt install redis-server)", pytrace=False)
    server = load_harness().RedisServer(persistent=False)
    try:
        yield server
    finally:
        server.close()
