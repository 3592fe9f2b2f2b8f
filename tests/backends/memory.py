"""Fixtures for the in-memory backend."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from actrone_pg.stores.memory import InMemoryStore


@pytest.fixture
async def store_memory() -> AsyncIterator[InMemoryStore]:
    """A fresh in-memory store."""
    s = InMemoryStore()
    await s.setup()
    yield s
    await s.close()
