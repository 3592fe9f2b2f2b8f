"""OpenTelemetry spans and latency histograms of the manager (spec §10, the ``[otel]`` extra).

A manager gets its :class:`Telemetry` once, in its constructor, from :func:`create_telemetry`:
the no-op :data:`NO_TELEMETRY` when ``otel_enabled`` is off or ``opentelemetry-api`` is not
installed (then ``opentelemetry`` is never imported), else one that reports through the global
tracer and meter providers the application configured (instrumentation scope ``actrone_pg``; a
provider set after the manager was built is still used, through the API's proxies).

What is reported:

- a span ``actrone.<method>`` per call of a public coroutine method (:func:`traced`, applied
  over the error guard, so a failed span carries the final ``ActroneError``), with the
  backend, the embedder and, for retrieval, the relevance threshold, the budget and each share's
  tokens used and budget, the candidates considered and the result counts;
- child spans for the steps the manager runs: ``actrone.embed``, ``actrone.l1`` (recent turns),
  ``actrone.l2.search``, ``actrone.rerank``, ``actrone.l1.pack`` and ``actrone.l2.pack``;
- a histogram ``actrone.<method>.duration`` (seconds) per method, with ``actrone.backend`` and,
  on failure, ``error.type``.

No query text, identifier or exception message is recorded unless ``otel_record_content`` is on:
an error then records its type and stack frames only. Memory and turn texts are never recorded.

The no-op costs what an attribute lookup and a branch cost: :meth:`Telemetry.step` hands the
awaitable back untouched and :meth:`Telemetry.span` returns one shared ``nullcontext``. Enabled
while no application configured a tracer provider (the API alone, as a dependency of another
package brings it), a call records its histogram point but makes no spans: the API's no-op spans
cost microseconds each. Measurements in docs/observability.md.
"""

from __future__ import annotations

import functools
import inspect
import logging
import time
import traceback
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Protocol, TypeVar

from actrone_pg.config import MemoryConfig
from actrone_pg.models import RetrievedContext
from actrone_pg.pipeline import PackedSearch

if TYPE_CHECKING:
    from opentelemetry.metrics import Histogram, Meter
    from opentelemetry.trace import Span, Tracer

__all__ = [
    "NO_TELEMETRY",
    "SCOPE",
    "TRACED",
    "Telemetry",
    "Traceable",
    "create_telemetry",
    "traced",
    "traced_constructor",
]

logger = logging.getLogger("actrone_pg.telemetry")

#: The instrumentation scope (tracer and meter name).
SCOPE = "actrone_pg"
#: Set on every traced method, so a test can check that none escaped.
TRACED = "__actrone_traced__"

T = TypeVar("T")
U = TypeVar("U")
S = TypeVar("S")
M = TypeVar("M", bound="Traceable")
P = ParamSpec("P")
Attributes = Mapping[str, str | bool | int | float | Sequence[str]]

# Methods whose spans carry the relevance threshold and the L2 candidate limit.
_RETRIEVAL = frozenset({"retrieve_context", "search_memories"})
# Arguments recorded (as ``actrone.<name>``) only with ``otel_record_content``.
_CONTENT_ARGUMENTS = ("agent_id", "session_id", "query", "memory_id", "turn_id")
# Seconds: retrieval on the in-memory backend takes about a millisecond, PostgreSQL a few.
_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_NULL: AbstractContextManager[None] = nullcontext()
# Whether the public call running in this context has a recording span (children get spans).
_RECORDING: ContextVar[bool] = ContextVar("actrone_pg_recording", default=False)


class Telemetry:
    """The no-op telemetry: what a manager uses when tracing is off or not installed."""

    #: Whether spans and histograms are reported at all.
    enabled = False
    #: Whether query text, identifiers and exception messages are recorded.
    record_content = False

    def step(
        self,
        name: str,
        awaitable: Coroutine[Any, Any, T],
        attributes: Attributes | None = None,
    ) -> Coroutine[Any, Any, T]:
        """``awaitable`` inside a child span ``name`` (here: ``awaitable`` itself)."""
        return awaitable

    def steps(
        self, names: tuple[str, str], awaitable: Coroutine[Any, Any, tuple[T, U]]
    ) -> Coroutine[Any, Any, tuple[T, U]]:
        """One call that does two steps at once (L1 and L2 in one statement), inside two
        sibling child spans, each described by its part of the result (here: ``awaitable``)."""
        return awaitable

    def span(self, name: str) -> AbstractContextManager[object]:
        """A child span ``name`` around a synchronous step (here: a shared null context)."""
        return _NULL

    async def operation(
        self,
        name: str,
        fn: Callable[..., Coroutine[Any, Any, T]],
        owner: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> T:
        """The public method ``fn`` called on ``owner`` (here: just called)."""
        return await fn(owner, *args, **kwargs)


#: The one no-op instance.
NO_TELEMETRY = Telemetry()


def create_telemetry(
    config: MemoryConfig,
    *,
    backend: str,
    embedder: str | None = None,
    threshold: float | None = None,
) -> Telemetry:
    """A manager's telemetry: :data:`NO_TELEMETRY` unless enabled and opentelemetry is installed.

    ``backend``, ``embedder`` and ``threshold`` are recorded on its spans.
    """
    if not config.otel_enabled:
        return NO_TELEMETRY
    try:
        from opentelemetry import trace
    except ImportError:
        # The extra is optional: without it the manager runs untraced, as documented.
        return NO_TELEMETRY
    from actrone_pg import __version__

    return _OpenTelemetry(
        trace.get_tracer(SCOPE, __version__),
        _meter(__version__),
        record_content=config.otel_record_content,
        backend=backend,
        embedder=embedder,
        threshold=threshold,
        limit=config.max_episodic_memories,
    )


class _OpenTelemetry(Telemetry):
    enabled = True

    def __init__(
        self,
        tracer: Tracer,
        meter: Meter,
        *,
        record_content: bool,
        backend: str,
        embedder: str | None,
        threshold: float | None,
        limit: int,
    ) -> None:
        from opentelemetry import trace

        self._tracer = tracer
        self._meter = meter
        self._provider = trace.get_tracer_provider
        # What the API answers while no application configured tracing (or it was disabled).
        self._untraced = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
        self._histograms: dict[str, Histogram] = {}
        self.record_content = record_content
        self._backend = backend
        base: dict[str, str | float] = {"actrone.backend": backend}
        if embedder is not None:
            base["actrone.embedder"] = embedder
        self._base: Attributes = base
        retrieval: dict[str, str | float] = dict(base)
        retrieval["actrone.l2.limit"] = limit
        if threshold is not None:
            retrieval["actrone.l2.threshold"] = threshold
        self._retrieval: Attributes = retrieval

    # -- child spans: only under a recording span of a public call --
    def step(
        self,
        name: str,
        awaitable: Coroutine[Any, Any, T],
        attributes: Attributes | None = None,
    ) -> Coroutine[Any, Any, T]:
        if not _RECORDING.get():
            return awaitable
        return self._step(name, awaitable, attributes)

    async def _step(
        self, name: str, awaitable: Coroutine[Any, Any, T], attributes: Attributes | None
    ) -> T:
        with self._span(name, attributes) as span:
            result = await awaitable
            describe = _STEP_RESULTS.get(name)
            if describe is not None:
                span.set_attributes(describe(result))
            return result

    def steps(
        self, names: tuple[str, str], awaitable: Coroutine[Any, Any, tuple[T, U]]
    ) -> Coroutine[Any, Any, tuple[T, U]]:
        if not _RECORDING.get():
            return awaitable
        return self._steps(names, awaitable)

    async def _steps(
        self, names: tuple[str, str], awaitable: Coroutine[Any, Any, tuple[T, U]]
    ) -> tuple[T, U]:
        # Siblings, both children of the call's span, both covering the one round trip.
        spans = [
            self._tracer.start_span(
                name,
                attributes=dict(self._retrieval if name == "actrone.l2.search" else self._base),
                record_exception=False,
                set_status_on_exception=False,
            )
            for name in names
        ]
        try:
            result = await awaitable
            for span, name, part in zip(spans, names, result, strict=True):
                describe = _STEP_RESULTS.get(name)
                if describe is not None:
                    span.set_attributes(describe(part))
            return result
        except Exception as exc:
            for span in spans:
                self._failed(span, exc)
            raise
        finally:
            for span in spans:
                span.end()

    def span(self, name: str) -> AbstractContextManager[object]:
        if not _RECORDING.get():
            return _NULL
        return self._span(name, None)

    @contextmanager
    def _span(self, name: str, attributes: Attributes | None) -> Iterator[Span]:
        attrs = dict(self._retrieval if name == "actrone.l2.search" else self._base)
        if attributes:
            attrs.update(attributes)
        with self._tracer.start_as_current_span(
            name, attributes=attrs, record_exception=False, set_status_on_exception=False
        ) as span:
            try:
                yield span
            except Exception as exc:
                self._failed(span, exc)
                raise

    # -- public methods --
    async def operation(
        self,
        name: str,
        fn: Callable[..., Coroutine[Any, Any, T]],
        owner: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> T:
        started = time.perf_counter()
        error: str | None = None
        try:
            # Without a configured provider every span would be the API's no-op, at a few
            # microseconds each: skip them, asked per call so a provider set later counts.
            if isinstance(self._provider(), self._untraced):
                return await fn(owner, *args, **kwargs)
            return await self._traced_call(name, fn, owner, args, kwargs)
        except BaseException as exc:
            error = type(exc).__qualname__
            raise
        finally:
            self._record(name, time.perf_counter() - started, error)

    async def _traced_call(
        self,
        name: str,
        fn: Callable[..., Coroutine[Any, Any, T]],
        owner: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> T:
        attrs = dict(self._retrieval if name in _RETRIEVAL else self._base)
        if self.record_content:
            attrs.update(_content_arguments(fn, owner, args, kwargs))
        with self._tracer.start_as_current_span(
            f"actrone.{name}",
            attributes=attrs,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            recording = span.is_recording()
            # A sampled-out call gets no child spans either.
            token = _RECORDING.set(recording)
            try:
                result = await fn(owner, *args, **kwargs)
            except Exception as exc:
                self._failed(span, exc)
                raise
            finally:
                _RECORDING.reset(token)
            if recording:
                span.set_attributes(_describe_result(result, self.record_content))
            return result

    def _failed(self, span: Span, exc: Exception) -> None:
        from opentelemetry.trace import Status, StatusCode

        kind = type(exc).__qualname__
        if self.record_content:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, f"{kind}: {exc}"))
            return
        # The message may quote an id or a driver's DETAIL line: the type and frames only.
        span.record_exception(
            exc, {"exception.message": kind, "exception.stacktrace": _frames_only(exc)}
        )
        span.set_status(Status(StatusCode.ERROR, kind))

    def _record(self, name: str, seconds: float, error: str | None) -> None:
        histogram = self._histograms.get(name)
        if histogram is None:
            histogram = self._histograms[name] = _histogram(self._meter, name)
        attrs: dict[str, str] = {"actrone.backend": self._backend}
        if error is not None:
            attrs["error.type"] = error
        histogram.record(seconds, attrs)


def _frames_only(exc: BaseException) -> str:
    """The traceback of ``exc`` and its causes, as Python prints it, without the messages."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not e for e in chain):
        chain.append(current)
        cause = current.__cause__
        current = (
            cause if cause is not None or current.__suppress_context__ else current.__context__
        )
    return "\n".join(
        "Traceback (most recent call last):\n"
        + "".join(traceback.format_tb(e.__traceback__))
        + type(e).__qualname__
        + "\n"
        for e in reversed(chain)
    )


@functools.cache
def _meter(version: str) -> Meter:
    """The process's one meter of this library. Until the application sets a meter provider
    the API keeps every meter asked of it, and every instrument made by one (its proxies, to
    hand them the real ones later): a meter per manager grew the process with each manager
    created and closed."""
    from opentelemetry import metrics

    return metrics.get_meter(SCOPE, version)


@functools.cache  # one per meter and name: see _meter
def _histogram(meter: Meter, name: str) -> Histogram:
    metric = f"actrone.{name}.duration"
    description = f"Duration of MemoryManager.{name}"
    try:
        return meter.create_histogram(
            metric, unit="s", description=description, explicit_bucket_boundaries_advisory=_BUCKETS
        )
    except TypeError:  # an opentelemetry-api from before the bucket advisory
        return meter.create_histogram(metric, unit="s", description=description)


_signature = functools.cache(inspect.signature)


def _content_arguments(
    fn: Callable[..., Any], owner: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, str]:
    try:
        bound = _signature(fn).bind(owner, *args, **kwargs).arguments
    except TypeError:  # the guard turns the bad call into a ValidationError
        return {}
    return {
        f"actrone.{name}": bound[name]
        for name in _CONTENT_ARGUMENTS
        if isinstance(bound.get(name), str)
    }


def _describe_result(result: object, content: bool) -> dict[str, Any]:
    if isinstance(result, RetrievedContext):
        attrs: dict[str, Any] = {
            "actrone.token_budget": result.token_budget,
            "actrone.l1.budget": result.session_budget,
            "actrone.l1.tokens": result.session_tokens,
            "actrone.l1.turns": len(result.recent_turns),
            "actrone.l2.budget": result.episodic_budget,
            "actrone.l2.tokens": result.episodic_tokens,
            "actrone.l2.candidates_considered": result.candidates_considered,
            "actrone.l2.memories": len(result.episodic_memories),
        }
        if content:
            attrs["actrone.l1.turn_ids"] = [t.id for t in result.recent_turns]
            attrs["actrone.l2.memory_ids"] = [m.id for m in result.episodic_memories]
        return attrs
    if isinstance(result, list):
        attrs = {"actrone.results": len(result)}
        ids = [getattr(item, "id", item) for item in result]
        if content and all(isinstance(i, str) for i in ids):
            attrs["actrone.result_ids"] = ids
        return attrs
    if isinstance(result, int) and not isinstance(result, bool):
        return {"actrone.result": result}
    return {}


def _search_attributes(found: PackedSearch) -> dict[str, int]:
    return {
        "actrone.l2.candidates_considered": found.candidates_considered,
        "actrone.l2.hits": len(found.hits),
        "actrone.l2.tokens": found.tokens,
    }


# What each step's result says, by span name.
_STEP_RESULTS: dict[str, Callable[[Any], Mapping[str, Any]]] = {
    "actrone.l1": lambda turns: {"actrone.l1.turns_read": len(turns)},
    "actrone.l2.search": _search_attributes,
    "actrone.rerank": lambda hits: {"actrone.rerank.hits": len(hits)},
}


class Traceable(Protocol):
    """What :func:`traced` asks of the object whose method it traces."""

    @property
    def _telemetry(self) -> Telemetry: ...


def traced(
    method: Callable[Concatenate[M, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[M, P], Coroutine[Any, Any, T]]:
    """A public coroutine method with a span and a histogram, from ``self._telemetry``.

    Apply it over :func:`~actrone_pg._guard.guarded`, so the span sees the error the caller
    gets. Plain methods (``count_tokens``) run without I/O and are not traced: the manager
    calls them once per memory.
    """
    name = method.__name__

    @functools.wraps(method)
    async def call(self: M, /, *args: P.args, **kwargs: P.kwargs) -> T:
        telemetry = self._telemetry
        if not telemetry.enabled:
            return await method(self, *args, **kwargs)
        return await telemetry.operation(name, method, self, args, kwargs)

    setattr(call, TRACED, True)
    return call


def traced_constructor(
    method: Callable[Concatenate[S, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, T]]:
    """:func:`traced` for ``create`` (under ``classmethod``): the telemetry is the one its
    ``config`` (and ``store``) would give the manager."""
    name = method.__name__

    @functools.wraps(method)
    async def call(cls: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        telemetry = _constructor_telemetry(args, kwargs)
        return await telemetry.operation(name, method, cls, args, kwargs)

    setattr(call, TRACED, True)
    return call


def _constructor_telemetry(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Telemetry:
    config = args[0] if args else kwargs.get("config")
    if config is None:
        try:
            config = MemoryConfig()
        except Exception:  # create() raises it, typed, inside its span-less call
            return NO_TELEMETRY
    if not isinstance(config, MemoryConfig):
        return NO_TELEMETRY
    store = kwargs.get("store")
    backend = getattr(store, "backend", None) if store is not None else None
    return create_telemetry(config, backend=backend if isinstance(backend, str) else config.backend)
