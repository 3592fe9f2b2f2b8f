"""OpenTelemetry (spec §10): spans, attributes, errors and latency histograms of the manager.

The application's providers are the SDK's with an in-memory span exporter and metric reader,
set globally once for this module, as an application would set them.
"""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from actrone_pg import MemoryConfig, MemoryManager, StoreError, ValidationError
from actrone_pg._telemetry import NO_TELEMETRY, SCOPE, TRACED
from actrone_pg.pipeline import SearchRequest
from actrone_pg.stores import Store
from actrone_pg.stores.memory import InMemoryStore
from tests.helpers import FixedEmbedder, ScoreByKeywordReranker

CFG = MemoryConfig(backend="memory", embedding_provider="hashing", relevance_threshold=0.5)
VECTORS = {
    "what does Ada eat": [1, 0, 0, 0],
    "Ada is allergic to peanuts": [0.8, 0.6, 0, 0],
    "Ada eats peanut-free granola": [0.9, 0.1, 0.1, 0],
    "Ada likes jazz": [0, 1, 0, 0],
}
QUERY = "what does Ada eat"
AGENT = "agent-7f3c"
SESSION = "session-91aa"


class Telemetry:
    """The spans and metrics exported since the last :meth:`clear`."""

    def __init__(self, exporter: InMemorySpanExporter, reader: InMemoryMetricReader) -> None:
        self.exporter = exporter
        self.reader = reader

    def clear(self) -> None:
        self.exporter.clear()

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        (span,) = self.named(name)
        return span

    def histogram_count(self, metric: str, attributes: dict[str, str]) -> int:
        """Measurements recorded so far (cumulative) at exactly ``attributes``."""
        data = self.reader.get_metrics_data()
        count = 0
        for rm in data.resource_metrics if data else ():
            for sm in rm.scope_metrics:
                if sm.scope.name != SCOPE:
                    continue
                for m in sm.metrics:
                    if m.name == metric:
                        assert m.unit == "s"
                        for point in m.data.data_points:
                            if dict(point.attributes or {}) == attributes:
                                assert point.sum >= 0
                                count += point.count
        return count


@pytest.fixture(scope="module")
def providers() -> Iterator[Telemetry]:
    exporter = InMemorySpanExporter()
    tracer_provider = trace.get_tracer_provider()
    if not isinstance(tracer_provider, TracerProvider):
        tracer_provider = TracerProvider()
        trace.set_tracer_provider(tracer_provider)
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    assert not isinstance(metrics.get_meter_provider(), MeterProvider), "set elsewhere"
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    yield Telemetry(exporter, reader)
    exporter.shutdown()  # later test modules' spans are dropped rather than kept


@pytest.fixture
def otel(providers: Telemetry) -> Telemetry:
    providers.clear()
    return providers


async def filled(
    store: Store | None = None, *, reranker: Any = None, **cfg: Any
) -> tuple[MemoryManager, list[str]]:
    mm = await MemoryManager.create(
        CFG.replace(**cfg),
        store=store if store is not None else InMemoryStore(),
        embedder=FixedEmbedder(VECTORS),
        reranker=reranker,
    )
    await mm.store_turn(AGENT, SESSION, "hi there", "hello, Ada")
    ids = await mm.inject_memories(
        AGENT, ["Ada is allergic to peanuts", "Ada eats peanut-free granola", "Ada likes jazz"]
    )
    return mm, ids


def everything_recorded(spans: list[ReadableSpan]) -> str:
    """Every attribute, event attribute and status of ``spans``, as one string."""
    parts: list[Any] = []
    for s in spans:
        parts.append(dict(s.attributes or {}))
        parts.extend(dict(e.attributes or {}) for e in s.events)
        parts.append(s.status.description)
    return json.dumps(parts, default=str)


def test_every_public_coroutine_method_is_traced() -> None:
    for name, attr in vars(MemoryManager).items():
        if name.startswith("_"):
            continue
        fn = attr.__func__ if isinstance(attr, classmethod) else attr
        if inspect.iscoroutinefunction(fn):
            assert getattr(fn, TRACED, False), name
    # A plain method without I/O, called once per memory by inject: no span of its own.
    assert not getattr(MemoryManager.count_tokens, TRACED, False)


async def test_retrieve_context_span_tree_and_attributes(otel: Telemetry) -> None:
    mm, ids = await filled()
    otel.clear()
    ctx = await mm.retrieve_context(AGENT, SESSION, QUERY, 1000)
    root = otel.one("actrone.retrieve_context")
    children = [s for s in otel.spans() if s is not root]
    assert sorted(s.name for s in children) == [
        "actrone.embed",
        "actrone.l1",
        "actrone.l1.pack",
        "actrone.l2.search",
    ]
    assert root.parent is None
    assert root.instrumentation_scope is not None and root.instrumentation_scope.name == SCOPE
    for child in children:
        assert child.parent is not None and child.parent.span_id == root.context.span_id
        assert child.context.trace_id == root.context.trace_id
        assert child.attributes is not None and child.attributes["actrone.backend"] == "memory"
    # Two memories pass the 0.5 cosine (0.8 and ~0.99), jazz (0.0) does not; 1000 tokens split
    # 35% / 25%; "hi there" + "hello, Ada" = 2 + 3 tokens at ceil(len / 4).
    assert [m.id for m in ctx.episodic_memories] == [ids[1], ids[0]]
    assert dict(root.attributes or {}) == {
        "actrone.backend": "memory",
        "actrone.embedder": "fixed",
        "actrone.l2.threshold": 0.5,
        "actrone.l2.limit": 500,
        "actrone.token_budget": 1000,
        "actrone.l1.budget": 350,
        "actrone.l1.tokens": 5,
        "actrone.l1.turns": 1,
        "actrone.l2.budget": 250,
        "actrone.l2.tokens": ctx.episodic_tokens,
        "actrone.l2.candidates_considered": 2,
        "actrone.l2.memories": 2,
    }
    assert ctx.episodic_tokens == 7 + 7  # "Ada is allergic to peanuts": 26 chars; granola: 27
    search = otel.one("actrone.l2.search").attributes or {}
    assert (search["actrone.l2.candidates_considered"], search["actrone.l2.hits"]) == (2, 2)
    assert search["actrone.l2.tokens"] == 14 and search["actrone.l2.threshold"] == 0.5
    assert (otel.one("actrone.l1").attributes or {})["actrone.l1.turns_read"] == 1
    assert (otel.one("actrone.embed").attributes or {})["actrone.embed.texts"] == 1
    assert all(s.status.status_code is StatusCode.UNSET for s in otel.spans())

    # The query's vector is cached now: no embedding the second time.
    otel.clear()
    await mm.retrieve_context(AGENT, SESSION, QUERY, 1000)
    assert not otel.named("actrone.embed")
    await mm.close()


async def test_rerank_and_l2_packing_get_spans(otel: Telemetry) -> None:
    mm, ids = await filled(reranker=ScoreByKeywordReranker("peanut"))
    otel.clear()
    ctx = await mm.retrieve_context(AGENT, SESSION, QUERY, 1000)
    root = otel.one("actrone.retrieve_context")
    names = sorted(s.name for s in otel.spans() if s is not root)
    assert names == [
        "actrone.embed",
        "actrone.l1",
        "actrone.l1.pack",
        "actrone.l2.pack",
        "actrone.l2.search",
        "actrone.rerank",
    ]
    assert (otel.one("actrone.rerank").attributes or {})["actrone.rerank.hits"] == 2
    # "peanuts" and "peanut-free" both count once: the fused order stays.
    assert [m.id for m in ctx.episodic_memories] == [ids[1], ids[0]]
    for name in ("actrone.rerank", "actrone.l2.pack"):
        span = otel.one(name)
        assert span.parent is not None and span.parent.span_id == root.context.span_id
    await mm.close()


async def test_no_content_or_ids_by_default(otel: Telemetry) -> None:
    mm, ids = await filled()
    await mm.retrieve_context(AGENT, SESSION, QUERY, 1000)
    await mm.search_memories(AGENT, QUERY)
    await mm.get_memory(AGENT, ids[0])
    recorded = everything_recorded(otel.spans())
    assert "actrone.l2.candidates_considered" in recorded  # the check below reads real attributes
    for secret in [QUERY, AGENT, SESSION, "peanut", "hi there", *ids]:
        assert secret not in recorded, secret
    await mm.close()


async def test_query_and_ids_recorded_when_enabled(otel: Telemetry) -> None:
    mm, ids = await filled(otel_record_content=True)
    otel.clear()
    ctx = await mm.retrieve_context(AGENT, SESSION, QUERY, 1000)
    attrs = otel.one("actrone.retrieve_context").attributes or {}
    assert attrs["actrone.query"] == QUERY
    assert (attrs["actrone.agent_id"], attrs["actrone.session_id"]) == (AGENT, SESSION)
    assert list(attrs["actrone.l2.memory_ids"]) == [ids[1], ids[0]]  # type: ignore[arg-type]
    assert list(attrs["actrone.l1.turn_ids"]) == [t.id for t in ctx.recent_turns]  # type: ignore[arg-type]
    found = await mm.search_memories(AGENT, QUERY, limit=1)
    attrs = otel.one("actrone.search_memories").attributes or {}
    assert attrs["actrone.results"] == 1
    assert list(attrs["actrone.result_ids"]) == [found[0].id]  # type: ignore[arg-type]
    # Memory and turn texts stay out even then.
    recorded = everything_recorded(otel.spans())
    assert "peanut" not in recorded and "hi there" not in recorded
    await mm.close()


SECRET = "secret-row-42"


class SearchFails(InMemoryStore):
    async def search(self, request: SearchRequest) -> Any:
        # The stack frames quote this line as written; the value appears only in the message.
        raise RuntimeError(f"disk on fire near row {SECRET}")


async def test_an_error_is_the_typed_one_on_the_span(otel: Telemetry) -> None:
    attributes = {"actrone.backend": "memory", "error.type": "StoreError"}
    before = otel.histogram_count("actrone.search_memories.duration", attributes)
    mm, _ = await filled(SearchFails())
    otel.clear()
    with pytest.raises(StoreError):
        await mm.search_memories(AGENT, QUERY)
    root = otel.one("actrone.search_memories")
    assert root.status.status_code is StatusCode.ERROR
    assert root.status.description == "StoreError"
    (event,) = root.events
    assert event.name == "exception"
    assert (event.attributes or {})["exception.type"] == "actrone_pg.errors.StoreError"
    # The step that failed records the error as the store's boundary typed it, the raw one in
    # its chain of frames; the message stays out by default.
    search = otel.one("actrone.l2.search")
    assert search.status.status_code is StatusCode.ERROR
    step = search.events[0].attributes or {}
    assert step["exception.type"] == "actrone_pg.errors.StoreError"
    assert str(step["exception.stacktrace"]).count("\nRuntimeError\n") == 1
    assert SECRET not in everything_recorded(otel.spans())
    assert "in search" in str((event.attributes or {})["exception.stacktrace"])
    assert otel.histogram_count("actrone.search_memories.duration", attributes) == before + 1
    await mm.close()

    mm, _ = await filled(SearchFails(), otel_record_content=True)
    otel.clear()
    with pytest.raises(StoreError):
        await mm.search_memories(AGENT, QUERY)
    root = otel.one("actrone.search_memories")
    assert SECRET in str(root.status.description)
    await mm.close()


async def test_bad_input_fails_its_span(otel: Telemetry) -> None:
    mm, _ = await filled()
    otel.clear()
    with pytest.raises(ValidationError):
        await mm.retrieve_context(AGENT, SESSION, QUERY, -5)
    (root,) = otel.spans()  # rejected before any step ran
    assert root.name == "actrone.retrieve_context"
    assert root.status.status_code is StatusCode.ERROR
    assert root.status.description == "ValidationError"
    await mm.close()


async def test_latency_histograms_per_operation(otel: Telemetry) -> None:
    ok = {"actrone.backend": "memory"}
    before = {
        op: otel.histogram_count(f"actrone.{op}.duration", ok)
        for op in ("retrieve_context", "inject_memories", "create")
    }
    mm, _ = await filled()
    for _ in range(3):
        await mm.retrieve_context(AGENT, SESSION, QUERY, 1000)
    assert otel.histogram_count("actrone.retrieve_context.duration", ok) == (
        before["retrieve_context"] + 3
    )
    assert otel.histogram_count("actrone.inject_memories.duration", ok) == (
        before["inject_memories"] + 1
    )
    assert otel.histogram_count("actrone.create.duration", ok) == before["create"] + 1
    await mm.close()


async def test_create_and_inject_spans(otel: Telemetry) -> None:
    mm, _ = await filled(embedding_batch_size=2)
    assert (otel.one("actrone.create").attributes or {})["actrone.backend"] == "memory"
    inject = otel.one("actrone.inject_memories")
    embeds = otel.named("actrone.embed")
    # Three memories in batches of two.
    assert sorted((e.attributes or {})["actrone.embed.texts"] for e in embeds) == [1, 2]  # type: ignore[type-var]
    assert all(e.parent is not None and e.parent.span_id == inject.context.span_id for e in embeds)
    assert (inject.attributes or {})["actrone.results"] == 3
    await mm.close()


async def test_switched_off_reports_nothing(otel: Telemetry) -> None:
    mm, _ = await filled(otel_enabled=False)
    assert mm._telemetry is NO_TELEMETRY
    await mm.retrieve_context(AGENT, SESSION, QUERY, 1000)
    await mm.close()
    assert otel.spans() == []


def test_the_sync_facade_is_traced_too(otel: Telemetry) -> None:
    from actrone_pg.sync import MemoryManager as SyncMemoryManager

    with SyncMemoryManager.create(CFG, embedder=FixedEmbedder(VECTORS)) as mm:
        mm.inject_memory(AGENT, "Ada is allergic to peanuts")
        mm.retrieve_context(AGENT, SESSION, QUERY, 1000)
    root = otel.one("actrone.retrieve_context")
    assert (root.attributes or {})["actrone.l2.memories"] == 1


@pytest.mark.parametrize(
    "prelude",
    [
        # The extra is absent: the import fails.
        "sys.modules['opentelemetry'] = None",
        # Installed but switched off: never imported.
        "os.environ['ACTRONE_OTEL_ENABLED'] = 'false'",
    ],
)
def test_absent_or_off_never_imports_opentelemetry(prelude: str) -> None:
    code = textwrap.dedent(
        f"""
        import asyncio, os, sys
        {prelude}
        from actrone_pg import MemoryConfig, MemoryManager
        from actrone_pg._telemetry import NO_TELEMETRY

        async def main():
            cfg = MemoryConfig(backend="memory", embedding_provider="hashing")
            async with await MemoryManager.create(cfg) as mm:
                assert mm._telemetry is NO_TELEMETRY
                await mm.inject_memory("a", "Ada is allergic to peanuts")
                ctx = await mm.retrieve_context("a", "s", "Ada peanuts", 1000)
                assert len(ctx.episodic_memories) == 1
            assert not [m for m in sys.modules if m.startswith("opentelemetry.")]
            print("ok")

        asyncio.run(main())
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_providers_configured_by_the_application_later_are_used() -> None:
    code = textwrap.dedent(
        """
        import asyncio
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from actrone_pg import MemoryConfig, MemoryManager

        reader = InMemoryMetricReader()
        exporter = InMemorySpanExporter()

        def points():
            data = reader.get_metrics_data()
            return sum(
                p.count
                for rm in data.resource_metrics
                for sm in rm.scope_metrics
                for m in sm.metrics
                if m.name == "actrone.search_memories.duration"
                for p in m.data.data_points
            )

        async def main():
            cfg = MemoryConfig(backend="memory", embedding_provider="hashing")
            async with await MemoryManager.create(cfg) as mm:
                # Metrics only: the histogram counts, no tracer provider to make spans for.
                metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
                await mm.search_memories("a", "peanuts")
                assert points() == 1
                provider = TracerProvider()
                provider.add_span_processor(SimpleSpanProcessor(exporter))
                trace.set_tracer_provider(provider)
                await mm.search_memories("a", "peanuts")
                assert points() == 2
            names = sorted(s.name for s in exporter.get_finished_spans())
            print(names)

        asyncio.run(main())
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr
    # Spans only from the calls after the tracer provider was set: the second search (its query
    # vector cached by the first: no embedding) and close.
    assert out.stdout.strip() == str(
        ["actrone.close", "actrone.l2.search", "actrone.search_memories"]
    )


def test_the_documented_example_runs() -> None:
    doc = (Path(__file__).parent.parent / "docs" / "observability.md").read_text()
    match = re.search(r"```python\n(.*?)```", doc, re.S)
    assert match is not None
    out = subprocess.run(
        [sys.executable, "-c", match.group(1)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    for name in ("actrone.retrieve_context", "actrone.l1", "actrone.l2.search", "actrone.embed"):
        assert f'"name": "{name}"' in out.stdout, name
    assert '"name": "actrone.retrieve_context.duration"' in out.stdout


@pytest.mark.postgres
async def test_retrieve_context_on_postgres(otel: Telemetry, store_postgres: Store) -> None:
    ok = {"actrone.backend": "postgres"}
    before = otel.histogram_count("actrone.retrieve_context.duration", ok)
    mm, ids = await filled(store_postgres, backend="postgres")
    otel.clear()
    ctx = await mm.retrieve_context(AGENT, SESSION, QUERY, 1000)
    assert [m.id for m in ctx.episodic_memories] == [ids[1], ids[0]]
    root = otel.one("actrone.retrieve_context")
    children = sorted(s.name for s in otel.spans() if s is not root)
    assert children == ["actrone.embed", "actrone.l1", "actrone.l1.pack", "actrone.l2.search"]
    for span in otel.spans():
        assert (span.attributes or {})["actrone.backend"] == "postgres"
        assert span is root or (
            span.parent is not None and span.parent.span_id == root.context.span_id
        )
    attrs = root.attributes or {}
    assert (attrs["actrone.l2.candidates_considered"], attrs["actrone.l2.memories"]) == (2, 2)
    assert (attrs["actrone.l1.tokens"], attrs["actrone.l2.tokens"]) == (5, 14)
    search = otel.one("actrone.l2.search").attributes or {}
    assert (search["actrone.l2.candidates_considered"], search["actrone.l2.hits"]) == (2, 2)
    recorded = everything_recorded(otel.spans())
    assert QUERY not in recorded and ids[0] not in recorded
    assert otel.histogram_count("actrone.retrieve_context.duration", ok) == before + 1
    await mm.close()
