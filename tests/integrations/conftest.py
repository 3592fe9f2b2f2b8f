"""The managers every adapter's tests build on: in memory, with the dependency-free embedder."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from actrone_pg import MemoryConfig
from actrone_pg import MemoryManager as AsyncMemoryManager
from actrone_pg.stores.memory import InMemoryStore
from actrone_pg.sync import MemoryManager

CFG = MemoryConfig(backend="memory", embedding_provider="hashing")


@pytest.fixture
def mm() -> Iterator[MemoryManager]:
    """A blocking manager (``actrone_pg.sync``) over a fresh in-memory store."""
    with MemoryManager.create(CFG, store=InMemoryStore()) as manager:
        yield manager


@pytest.fixture
async def amm() -> AsyncIterator[AsyncMemoryManager]:
    """An async manager over a fresh in-memory store."""
    manager = await AsyncMemoryManager.create(CFG, store=InMemoryStore())
    yield manager
    await manager.close()
