"""One way for the adapters to call a manager, blocking or async (`actrone_pg.sync` or not).

Frameworks call their memory classes both ways: LangChain's ``messages`` is a blocking property
and ``aget_messages`` a coroutine. An adapter built over an async ``MemoryManager`` awaits it in
the caller's loop and refuses the blocking methods (its connections belong to that loop); one built
over an ``actrone_pg.sync.MemoryManager`` calls it directly and, from a coroutine, in a worker
thread so that the caller's loop is not blocked.
"""

from __future__ import annotations

import asyncio
from typing import Any

from actrone_pg.manager import MemoryManager
from actrone_pg.sync import MemoryManager as SyncMemoryManager

AnyManager = MemoryManager | SyncMemoryManager


class Bridge:
    """Calls a public method of the manager by name, from blocking or async code."""

    def __init__(self, manager: AnyManager, adapter: str) -> None:
        if not isinstance(manager, (MemoryManager, SyncMemoryManager)):
            raise TypeError(
                f"{adapter} needs an actrone_pg.MemoryManager or actrone_pg.sync.MemoryManager, "
                f"got {type(manager).__name__}"
            )
        self.manager = manager
        self.adapter = adapter

    async def acall(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Await ``manager.method(*args, **kwargs)`` without blocking the running loop."""
        if isinstance(self.manager, SyncMemoryManager):
            return await asyncio.to_thread(getattr(self.manager, method), *args, **kwargs)
        return await getattr(self.manager, method)(*args, **kwargs)

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Call ``manager.method(*args, **kwargs)`` and wait for it."""
        if isinstance(self.manager, MemoryManager):
            raise TypeError(
                f"{self.adapter} over an async MemoryManager has only the async methods; build "
                "it over an actrone_pg.sync.MemoryManager to call it from blocking code"
            )
        return getattr(self.manager, method)(*args, **kwargs)
