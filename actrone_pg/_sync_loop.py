"""The event loop a blocking :class:`actrone_pg.sync.MemoryManager` runs its async twin on.

Each sync manager owns one :class:`LoopThread`, started in ``create`` and stopped in ``close``.
Every call is handed to that loop and waited for, so the manager works from any number of
threads at once and from code whose own thread already runs an event loop (Jupyter), where
``asyncio.run`` would refuse. Errors arrive unchanged: the same exception object the async
manager raised.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from actrone_pg.errors import ManagerUsageError

__all__ = ["LoopThread"]

T = TypeVar("T")


class LoopThread:
    """An event loop running forever in a daemon thread, until :meth:`stop`."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="actrone-pg-sync-loop", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and wait for its result (or its exception)."""
        if threading.current_thread() is self._thread:
            coro.close()
            raise ManagerUsageError(
                "a sync MemoryManager was called from its own event loop (for example from inside "
                "an embedder or store it runs); use the async MemoryManager there"
            )
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result()
        except BaseException:
            # Interrupted while waiting (Ctrl-C in a notebook): do not leave the call running.
            future.cancel()
            raise

    def stop(self) -> None:
        """Cancel what still runs (its callers get ``CancelledError``), stop and close the loop."""

        async def cancel_the_rest() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(cancel_the_rest(), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()
