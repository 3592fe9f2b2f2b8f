"""One asyncio lock per key, made on first use and dropped when its last waiter leaves.

The in-memory and Redis + Qdrant stores serialise the updates of one memory with it (spec §8:
concurrent updates all land, in the order they came); a registry that kept every lock would
grow with every memory ever updated.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager

__all__ = ["KeyedLocks"]


class KeyedLocks:
    """``async with locks.hold(key):`` admits one holder of ``key`` at a time, FIFO."""

    def __init__(self) -> None:
        self._locks: dict[Hashable, tuple[asyncio.Lock, int]] = {}

    def __len__(self) -> int:
        """How many keys are held or waited for now."""
        return len(self._locks)

    @asynccontextmanager
    async def hold(self, key: Hashable) -> AsyncIterator[None]:
        """Hold ``key``'s lock for the block, waiting behind its earlier holders."""
        lock, waiting = self._locks.get(key) or (asyncio.Lock(), 0)
        self._locks[key] = (lock, waiting + 1)
        try:
            async with lock:
                yield
        finally:
            lock, waiting = self._locks[key]
            if waiting == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, waiting - 1)
