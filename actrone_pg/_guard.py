"""A public method of the manager raises only ``ActroneError`` (README, "Bad input").

:func:`guard_public_methods` wraps every public method of a class, its bases' included
(coroutine methods, the ``create`` classmethod and plain methods alike), once, when the class is
defined, so a method added later, to the class or to one of its bases, is covered without anyone
remembering to. Inside the wrapper:

- an ``ActroneError`` passes through untouched;
- an ``ExceptionGroup`` (a ``TaskGroup`` whose tasks failed) is unwrapped: its first
  ``ActroneError`` is raised, the other failures are added to it as notes;
- any other ``Exception`` becomes the ``ActroneError`` subclass of the component it came from
  (``StoreError``, ``EmbedderError``, ``RerankerError``), found by walking its traceback to the
  first frame of that component, with the original as ``__cause__``; a ``TypeError`` raised while
  binding the call's arguments is a ``ValidationError``;
- ``BaseException``\\ s that are not ``Exception`` (``CancelledError``, ``KeyboardInterrupt``,
  ``SystemExit``) are never touched.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from actrone_pg.errors import (
    ActroneError,
    EmbedderError,
    RerankerError,
    StoreError,
    ValidationError,
)

__all__ = ["GUARDED", "guard_public_methods", "public_attributes", "to_actrone_error"]

C = TypeVar("C", bound=type)

#: Set on every wrapper, so a test can check that no public method escaped.
GUARDED = "__actrone_guarded__"

# Components by the module that built them, for frames that are not methods of a known object.
_MODULES: tuple[tuple[str, type[ActroneError]], ...] = (
    ("actrone_pg.stores", StoreError),
    ("actrone_pg.embedders", EmbedderError),
    ("actrone_pg.rerankers", RerankerError),
)


def public_attributes(cls: type) -> list[tuple[str, Any]]:
    """The public attributes ``cls`` defines or inherits, each as the nearest class defines it.

    A wrapper covers every public method of the class, wherever in its bases it is written;
    the manager's are its own, forwarded to its collaborators (:mod:`actrone_pg._manager`).
    """
    found: dict[str, Any] = {}
    for klass in cls.__mro__:
        if klass is object:
            continue
        for name, attr in vars(klass).items():
            if not name.startswith("_") and name not in found:
                found[name] = attr
    return list(found.items())


def guard_public_methods(cls: C) -> C:
    """Wrap every public method of ``cls``, inherited ones included (see the module docstring).

    A wrapper of an inherited method is set on ``cls`` itself, and named as its method (its
    ``__qualname__`` is ``cls``'s); the base keeps its own function.
    """
    for name, attr in public_attributes(cls):
        if isinstance(attr, classmethod):
            setattr(cls, name, classmethod(_guard(attr.__func__, cls)))
        elif inspect.isfunction(attr):
            setattr(cls, name, _guard(attr, cls))
    return cls


def _guard(fn: Callable[..., Any], owner: type) -> Callable[..., Any]:
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return await fn(*args, **kwargs)
            except ActroneError:
                raise
            except Exception as exc:
                error = to_actrone_error(exc, _components(args, kwargs))
                raise error from error.__cause__

        wrapper: Callable[..., Any] = async_wrapper
    else:

        @functools.wraps(fn)
        def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except ActroneError:
                raise
            except Exception as exc:
                error = to_actrone_error(exc, _components(args, kwargs))
                raise error from error.__cause__

        wrapper = sync_wrapper
    wrapper.__qualname__ = f"{owner.__qualname__}.{fn.__name__}"
    setattr(wrapper, GUARDED, True)
    return wrapper


def to_actrone_error(
    exc: BaseException, components: dict[int, type[ActroneError]] | None = None
) -> ActroneError:
    """The ``ActroneError`` a caller sees for ``exc``.

    ``components`` maps ``id(obj)`` of the manager's store, embedder and reranker to the error
    class of failures inside their methods. A new error has ``exc`` as its ``__cause__``; an
    ``ActroneError`` picked out of a group keeps its own.
    """
    components = components or {}
    if isinstance(exc, BaseExceptionGroup):
        leaves = list(_leaves(exc))
        known = [e for e in leaves if isinstance(e, ActroneError)]
        chosen = known[0] if known else to_actrone_error(leaves[0], components)
        for other in leaves:
            if other is not chosen and other is not chosen.__cause__:
                chosen.add_note(f"also failed at the same time: {type(other).__name__}: {other}")
        return chosen
    if isinstance(exc, ActroneError):
        return exc
    tb = exc.__traceback__
    if isinstance(exc, TypeError) and tb is not None and tb.tb_next is None:
        # Raised by the call itself (wrong or missing arguments), before the method body ran.
        err: ActroneError = ValidationError(str(exc))
    elif (kind := _origin(exc, components)) is None:
        err = ActroneError(f"unexpected {type(exc).__name__}: {exc}")
    else:
        what = {StoreError: "store", EmbedderError: "embedder", RerankerError: "reranker"}[kind]
        err = kind(f"the {what} failed: {type(exc).__name__}: {exc}")
    err.__cause__ = exc
    return err


def _leaves(group: BaseExceptionGroup[BaseException]) -> Iterator[BaseException]:
    for e in group.exceptions:
        if isinstance(e, BaseExceptionGroup):
            yield from _leaves(e)
        else:
            yield e


def _components(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[int, type[ActroneError]]:
    owner = args[0] if args else None
    found: dict[int, type[ActroneError]] = {}
    for attr, kind in (
        ("store", StoreError),
        ("embedder", EmbedderError),
        ("reranker", RerankerError),
    ):
        # The instance's components, or (for ``create``) the ones passed in.
        obj = kwargs.get(attr, getattr(owner, attr, None) if not isinstance(owner, type) else None)
        if obj is not None:
            found[id(obj)] = kind
    return found


def _origin(
    exc: BaseException, components: dict[int, type[ActroneError]]
) -> type[ActroneError] | None:
    # A component that lacks a method the manager calls is that component's failure.
    if isinstance(exc, AttributeError) and id(exc.obj) in components:
        return components[id(exc.obj)]
    # The outermost frame that belongs to a component names it: a store method that calls a
    # driver is the store's failure even though the exception was raised inside the driver.
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        owner = frame.f_locals.get("self")
        if owner is not None and id(owner) in components:
            return components[id(owner)]
        module = str(frame.f_globals.get("__name__", ""))
        for prefix, kind in _MODULES:
            if module == prefix or module.startswith(prefix + "."):
                return kind
        tb = tb.tb_next
    return None
