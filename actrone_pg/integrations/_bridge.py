"""One way for the adapters to call a manager, blocking or async (`actrone_pg.sync` or not).

Frameworks call their memory classes both ways: LangChain's ``messages`` is a blocking property
and ``aget_messages`` a coroutine. An adapter built over an async ``MemoryManager`` awaits it in
the caller's loop and refuses the blocking methods (its connections belong to that loop); one built
over an ``actrone_pg.sync.MemoryManager`` calls it directly and, from a coroutine, in a worker
thread so that the caller's loop is not blocked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from actrone_pg.manager import MemoryManager
from actrone_pg.sync import MemoryManager as SyncMemoryManager

AnyManager = MemoryManager | SyncMemoryManager
T = TypeVar("T")
#: Work written once against the async manager: ``lambda mm: mm.get_memory(...)``.
Work = Callable[[MemoryManager], Coroutine[Any, Any, T]]


@dataclass
class TurnDraft:
    """A turn an adapter assembled from its framework's messages or items, before it is stored:
    the arguments of one ``store_turn``."""

    user_message: str = ""
    assistant_message: str = ""
    tool_results: list[Any] = field(default_factory=list)

    def empty(self) -> bool:
        """Whether nothing has been put in it yet."""
        return not (self.user_message or self.assistant_message or self.tool_results)


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

    @property
    def async_manager(self) -> MemoryManager:
        """The async manager doing the work (itself, or the one inside a sync manager)."""
        if isinstance(self.manager, SyncMemoryManager):
            return self.manager.async_manager
        return self.manager

    async def acall(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Await ``manager.method(*args, **kwargs)`` without blocking the running loop."""
        if isinstance(self.manager, SyncMemoryManager):
            return await asyncio.to_thread(getattr(self.manager, method), *args, **kwargs)
        return await getattr(self.manager, method)(*args, **kwargs)

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Call ``manager.method(*args, **kwargs)`` and wait for it."""
        if isinstance(self.manager, MemoryManager):
            raise self._no_blocking()
        return getattr(self.manager, method)(*args, **kwargs)

    async def arun(self, work: Work[T]) -> T:
        """Await ``work(async manager)`` without blocking the running loop.

        For an adapter whose logic spans several calls: it is written once, against the async
        manager, and runs on the loop that manager belongs to (the sync manager's own thread).
        """
        if isinstance(self.manager, SyncMemoryManager):
            sync = self.manager
            return await asyncio.to_thread(lambda: sync._call(work(self.async_manager)))
        return await work(self.manager)

    def run(self, work: Work[T]) -> T:
        """Run ``work(async manager)`` and wait for it (a sync manager only, as :meth:`call`)."""
        if isinstance(self.manager, MemoryManager):
            raise self._no_blocking()
        return self.manager._call(work(self.async_manager))

    async def astore_turn(self, agent_id: str, session_id: str, draft: TurnDraft) -> None:
        """Store ``draft`` as one turn of the session, without blocking the running loop."""
        args, kwargs = _store_turn_call(agent_id, session_id, draft)
        await self.acall("store_turn", *args, **kwargs)

    def store_turn(self, agent_id: str, session_id: str, draft: TurnDraft) -> None:
        """Store ``draft`` as one turn of the session, and wait for it."""
        args, kwargs = _store_turn_call(agent_id, session_id, draft)
        self.call("store_turn", *args, **kwargs)

    def _no_blocking(self) -> TypeError:
        # An async manager's connections belong to the loop that created it.
        return TypeError(
            f"{self.adapter} over an async MemoryManager has only the async methods; build "
            "it over an actrone_pg.sync.MemoryManager to call it from blocking code"
        )


def _store_turn_call(
    agent_id: str, session_id: str, draft: TurnDraft
) -> tuple[tuple[str, ...], dict[str, Any]]:
    """``store_turn``'s arguments for ``draft``: no ``tool_results`` is ``None``, not ``[]``."""
    args = (agent_id, session_id, draft.user_message, draft.assistant_message)
    return args, {"tool_results": draft.tool_results or None}
