"""Where a failure becomes an ``ActroneError``: one table, used at each boundary (spec §5).

The manager calls four kinds of components it did not write: a store, an embedder, a reranker
and a consolidator. Each call to one of them is made inside :func:`calling`, which turns any
exception that is not already an ``ActroneError`` into the error class :data:`COMPONENT_ERRORS`
names for that component, the original chained as ``__cause__``. The store is called through
:class:`~actrone_pg._manager.guarded_store.GuardedStore`, every method of which does this; the
embedder in ``ManagerContext.embed`` and the reranker in ``Retrieval._rerank``; each component
that :meth:`MemoryManager.create <actrone_pg.manager.MemoryManager.create>` builds or closes
there. A consolidator's run is typed by :func:`actrone_pg.consolidation.run.consolidate_turns`
itself: whatever fails inside it (the consolidator, or a search it makes) is a
``ConsolidationError``, and the turns stay pending.

A public method of :class:`~actrone_pg.manager.MemoryManager` is wrapped by :func:`guarded`
(:func:`guarded_sync` for a plain one), the last boundary before the caller:

- an ``ActroneError`` passes through untouched;
- an ``ExceptionGroup`` (a ``TaskGroup`` whose tasks failed) is unwrapped: its first
  ``ActroneError`` is raised, the other failures are added to it as notes;
- a ``TypeError`` raised by the call itself (wrong or missing arguments) is a
  ``ValidationError`` that names the method;
- any other ``Exception`` is a bug of actrone_pg, raised as a plain ``ActroneError``;
- ``BaseException``\\ s that are not ``Exception`` (``CancelledError``, ``KeyboardInterrupt``,
  ``SystemExit``) are never touched.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Coroutine, Iterator, Mapping
from types import TracebackType
from typing import Any, Final, Literal, ParamSpec, TypeVar

from actrone_pg._forward import wrong_arguments
from actrone_pg.errors import (
    ActroneError,
    ConsolidationError,
    EmbedderError,
    RerankerError,
    StoreError,
)

__all__ = [
    "COMPONENT_ERRORS",
    "Boundary",
    "GUARDED",
    "Component",
    "calling",
    "guarded",
    "guarded_sync",
    "to_actrone_error",
]

P = ParamSpec("P")
R = TypeVar("R")

#: The components the manager calls, by the name used in :data:`COMPONENT_ERRORS`.
Component = Literal["store", "embedder", "reranker", "consolidator"]

#: The one table: what a caller gets when a component fails with an exception of its own.
COMPONENT_ERRORS: Final[Mapping[Component, type[ActroneError]]] = {
    "store": StoreError,
    "embedder": EmbedderError,
    "reranker": RerankerError,
    "consolidator": ConsolidationError,
}

#: Set on every wrapper :func:`guarded` makes, so a test can check that no public method escaped.
GUARDED = "__actrone_guarded__"


class Boundary:
    """Where a component is called: a context manager that types the call's failure.

    An ``ActroneError`` passes through (a store's ``SchemaError``, an embedder's
    ``ModelNotAvailableError``); any other ``Exception`` becomes the table's class for the
    component, with the original as ``__cause__``. Holds no state of a call, so one instance
    serves every call, concurrent ones included. A class rather than a generator-based context
    manager: it is entered on every store call, and costs a tenth as much.
    """

    __slots__ = ("component", "name")

    def __init__(self, component: Component, name: str | None = None) -> None:
        self.component: Component = component
        self.name = name

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc is None or isinstance(exc, ActroneError) or not isinstance(exc, Exception):
            return  # nothing, typed already, or cancellation: unchanged
        what = self.component if self.name is None else f"{self.component} {self.name!r}"
        error = COMPONENT_ERRORS[self.component]
        raise error(f"the {what} failed: {type(exc).__name__}: {exc}") from exc


def calling(component: Component, name: str | None = None) -> Boundary:
    """``with calling("embedder", name): ...`` — a call of ``component`` (named ``name``, if it
    has one), its failure typed by :class:`Boundary`."""
    return Boundary(component, name)


def guarded(
    method: Callable[P, Coroutine[Any, Any, R]],
) -> Callable[P, Coroutine[Any, Any, R]]:
    """A public coroutine method that raises only ``ActroneError`` (see the module docstring)."""

    @functools.wraps(method)
    async def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            # Calling a coroutine function only binds its arguments: the body runs when awaited.
            running = method(*args, **kwargs)
        except TypeError as exc:
            raise wrong_arguments(method, exc) from exc
        try:
            return await running
        except ActroneError:
            raise
        except Exception as exc:
            error = to_actrone_error(exc)
            raise error from error.__cause__

    setattr(call, GUARDED, True)
    return call


def guarded_sync(method: Callable[P, R]) -> Callable[P, R]:
    """:func:`guarded` for a plain (not async) public method."""

    @functools.wraps(method)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except ActroneError:
            raise
        except TypeError as exc:
            if not _binds(method, args, kwargs):
                raise wrong_arguments(method, exc) from exc
            error = to_actrone_error(exc)
            raise error from exc
        except Exception as exc:
            error = to_actrone_error(exc)
            raise error from exc

    setattr(call, GUARDED, True)
    return call


def to_actrone_error(exc: BaseException) -> ActroneError:
    """The ``ActroneError`` a caller sees for ``exc``.

    An ``ActroneError`` is itself; a group gives its first ``ActroneError`` (each other failure
    noted on it); anything else reached no boundary of a component, so it is a bug of
    actrone_pg: an ``ActroneError`` whose ``__cause__`` is ``exc``.
    """
    if isinstance(exc, BaseExceptionGroup):
        leaves = list(_leaves(exc))
        known = [e for e in leaves if isinstance(e, ActroneError)]
        chosen = known[0] if known else to_actrone_error(leaves[0])
        for other in leaves:
            if other is not chosen and other is not chosen.__cause__:
                chosen.add_note(f"also failed at the same time: {type(other).__name__}: {other}")
        return chosen
    if isinstance(exc, ActroneError):
        return exc
    error = ActroneError(f"unexpected {type(exc).__name__}: {exc}")
    error.__cause__ = exc
    return error


def _leaves(group: BaseExceptionGroup[BaseException]) -> Iterator[BaseException]:
    for e in group.exceptions:
        if isinstance(e, BaseExceptionGroup):
            yield from _leaves(e)
        else:
            yield e


def _binds(method: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    try:
        inspect.signature(method).bind(*args, **kwargs)
    except TypeError:
        return False
    return True
