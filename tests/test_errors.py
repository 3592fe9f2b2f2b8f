"""Every public method raises only ActroneError subclasses, cause chained (docs/retrieval.md).

The failures here are real components that fail: a store, an embedder, a reranker and a token
counter written to raise, and inputs that used to escape as ``ExceptionGroup``, ``TypeError``,
``OverflowError``, ``RecursionError`` or a driver's encoding error.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import numpy as np
import pytest

from actrone_pg import (
    ActroneError,
    ConfigurationError,
    ConsolidationError,
    DimensionMismatchError,
    EmbedderError,
    MemoryConfig,
    MemoryManager,
    RerankerError,
    StoreError,
    ValidationError,
)
from actrone_pg import _validation as v
from actrone_pg._guard import COMPONENT_ERRORS, GUARDED, calling
from actrone_pg._manager.guarded_store import GuardedContextStore, GuardedStore, guard_store
from actrone_pg.embedders import HashingEmbedder, as_vectors, normalise
from actrone_pg.stores import Store
from actrone_pg.stores.base import ContextStore
from actrone_pg.stores.memory import InMemoryStore
from tests.helpers import FixedEmbedder, SlowStore

CFG = MemoryConfig(backend="memory", embedding_provider="hashing")

#: Valid arguments for every public method of MemoryManager. A method added later without an
#: entry here fails test_every_public_method_is_listed_and_guarded.
CALLS: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {
    "store_turn": (("ag", "s", "hello", "hi"), {}),
    "get_recent_turns": (("ag", "s"), {}),
    "get_session": (("ag", "s"), {}),
    "list_sessions": (("ag",), {}),
    "set_session_metadata": (("ag", "s", {"k": 1}), {}),
    "clear_session": (("ag", "s"), {}),
    "sweep_expired_sessions": ((), {}),
    "consolidate_session": (("ag", "s"), {}),
    "try_lock": (("ag",), {}),
    "release_lock": (("ag", "token"), {}),
    "inject_memory": (("ag", "some content"), {}),
    "inject_memories": (("ag", ["one", "two"]), {}),
    "delete_memory": (("ag", "m1"), {}),
    "get_memory": (("ag", "m1"), {}),
    "update_memory": (("ag", "m1"), {"content": "new content"}),
    "memory_history": (("ag", "m1"), {}),
    "list_memories": (("ag",), {"filters": {"tags_any": ["x"]}, "limit": 5}),
    "sweep_expired": ((), {}),
    "count_memories": (("ag",), {}),
    "erase_agent": (("ag",), {}),
    "search_memories": (("ag", "query"), {}),
    "retrieve_context": (("ag", "s", "query", 1000), {}),
    "count_tokens": (("some text",), {}),
    "close": ((), {}),
    "create": ((), {}),
}


def public_methods() -> list[str]:
    return sorted(
        name
        for name, attr in vars(MemoryManager).items()
        if not name.startswith("_")
        and (inspect.isfunction(attr) or isinstance(attr, (classmethod, staticmethod)))
    )


def test_every_public_method_is_listed_and_guarded() -> None:
    assert public_methods() == sorted(CALLS)
    for name in CALLS:
        assert getattr(getattr(MemoryManager, name), GUARDED, False), name


@pytest.mark.parametrize("component", sorted(COMPONENT_ERRORS))
def test_the_one_table_types_a_components_own_failure(component: Any) -> None:
    with pytest.raises(COMPONENT_ERRORS[component]) as info, calling(component, "x"):
        raise OSError("no route to host")
    assert str(info.value) == f"the {component} 'x' failed: OSError: no route to host"
    assert isinstance(info.value.__cause__, OSError)
    # An ActroneError a component raises is already typed: it passes untouched.
    typed = ValidationError("bad id")
    with pytest.raises(ValidationError) as passed, calling(component):
        raise typed
    assert passed.value is typed and passed.value.__cause__ is None


def _protocol_methods(protocol: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in vars(protocol).items()
        if not name.startswith("_") and inspect.iscoroutinefunction(member)
    }


def test_the_guarded_store_is_the_store_protocol_method_for_method() -> None:
    # A method added to the protocol, or a parameter, must be added to the boundary too.
    store_methods = _protocol_methods(Store)
    assert {"setup", "search", "erase_agent", "update_memory"} <= set(store_methods)
    for name, signature in store_methods.items():
        assert inspect.signature(getattr(GuardedStore, name)) == signature, name
    assert not hasattr(GuardedStore, "fetch_context")
    for name, signature in _protocol_methods(ContextStore).items():
        assert inspect.signature(getattr(GuardedContextStore, name)) == signature, name
    assert isinstance(guard_store(InMemoryStore()), ContextStore)
    assert not isinstance(guard_store(TwoCallBrokenStore()), ContextStore)


@pytest.mark.parametrize(
    ("factory", "component"),
    [
        ("create_embedder", "embedder"),
        ("create_store", "store"),
        ("create_consolidator", "consolidator"),
    ],
)
async def test_a_component_that_fails_to_build_is_its_error(
    factory: str, component: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fails(config: MemoryConfig) -> Any:
        raise OSError("cannot open the model file")

    monkeypatch.setattr(f"actrone_pg.manager.{factory}", fails)
    with pytest.raises(COMPONENT_ERRORS[component], match="cannot open") as info:
        await MemoryManager.create(CFG)
    assert isinstance(info.value.__cause__, OSError)


async def test_a_failing_consolidator_is_a_consolidation_error() -> None:
    class Failing:
        name = "failing"

        async def consolidate(self, turns: Any, context: Any) -> Any:
            raise LookupError("the model is gone")

    mm = await make(consolidator=Failing())
    await mm.store_turn("ag", "s", "I moved to Lyon", "Noted!")
    with pytest.raises(ConsolidationError, match="the model is gone") as info:
        await mm.consolidate_session("ag", "s")
    assert isinstance(info.value.__cause__, LookupError)


async def test_a_failure_of_no_component_is_still_an_actrone_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A bug of actrone_pg itself: the plain root class, never the raw exception.
    def broken(*args: Any) -> Any:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr("actrone_pg._manager.retrieval.split_budget", broken)
    mm = await make()
    with pytest.raises(ActroneError) as info:
        await mm.retrieve_context("ag", "s", "query", 1000)
    assert type(info.value) is ActroneError
    assert isinstance(info.value.__cause__, ZeroDivisionError)


class BrokenStore(InMemoryStore):
    """An in-memory store whose every method raises a plain RuntimeError once ``broken``."""

    broken = False


def _breaking(name: str) -> Any:
    async def method(self: BrokenStore, *args: Any, **kwargs: Any) -> Any:
        if self.broken:
            raise RuntimeError(f"{name}: disk on fire")
        return await getattr(InMemoryStore, name)(self, *args, **kwargs)

    return method


for _name in [n for n, f in vars(Store).items() if not n.startswith("_") and callable(f)]:
    setattr(BrokenStore, _name, _breaking(_name))


async def make(store: Store | None = None, embedder: Any = None, **kwargs: Any) -> MemoryManager:
    return await MemoryManager.create(
        CFG, store=store or InMemoryStore(), embedder=embedder or FixedEmbedder(), **kwargs
    )


@pytest.mark.parametrize("name", sorted(set(CALLS) - {"count_tokens"}))
async def test_a_failing_store_is_a_store_error_with_its_cause(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = BrokenStore()
    if name == "close":
        # close() closes only a store the manager built itself: let create() build this one.
        monkeypatch.setattr("actrone_pg.manager.create_store", lambda config: store)
        mm = await MemoryManager.create(CFG, embedder=FixedEmbedder())
    else:
        mm = await make(store)
    await mm.inject_memory("ag", "query")  # something for the searches to find
    store.broken = True
    args, kwargs = CALLS[name]
    with pytest.raises(StoreError) as info:
        if name == "create":
            await MemoryManager.create(CFG, store=store, embedder=FixedEmbedder())
        else:
            await getattr(mm, name)(*args, **kwargs)
    assert isinstance(info.value.__cause__, RuntimeError)
    assert "disk on fire" in str(info.value)


async def test_the_listed_calls_are_valid() -> None:
    # The arguments above are good ones: on a working store every call succeeds.
    mm = await make()
    for name, (args, kwargs) in CALLS.items():
        if name == "create":
            await (await MemoryManager.create(CFG, embedder=FixedEmbedder())).close()
        elif name == "count_tokens":
            assert mm.count_tokens(*args, **kwargs) == 3
        else:
            if name in ("update_memory", "memory_history"):  # a memory "m1" to work on
                await mm.inject_memory("ag", "the first content", memory_id="m1")
            await getattr(mm, name)(*args, **kwargs)


class RaisingEmbedder(FixedEmbedder):
    async def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        raise ValueError("model server said no")


async def test_retrieve_context_raises_the_actrone_error_not_a_group() -> None:
    mm = await make(embedder=RaisingEmbedder())
    with pytest.raises(EmbedderError, match="model server said no") as info:
        await mm.retrieve_context("ag", "s", "query", 1000)
    assert isinstance(info.value.__cause__, ValueError)
    assert not isinstance(info.value, BaseExceptionGroup)


class TwoCallBrokenStore(BrokenStore):
    """A BrokenStore without ``fetch_context``: the manager reads L1 and L2 in two concurrent
    calls, as it does on Redis + Qdrant."""

    fetch_context = None  # not a ContextStore (typing.Protocol reads a None member so)


async def test_two_failures_at_once_give_one_error_noting_the_other() -> None:
    store = TwoCallBrokenStore()
    mm = await make(store, embedder=RaisingEmbedder())
    store.broken = True
    with pytest.raises(ActroneError) as info:
        await mm.retrieve_context("ag", "s", "query", 1000)
    err = info.value
    assert isinstance(err, (StoreError, EmbedderError))
    other = "model server said no" if isinstance(err, StoreError) else "disk on fire"
    assert any(other in note for note in getattr(err, "__notes__", []))


async def test_with_one_call_for_both_tiers_a_failing_embedder_stops_it_first() -> None:
    # The in-memory store, like PostgreSQL, reads L1 and L2 in one call after the embedding
    # (spec §3.2): the embedder's failure is the only one, the store is never asked.
    store = BrokenStore()
    mm = await make(store, embedder=RaisingEmbedder())
    store.broken = True
    with pytest.raises(EmbedderError) as info:
        await mm.retrieve_context("ag", "s", "query", 1000)
    assert not any("disk on fire" in note for note in getattr(info.value, "__notes__", []))


async def test_a_closed_store_is_one_store_error_on_every_backend(store: Store) -> None:
    mm = await MemoryManager.create(CFG, store=store, embedder=HashingEmbedder())
    await mm.inject_memory("ag", "cats")
    await store.close()
    if store.backend == "memory":
        return  # the in-process store has nothing to lose by closing
    with pytest.raises(StoreError) as info:
        await mm.retrieve_context("ag", "s", "cats", 1000)
    assert not isinstance(info.value, BaseExceptionGroup)
    with pytest.raises(StoreError):
        await mm.inject_memory("ag", "dogs")


class GarbageReranker:
    def __init__(self, scores: Any) -> None:
        self.scores = scores

    async def score(self, query: str, texts: Sequence[str]) -> Any:
        return self.scores


@pytest.mark.parametrize("scores", [None, "high", [1.0, 2.0], [math.nan], [[1.0, 2.0]], {"a": 1}])
async def test_a_reranker_returning_garbage_is_a_reranker_error(scores: Any) -> None:
    mm = await make(reranker=GarbageReranker(scores))
    await mm.inject_memory("ag", "query")
    with pytest.raises(RerankerError):
        await mm.retrieve_context("ag", "s", "query", 1000)


class RaisingReranker:
    async def score(self, query: str, texts: Sequence[str]) -> list[float]:
        raise KeyError("no such head")


async def test_a_failing_reranker_is_a_reranker_error() -> None:
    mm = await make(reranker=RaisingReranker())
    await mm.inject_memory("ag", "query")
    for call in (
        mm.search_memories("ag", "query"),
        mm.retrieve_context("ag", "s", "query", 1000),
    ):
        with pytest.raises(RerankerError) as info:
            await call
        assert isinstance(info.value.__cause__, KeyError)


class GarbageEmbedder(FixedEmbedder):
    def __init__(self, output: Any) -> None:
        super().__init__()
        self.output = output

    async def embed_batch(self, texts: Sequence[str]) -> Any:
        return self.output(len(texts))


@pytest.mark.parametrize(
    "output",
    [
        lambda n: None,
        lambda n: 42,
        lambda n: [[1.0, 0, 0, 0]] * (n + 1),
        lambda n: [["a", "b", "c", "d"]] * n,
        lambda n: [[1.0, math.nan, 0, 0]] * n,
        lambda n: [[[1.0, 0], [0, 0]]] * n,
        lambda n: [[0.0, 0.0, 0.0, 0.0]] * n,
        lambda n: [[10**400, 0, 0, 0]] * n,
        lambda n: np.zeros((n, 4, 2)),
    ],
)
async def test_an_embedder_returning_garbage_is_an_embedder_error(output: Any) -> None:
    mm = await make(embedder=GarbageEmbedder(output))
    with pytest.raises(EmbedderError):
        await mm.inject_memory("ag", "text")
    with pytest.raises(EmbedderError):
        await mm.retrieve_context("ag", "s", "query", 1000)
    assert await mm.count_memories("ag") == 0


async def test_a_wrong_dimension_from_the_embedder_is_a_dimension_mismatch() -> None:
    mm = await make(embedder=GarbageEmbedder(lambda n: [[1.0, 0.0, 0.0]] * n))
    with pytest.raises(DimensionMismatchError, match="3 dimensions"):
        await mm.inject_memory("ag", "text")
    with pytest.raises(DimensionMismatchError):
        await mm.search_memories("ag", "query")
    assert await mm.count_memories("ag") == 0


@pytest.mark.parametrize("scale", [1e155, 1e300, 1e-200, 5e-324])
def test_huge_and_tiny_vectors_normalise_to_the_same_direction(scale: float) -> None:
    got = normalise([3 * scale, 4 * scale, 0, 0], 4)
    assert got.tolist() == pytest.approx([0.6, 0.8, 0.0, 0.0])


def test_a_subnormal_vector_keeps_its_direction() -> None:
    # 5e-324 is the smallest float; its neighbour component is half of it rounded: exact 1:1.
    got = normalise([5e-324, 5e-324, 0, 0], 4)
    assert got.tolist() == pytest.approx([math.sqrt(0.5), math.sqrt(0.5), 0.0, 0.0])


def test_as_vectors_keeps_the_dimension_mismatch_type() -> None:
    with pytest.raises(DimensionMismatchError):
        as_vectors([[1.0, 2.0]], 1, 4, "e")
    with pytest.raises(EmbedderError):
        as_vectors([[1.0, 2.0, 3.0, "x"]], 1, 4, "e")


@pytest.mark.parametrize("scale", [1e155, 1e-200])
async def test_a_huge_or_tiny_embedding_is_stored_and_found(store: Store, scale: float) -> None:
    emb = FixedEmbedder({"doc": [scale, scale, 0, 0], "q": [1, 1, 0, 0]})
    mm = await MemoryManager.create(CFG, store=store, embedder=emb)
    mid = await mm.inject_memory("ag", "doc")
    hits = await mm.search_memories("ag", "q", explain=True)
    assert [h.id for h in hits] == [mid]
    assert hits[0].explain is not None
    assert hits[0].explain.cosine == pytest.approx(1.0, abs=1e-6)


async def test_a_failing_token_counter_is_a_configuration_error() -> None:
    def counter(text: str) -> int:
        raise ZeroDivisionError("oops")

    mm = await make(token_counter=counter)
    with pytest.raises(ConfigurationError, match="token_counter") as info:
        await mm.store_turn("ag", "s", "u", "a")
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    assert await mm.get_recent_turns("ag", "s") == []


async def test_a_store_missing_a_method_is_a_store_error() -> None:
    class Incomplete:
        backend = "incomplete"

        async def setup(self) -> None:
            pass

    with pytest.raises(StoreError, match="count_memories") as info:
        mm = await MemoryManager.create(CFG, store=Incomplete(), embedder=FixedEmbedder())  # type: ignore[arg-type]
        await mm.count_memories("ag")
    assert isinstance(info.value.__cause__, AttributeError)


async def test_wrong_arguments_are_a_validation_error() -> None:
    mm = await make()
    with pytest.raises(ValidationError, match="string"):
        mm.count_tokens(None)  # type: ignore[arg-type]
    # Named by the public method, not by the private collaborator it is forwarded to.
    with pytest.raises(ValidationError, match=r"^store_turn\(\) missing 3 required"):
        await mm.store_turn("ag")  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        await mm.count_memories("ag", surprise=1)  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="items"):
        await mm.inject_memories("ag", None)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="items"):
        await mm.inject_memories("ag", 5)  # type: ignore[arg-type]


async def test_cancellation_passes_through_untouched() -> None:
    mm = await MemoryManager.create(
        CFG, store=SlowStore(InMemoryStore(), 5.0), embedder=FixedEmbedder()
    )
    task = asyncio.create_task(mm.retrieve_context("ag", "s", "q", 100))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


SURROGATE = "a\ud800b"


@pytest.mark.parametrize(
    "call",
    [
        lambda mm: mm.store_turn(SURROGATE, "s", "u", "a"),
        lambda mm: mm.store_turn("ag", SURROGATE, "u", "a"),
        lambda mm: mm.store_turn("ag", "s", SURROGATE, "a"),
        lambda mm: mm.store_turn("ag", "s", "u", SURROGATE),
        lambda mm: mm.store_turn("ag", "s", "u", "a", turn_id=SURROGATE),
        lambda mm: mm.store_turn("ag", "s", "u", "a", tool_results=[{"k": SURROGATE}]),
        lambda mm: mm.store_turn("ag", "s", "u", "a", tool_results=[{SURROGATE: 1}]),
        lambda mm: mm.inject_memory(SURROGATE, "c"),
        lambda mm: mm.inject_memory("ag", SURROGATE),
        lambda mm: mm.inject_memory("ag", "c", memory_id=SURROGATE),
        lambda mm: mm.inject_memory("ag", "c", session_id=SURROGATE),
        lambda mm: mm.inject_memory("ag", "c", tags=[SURROGATE]),
        lambda mm: mm.inject_memory("ag", "c", source=SURROGATE),
        lambda mm: mm.inject_memory("ag", "c", content_type=SURROGATE),
        lambda mm: mm.inject_memory("ag", "c", sensitivity=SURROGATE),
        lambda mm: mm.inject_memory("ag", "c", metadata={SURROGATE: 1}),
        lambda mm: mm.inject_memory("ag", "c", metadata={"k": [SURROGATE]}),
        lambda mm: mm.set_session_metadata("ag", "s", {"k": SURROGATE}),
        lambda mm: mm.search_memories("ag", SURROGATE),
        lambda mm: mm.retrieve_context("ag", "s", SURROGATE, 100),
        lambda mm: mm.get_memory("ag", SURROGATE),
        lambda mm: mm.delete_memory("ag", SURROGATE),
        lambda mm: mm.try_lock("ag", SURROGATE),
        lambda mm: mm.release_lock("ag", SURROGATE),
        lambda mm: mm.erase_agent(SURROGATE),
    ],
)
async def test_lone_surrogates_are_refused_everywhere(store: Store, call: Any) -> None:
    mm = await MemoryManager.create(CFG, store=store, embedder=FixedEmbedder())
    with pytest.raises(ValidationError, match="surrogate"):
        await call(mm)
    assert await mm.count_memories("ag") == 0
    assert await mm.get_recent_turns("ag", "s") == []
    assert await mm.get_session("ag", "s") is None


@pytest.mark.parametrize(
    ("call", "names"),
    [
        (lambda mm: mm.search_memories("ag", "q", 2**31), "limit"),
        (lambda mm: mm.get_recent_turns("ag", "s", 2**63), "limit"),
        (lambda mm: mm.sweep_expired_sessions(2**31), "limit"),
        (lambda mm: mm.retrieve_context("ag", "s", "q", 10**30), "token_budget"),
        (lambda mm: mm.try_lock("ag", ttl_seconds=1e300), "ttl_seconds"),
        (lambda mm: mm.try_lock("ag", ttl_seconds=10**400), "ttl_seconds"),
        (lambda mm: mm.try_lock("ag", ttl_seconds=0), "ttl_seconds"),
        (lambda mm: mm.inject_memory("ag", "c", importance=10**400), "importance"),
        (lambda mm: mm.inject_memory("ag", "c", metadata={"n": 2**63}), "64-bit"),
        (lambda mm: mm.store_turn("ag", "s", "u", "a", tool_results=[-(2**63) - 1]), "64-bit"),
    ],
)
async def test_numbers_past_the_ranges_are_refused_naming_the_range(call: Any, names: str) -> None:
    mm = await make()
    with pytest.raises(ValidationError, match=names) as info:
        await call(mm)
    assert "[" in str(info.value) or "(" in str(info.value)
    assert await mm.count_memories("ag") == 0


async def test_numbers_at_the_ranges_work_on_every_backend(store: Store) -> None:
    mm = await MemoryManager.create(CFG, store=store, embedder=HashingEmbedder())
    top = v.MAX_INT
    await mm.store_turn("ag", "s", "u", "a", tool_results=[2**63 - 1, -(2**63)])
    edge = {"n": -(2**63), "f": 9999999999999998.0, "g": -9999999999999998.0, "t": 5e-324}
    mid = await mm.inject_memory("ag", "cats", importance=1, metadata=edge)
    assert [m.id for m in await mm.search_memories("ag", "cats", top)] == [mid]
    assert len(await mm.get_recent_turns("ag", "s", top)) == 1
    ctx = await mm.retrieve_context("ag", "s", "cats", top)
    assert [m.id for m in ctx.episodic_memories] == [mid] and len(ctx.recent_turns) == 1
    assert await mm.sweep_expired_sessions(top) == 0
    token = await mm.try_lock("ag", ttl_seconds=v.MAX_TTL_SECONDS)
    assert token is not None and await mm.release_lock("ag", token)
    got = await mm.get_memory("ag", mid)
    assert got is not None and got.metadata == edge and got.importance == 1.0
    (turn,) = await mm.get_recent_turns("ag", "s")
    assert turn.tool_results == [2**63 - 1, -(2**63)]


@pytest.mark.parametrize(
    "when",
    [
        datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=5))),
        datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-5))),
    ],
)
async def test_datetimes_that_overflow_in_utc_are_refused(when: datetime) -> None:
    mm = await make()
    with pytest.raises(ValidationError, match="years 1–9999"):
        await mm.inject_memory("ag", "c", created_at=when)
    assert await mm.count_memories("ag") == 0


async def test_the_extreme_datetimes_read_back_on_every_backend(store: Store) -> None:
    mm = await MemoryManager.create(CFG, store=store, embedder=HashingEmbedder())
    first = datetime(1, 1, 1, tzinfo=UTC)
    last = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
    eastern = datetime(2026, 1, 1, 12, tzinfo=timezone(timedelta(hours=14)))
    for when in (first, last, eastern):
        mid = await mm.inject_memory("ag", f"at {when.isoformat()}", created_at=when)
        got = await mm.get_memory("ag", mid)
        assert got is not None and got.created_at == when


def nested(depth: int) -> Any:
    """``depth`` objects and lists, alternating from an outermost object, around one string."""
    value: Any = "leaf"
    for i in range(depth):
        value = {"k": value} if (depth - 1 - i) % 2 == 0 else [value]
    return value


async def test_metadata_nesting_is_limited(store: Store) -> None:
    mm = await MemoryManager.create(CFG, store=store, embedder=HashingEmbedder())
    deepest = nested(v.MAX_JSON_DEPTH)
    mid = await mm.inject_memory("ag", "deep", metadata=deepest)
    got = await mm.get_memory("ag", mid)
    assert got is not None and got.metadata == deepest
    with pytest.raises(ValidationError, match="32 levels"):
        await mm.inject_memory("ag", "deeper", metadata=nested(v.MAX_JSON_DEPTH + 1))
    with pytest.raises(ValidationError, match="32 levels"):
        await mm.inject_memory("ag", "deepest", metadata=nested(100_000))
    assert await mm.count_memories("ag") == 1


@pytest.mark.parametrize(
    "metadata",
    [{1: "x"}, {"k": {None: 1}}, {"k": {1, 2}}, {"k": b"bytes"}, {"k": object()}],
)
async def test_metadata_that_would_not_read_back_is_refused(metadata: Any) -> None:
    mm = await make()
    with pytest.raises(ValidationError):
        await mm.inject_memory("ag", "c", metadata=metadata)
    assert await mm.count_memories("ag") == 0
