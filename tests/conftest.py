"""Shared fixtures.

``store`` is parametrized over every backend in ``BACKENDS``; each backend's fixtures live in
``tests/backends/<name>.py`` (a pytest plugin) and provide ``store_<name>``: a fresh, connected,
empty store, closed after the test. Servers come from fixtures, never from import-time
connections: an environment DSN/URL if given, else an embedded or local server.
"""

from __future__ import annotations

import pytest

from actrone_pg.stores import Store

pytest_plugins = [
    "tests.backends.memory",
    "tests.backends.postgres",
    "tests.backends.citus",
    "tests.backends.redis_qdrant",
    "tests.models",
]

#: Backends the conformance and parity suites run against. "citus" is the PostgreSQL store on a
#: schema distributed with Citus (tests/backends/citus.py); "postgres_rls" and "citus_rls" the same
#: with row-level security on, connected as a role without BYPASSRLS.
BACKENDS = ["memory", "postgres", "postgres_rls", "redis_qdrant", "citus", "citus_rls"]


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest) -> Store:
    """A fresh, empty store of each backend in turn.

    Deliberately synchronous: it only picks the backend's own (async) fixture by name.
    """
    s: Store = request.getfixturevalue(f"store_{request.param}")
    return s
