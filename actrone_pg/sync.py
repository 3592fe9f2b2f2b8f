"""A blocking ``MemoryManager`` for code without ``await``: scripts, threads, notebooks.

from actrone_pg.sync import MemoryManager

with MemoryManager.create(MemoryConfig()) as mm:
    mm.store_turn("agent", "session", "hi", "hello!")
    ctx = mm.retrieve_context("agent", "session", "what can I cook?", token_budget=2000)

The async :class:`actrone_pg.MemoryManager` is the source of truth. This class is derived from it
when the module is imported: every public coroutine method becomes a blocking method with the same
name, signature and docstring, every public property and plain method is forwarded. A method added
to the async manager appears here without an edit.

Each sync manager owns one event loop, run by a background thread it starts in :meth:`create` and
stops in :meth:`close`. Every call is handed to that loop and waited for, so the manager works
from any number of threads at once and from code whose own thread already runs an event loop
(Jupyter), where ``asyncio.run`` would refuse. Errors arrive unchanged: the same exception object
the async manager raised.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from actrone_pg.manager import MemoryManager as AsyncMemoryManager

__all__ = ["MemoryManager", "create_memory_manager"]

T = TypeVar("T")

# Handled by hand: construction and shutdown own the loop thread as well as the manager.
_SPECIAL = frozenset({"create", "close"})


class _LoopThread:
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
            raise RuntimeError(
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


class MemoryManager:
    """The blocking twin of :class:`actrone_pg.MemoryManager`; build it with :meth:`create`.

    Every public coroutine method of the async manager is here, blocking, with the same
    signature and docstring. Safe to share between threads. Close it (or use ``with``) to stop
    its event-loop thread and the store's connections.
    """

    def __init__(self, manager: AsyncMemoryManager, runner: _LoopThread) -> None:
        self._manager = manager
        self._runner = runner
        self._lock = threading.Lock()
        self._closed = False

    @property
    def async_manager(self) -> AsyncMemoryManager:
        """The async manager doing the work (its coroutines belong to this manager's loop)."""
        return self._manager

    @classmethod
    def create(cls, *args: Any, **kwargs: Any) -> MemoryManager:
        # Signature and docstring are the async create()'s, attached below.
        runner = _LoopThread()
        try:
            manager = runner.run(AsyncMemoryManager.create(*args, **kwargs))
        except BaseException:
            runner.stop()
            raise
        return cls(manager, runner)

    def close(self) -> None:
        """Close the store (and its connections) and stop the event-loop thread. Safe twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            self._runner.run(self._manager.close())
        finally:
            self._runner.stop()

    def __enter__(self) -> MemoryManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._closed:
            coro.close()
            raise RuntimeError("this MemoryManager is closed")
        return self._runner.run(coro)

    if TYPE_CHECKING:
        # The derived methods are attached at import; to a type checker they are plain Any.
        def __getattr__(self, name: str) -> Any: ...


def _blocking(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    """A method of the sync manager that runs the async manager's ``name`` and waits for it."""

    @functools.wraps(method)
    def call(self: MemoryManager, *args: Any, **kwargs: Any) -> Any:
        return self._call(getattr(self._manager, name)(*args, **kwargs))

    del call.__wrapped__  # a sync method, not a coroutine function
    call.__signature__ = inspect.signature(method)  # type: ignore[attr-defined]
    call.__qualname__ = f"MemoryManager.{name}"
    call.__module__ = __name__
    return call


def _forwarded(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    """A plain (non-async) method, called on the async manager directly."""

    @functools.wraps(method)
    def call(self: MemoryManager, *args: Any, **kwargs: Any) -> Any:
        return getattr(self._manager, name)(*args, **kwargs)

    del call.__wrapped__
    call.__signature__ = inspect.signature(method)  # type: ignore[attr-defined]
    call.__qualname__ = f"MemoryManager.{name}"
    call.__module__ = __name__
    return call


def _property(name: str, prop: property) -> property:
    def get(self: MemoryManager) -> Any:
        return getattr(self._manager, name)

    return property(get, doc=prop.__doc__)


def _derive() -> None:
    """Attach every public method and property of the async manager to the sync one."""
    for name, member in inspect.getmembers_static(AsyncMemoryManager):
        if name.startswith("_") or name in _SPECIAL:
            continue
        if isinstance(member, property):
            setattr(MemoryManager, name, _property(name, member))
        elif inspect.iscoroutinefunction(member):
            setattr(MemoryManager, name, _blocking(name, member))
        elif inspect.isfunction(member):
            setattr(MemoryManager, name, _forwarded(name, member))
    # The unbound function's signature keeps ``cls``: inspect drops it when binding.
    create = MemoryManager.__dict__["create"].__func__
    create.__doc__ = AsyncMemoryManager.create.__doc__
    create.__signature__ = inspect.signature(
        AsyncMemoryManager.__dict__["create"].__func__
    ).replace(return_annotation="MemoryManager")


_derive()


@contextmanager
def create_memory_manager(*args: Any, **kwargs: Any) -> Iterator[MemoryManager]:
    """``with create_memory_manager(config) as mm:`` — a blocking manager closed on exit.

    Takes the arguments of :meth:`MemoryManager.create`.
    """
    mm = MemoryManager.create(*args, **kwargs)
    try:
        yield mm
    finally:
        mm.close()


create_memory_manager.__signature__ = inspect.signature(  # type: ignore[attr-defined]
    AsyncMemoryManager.create
).replace(return_annotation="contextlib.AbstractContextManager[MemoryManager]")
