"""A store's methods that are a module's functions: forwarded, never retyped.

:func:`forward` makes a method of a class from a function whose first argument is one of the
instance's attributes: a module's function that takes the state a store holds
(``PostgresStore.append_turn`` is ``stores/postgres/sessions.append_turn`` given the store's
``db``). ``MemoryManager``'s public methods are written out instead (the public face is plain
code). The result is a real function carrying the forwarded function's name, docstring
and signature (``inspect.signature`` follows ``__wrapped__``), so the error guard, the tracing
and the sync facade treat it as any method written on the class, a traceback names the module
that ran, and a type checker sees the forwarded function's parameters and result.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

from actrone_pg.errors import ValidationError

__all__ = ["bound", "forward", "wrong_arguments"]

P = ParamSpec("P")
R = TypeVar("R")


def forward(
    collaborator: str, method: Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]
) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]:
    """A coroutine method that awaits ``method`` given the instance's attribute
    ``collaborator`` as its first argument."""

    async def call(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await bound(method, getattr(self, collaborator), *args, **kwargs)

    functools.update_wrapper(call, method)
    return call


def bound(
    method: Callable[Concatenate[Any, P], Coroutine[Any, Any, R]],
    target: Any,
    /,
    *args: P.args,
    **kwargs: P.kwargs,
) -> Coroutine[Any, Any, R]:
    """``method``'s coroutine for ``target`` and the caller's arguments, not yet run (a plain
    function: awaiting it adds no coroutine of its own to every forwarded call).

    Calling a coroutine function only binds its arguments, so a ``TypeError`` here is the
    caller's wrong or missing arguments (:func:`wrong_arguments`). The error guard would make
    any other ``TypeError`` an unexpected error: the binding failed one frame below it, in the
    forwarding call.
    """
    try:
        return method(target, *args, **kwargs)
    except TypeError as exc:
        raise wrong_arguments(method, exc) from exc


def wrong_arguments(method: Callable[..., Any], exc: TypeError) -> ValidationError:
    """The caller's wrong or missing arguments, named by the method (``store_turn()``), not by
    its class or collaborator (Python's message says ``MemoryManager.store_turn()``)."""
    text = str(exc).replace(f"{method.__qualname__}()", f"{method.__name__}()", 1)
    return ValidationError(text)
