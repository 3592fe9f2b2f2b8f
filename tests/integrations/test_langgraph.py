"""ActroneStore against the real langgraph: the BaseStore API, a compiled graph, errors.

LangGraph ships no reusable store test suite (its store tests exercise its own InMemoryStore), so
its InMemoryStore serves as the oracle where the two must agree: get, filters without a query and
list_namespaces, given the same puts. Every backend (the async tests), sync and async, and a sync
graph on PostgreSQL.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any, TypedDict

import pytest
from langgraph.graph import START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    PutOp,
    SearchOp,
)
from langgraph.store.memory import InMemoryStore as LangGraphMemoryStore

from actrone_pg import ConfigurationError, MemoryConfig, ValidationError
from actrone_pg import MemoryManager as AsyncMemoryManager
from actrone_pg.integrations.langgraph import (
    INDEXED,
    UNINDEXED,
    ActroneStore,
    item_id,
    metadata_filter,
)
from actrone_pg.sync import MemoryManager
from tests.integrations.conftest import CFG

AGENT = "graph-1"

# (namespace, key, value): the namespaces of BaseStore.list_namespaces' own docstring, and values
# with fields to filter on.
ITEMS: list[tuple[tuple[str, ...], str, dict[str, Any]]] = [
    (("a", "b", "c"), "k1", {"text": "pasta with tomato sauce", "kind": "food", "n": 1}),
    (("a", "b", "d", "e"), "k2", {"text": "a walk in the park", "kind": "sport", "n": 2}),
    (("a", "b", "d", "i"), "k3", {"text": "pizza margherita", "kind": "food", "n": 3}),
    (("a", "b", "f"), "k4", {"text": "cycling to work", "kind": "sport", "meta": {"lang": "en"}}),
    (("a", "c", "f"), "k5", {"text": "tomato soup", "kind": "food", "meta": {"lang": "de"}}),
]


@pytest.fixture(
    params=[
        "memory",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("redis_qdrant", marks=[pytest.mark.redis, pytest.mark.qdrant]),
    ]
)
def backend_store(request: pytest.FixtureRequest) -> Any:
    """A fresh store of each backend in turn (synchronous: it only picks the fixture by name)."""
    return request.getfixturevalue(f"store_{request.param}")


@pytest.fixture
async def amm(backend_store: Any) -> AsyncIterator[AsyncMemoryManager]:
    """An async manager over each backend."""
    manager = await AsyncMemoryManager.create(CFG, store=backend_store)
    yield manager
    await manager.close()


def fill(store: BaseStore) -> None:
    for namespace, key, value in ITEMS:
        store.put(namespace, key, value)


async def afill(store: BaseStore) -> None:
    for namespace, key, value in ITEMS:
        await store.aput(namespace, key, value)


def oracle() -> LangGraphMemoryStore:
    store = LangGraphMemoryStore()
    fill(store)
    return store


def keys(items: list[Any]) -> list[str]:
    return [i.key for i in items]


# -- the BaseStore API --


async def test_put_get_update_and_delete(amm: AsyncMemoryManager) -> None:
    store = ActroneStore(amm, AGENT)
    assert isinstance(store, BaseStore)
    await store.aput(("users", "u1"), "diet", {"text": "no meat", "since": 2019})
    item = await store.aget(("users", "u1"), "diet")
    assert item is not None
    assert (item.namespace, item.key, item.value) == (
        ("users", "u1"),
        "diet",
        {
            "text": "no meat",
            "since": 2019,
        },
    )
    assert item.created_at == item.updated_at
    # the key is the memory's id: the second put is a new version of the same memory
    await store.aput(("users", "u1"), "diet", {"text": "vegan", "since": 2021})
    again = await store.aget(("users", "u1"), "diet")
    assert again is not None and again.value == {"text": "vegan", "since": 2021}
    assert again.created_at == item.created_at and again.updated_at > item.updated_at
    history = await amm.memory_history(AGENT, item_id(("users", "u1"), "diet"))
    assert [m.metadata["value"]["text"] for m in history] == ["no meat", "vegan"]
    # the same key in another namespace, or another key, is another item
    assert await store.aget(("users", "u2"), "diet") is None
    assert await store.aget(("users",), "diet") is None
    assert await store.aget(("users", "u1"), "Diet") is None
    await store.adelete(("users", "u1"), "diet")
    assert await store.aget(("users", "u1"), "diet") is None
    await store.adelete(("users", "u1"), "diet")  # deleting what is gone is no error
    assert await amm.count_memories(AGENT) == 0


async def test_an_item_is_a_memory_of_the_agent(amm: AsyncMemoryManager) -> None:
    store = ActroneStore(amm, AGENT, index={"fields": ["text"]})
    await store.aput(("users", "u1"), "diet", {"text": "The user eats no meat", "n": 1})
    memory = await amm.get_memory(AGENT, item_id(("users", "u1"), "diet"))
    assert memory is not None
    assert memory.content == "The user eats no meat"
    assert memory.content_type == INDEXED and memory.source == "langgraph"
    assert memory.metadata == {
        "namespace": {"0": "users", "1": "u1"},
        "key": "diet",
        "value": {"text": "The user eats no meat", "n": 1},
    }
    # so retrieve_context finds what the graph stored
    ctx = await amm.retrieve_context(AGENT, "s1", "does the user eat meat", 4000)
    assert [m.content for m in ctx.episodic_memories] == ["The user eats no meat"]


async def test_search_by_query_within_a_prefix(amm: AsyncMemoryManager) -> None:
    store = ActroneStore(amm, AGENT, index={"fields": ["text"]})
    await afill(store)
    hits = await store.asearch(("a",), query="tomato pasta", limit=10)
    assert keys(hits)[0] == "k1" and set(keys(hits)) <= {"k1", "k5", "k3"}
    scores = [h.score for h in hits]
    assert all(s is not None for s in scores) and scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    # the prefix is positional: ("a", "b") holds k1 but not k5 (("a", "c", "f"))
    assert "k5" not in keys(await store.asearch(("a", "b"), query="tomato soup"))
    assert keys(await store.asearch(("a", "c"), query="tomato soup")) == ["k5"]
    assert await store.asearch(("b",), query="tomato") == []
    # the whole store, filters, a window
    assert "k5" in keys(await store.asearch((), query="tomato soup"))
    assert keys(await store.asearch((), query="tomato", filter={"kind": "food", "n": 1})) == ["k1"]
    both = keys(await store.asearch((), query="tomato", limit=2))
    assert keys(await store.asearch((), query="tomato", limit=1, offset=1)) == both[1:2]
    assert await store.asearch((), query="tomato", limit=0) == []


async def test_filters_without_a_query_agree_with_langgraph(amm: AsyncMemoryManager) -> None:
    store = ActroneStore(amm, AGENT)
    await afill(store)
    reference = oracle()
    cases: list[tuple[tuple[str, ...], dict[str, Any] | None]] = [
        ((), None),
        (("a", "b"), None),
        (("a", "b", "d"), None),
        ((), {"kind": "food"}),
        (("a", "b"), {"kind": "food"}),
        ((), {"kind": {"$eq": "sport"}}),
        ((), {"meta": {"lang": "de"}}),
        ((), {"kind": "food", "n": 3}),
        ((), {"n": 2.0}),
        ((), {"kind": "drink"}),
        ((), {"missing": "x"}),
    ]
    for prefix, flt in cases:
        ours = await store.asearch(prefix, filter=flt, limit=100)
        theirs = reference.search(prefix, filter=flt, limit=100)
        assert sorted(keys(ours)) == sorted(keys(theirs)), (prefix, flt)
        assert all(h.score is None for h in ours)
    # newest first, and the window pages through them without gaps or repeats
    newest_first = keys(await store.asearch((), limit=100))
    assert newest_first == [k for _, k, _ in reversed(ITEMS)]
    pages = [keys(await store.asearch((), limit=2, offset=o)) for o in (0, 2, 4)]
    assert [k for page in pages for k in page] == newest_first


async def test_a_star_in_a_search_prefix_is_a_label(amm: AsyncMemoryManager) -> None:
    store, reference = ActroneStore(amm, AGENT), LangGraphMemoryStore()
    for s in (store, reference):
        await s.aput(("*", "b"), "star", {"v": 1})
        await s.aput(("x", "b"), "x", {"v": 2})
    for prefix in [("*",), ("x",), ("*", "b")]:
        assert keys(await store.asearch(prefix)) == keys(await reference.asearch(prefix))
    assert keys(await store.asearch(("*",))) == ["star"]
    # list_namespaces' paths are patterns: there "*" matches any label
    assert await store.alist_namespaces(prefix=("*", "b")) == [("*", "b"), ("x", "b")]


def test_listing_crosses_pages(mm: MemoryManager) -> None:
    store = ActroneStore(mm, AGENT)
    store.batch([PutOp(("n", str(i % 3)), f"k{i}", {"i": i}) for i in range(250)])
    listed = store.search(("n",), limit=1000)
    assert len(listed) == 250 and len({(i.namespace, i.key) for i in listed}) == 250
    assert len(store.search(("n", "1"), limit=1000)) == 83
    assert [i.value["i"] for i in store.search(("n",), limit=3, offset=240)] == [
        i.value["i"] for i in listed[240:243]
    ]
    assert store.list_namespaces() == [("n", "0"), ("n", "1"), ("n", "2")]


async def test_list_namespaces_agrees_with_langgraph(amm: AsyncMemoryManager) -> None:
    store = ActroneStore(amm, AGENT)
    await afill(store)
    reference = oracle()
    cases: list[dict[str, Any]] = [
        {},
        {"prefix": ("a", "b")},
        {"prefix": ("a", "b"), "max_depth": 3},
        {"prefix": ("a", "*", "f")},
        {"suffix": ("f",)},
        {"suffix": ("d", "*")},
        {"prefix": ("a",), "suffix": ("f",)},
        {"max_depth": 2},
        {"max_depth": 1},
        {"limit": 2, "offset": 1},
        {"prefix": ("x",)},
    ]
    for kwargs in cases:
        assert await store.alist_namespaces(**kwargs) == reference.list_namespaces(**kwargs), kwargs
    # the docstring's own example
    assert await store.alist_namespaces(prefix=("a", "b"), max_depth=3) == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("a", "b", "f"),
    ]


async def test_index_fields_and_unindexed_items(amm: AsyncMemoryManager) -> None:
    store = ActroneStore(amm, AGENT, index={"fields": ["title"]})
    await store.aput(("docs",), "d1", {"title": "Oslo weather", "body": "snow and ice"})
    await store.aput(("docs",), "d2", {"title": "x", "body": "tomato harvest"}, index=["body"])
    await store.aput(("docs",), "d3", {"title": "Oslo trams"}, index=False)
    await store.aput(("docs",), "d4", {"body": "no title here"})  # no text in its fields
    # only the index fields are searched
    assert keys(await store.asearch(("docs",), query="snow ice")) == []
    assert keys(await store.asearch(("docs",), query="oslo weather")) == ["d1"]
    assert keys(await store.asearch(("docs",), query="tomato harvest")) == ["d2"]
    # an unindexed item: get and listings find it, a query does not
    assert (await store.aget(("docs",), "d3")) is not None
    assert "d3" not in keys(await store.asearch(("docs",), query="oslo trams"))
    assert sorted(keys(await store.asearch(("docs",)))) == ["d1", "d2", "d3", "d4"]
    memory = await amm.get_memory(AGENT, item_id(("docs",), "d4"))
    assert memory is not None and memory.content_type == UNINDEXED
    # the whole value ("$", the default) when no fields are configured
    whole = ActroneStore(amm, "graph-2")
    await whole.aput(("docs",), "d1", {"title": "Oslo", "body": "snow"})
    whole_memory = await amm.get_memory("graph-2", item_id(("docs",), "d1"))
    assert whole_memory is not None
    assert whole_memory.content == '{"body": "snow", "title": "Oslo"}'


async def test_ttl_sets_the_expiry(amm: AsyncMemoryManager) -> None:
    store = ActroneStore(amm, AGENT, ttl={"default_ttl": 60})
    before = datetime.now(UTC)
    await store.aput(("t",), "default", {"text": "hourly"})
    await store.aput(("t",), "long", {"text": "daily"}, ttl=24 * 60)
    await store.aput(("t",), "never", {"text": "kept"}, ttl=None)
    await store.aput(("t",), "short", {"text": "gone soon"}, ttl=0.01)  # 600 ms
    expiry = {
        key: (await amm.get_memory(AGENT, item_id(("t",), key))).expires_at  # type: ignore[union-attr]
        for key in ("default", "long", "never")
    }
    assert (
        before + timedelta(minutes=60)
        <= expiry["default"]
        <= datetime.now(UTC) + timedelta(minutes=60)
    )
    assert expiry["long"] - expiry["default"] > timedelta(hours=23)  # type: ignore[operator]
    assert expiry["never"] is None
    # a put without a TTL removes the expiry (LangGraph's "never"), keeping the old version
    await store.aput(("t",), "default", {"text": "kept after all"}, ttl=None)
    kept = await amm.get_memory(AGENT, item_id(("t",), "default"))
    assert (
        kept is not None
        and kept.expires_at is None
        and kept.content == '{"text": "kept after all"}'
    )
    history = await amm.memory_history(AGENT, item_id(("t",), "default"))
    assert [(m.version, m.expires_at) for m in history] == [
        (1, expiry["default"]),
        (2, None),
    ]
    await asyncio.sleep(1.0)
    assert await store.aget(("t",), "short") is None
    assert "short" not in keys(await store.asearch(("t",)))
    assert store.ttl_config == {"refresh_on_read": False, "omit_expired": True, "default_ttl": 60}
    # an item put without a TTL by a store without default has none
    assert ActroneStore(amm, AGENT).ttl_config["default_ttl"] is None


# -- errors --


async def test_bad_input_raises_and_writes_nothing(amm: AsyncMemoryManager) -> None:
    store = ActroneStore(amm, AGENT)
    with pytest.raises(InvalidNamespaceError):
        await store.aput(("langgraph", "x"), "k", {"a": 1})  # BaseStore's own rule
    with pytest.raises(InvalidNamespaceError):
        await store.abatch([PutOp(("a", ""), "k", {"a": 1})])
    with pytest.raises(InvalidNamespaceError):
        await store.abatch([GetOp(("a", 1), "k")])  # type: ignore[arg-type]
    with pytest.raises(InvalidNamespaceError, match="empty"):
        await store.abatch([PutOp((), "k", {"a": 1})])
    with pytest.raises(ValidationError, match="max_depth"):
        await store.alist_namespaces(max_depth=0)
    with pytest.raises(ValidationError, match="key must be a string"):
        await store.abatch([PutOp(("a",), 7, {"a": 1})])  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="must be a dict"):
        await store.abatch([PutOp(("a",), "k", ["not", "a", "dict"])])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="JSON"):
        await store.aput(("a",), "k", {"when": datetime.now(UTC)})
    with pytest.raises(ValueError, match="NUL"):
        await store.aput(("a",), "k", {"text": "a\x00b"})
    with pytest.raises(ValidationError, match="ttl must lie in"):
        await store.aput(("a",), "k", {"a": 1}, ttl=-1)
    with pytest.raises(ValidationError, match="limit"):
        await store.asearch(("a",), limit=-1)
    # one bad op rejects the whole batch before anything is written
    with pytest.raises(ValidationError, match=r"\$gt"):
        await store.abatch(
            [
                PutOp(("a",), "good", {"n": 1}),
                SearchOp(("a",), filter={"n": {"$gt": 0}}),
            ]
        )
    with pytest.raises(ValueError, match="JSON"):
        await store.abatch([PutOp(("a",), "good", {"n": 1}), PutOp(("a",), "bad", {"x": {1}})])
    assert await amm.count_memories(AGENT) == 0


def test_filters_it_cannot_map_are_refused() -> None:
    assert metadata_filter({"kind": "food", "meta": {"lang": {"$eq": "en"}}}) == {
        "kind": "food",
        "meta": {"lang": "en"},
    }
    for flt, says in [
        ({"n": {"$gt": 1}}, r"\$gt"),
        ({"n": {"$ne": 1}}, r"\$ne"),
        ({"n": {"$eq": 1, "$lte": 3}}, r"\$lte"),
        ({"tags": ["a"]}, "list"),
        ({"tags": {"$eq": ["a"]}}, "list"),
        ({"meta": {"$eq": {"a": 1}}}, "equal object"),
        ({"gone": None}, "missing field"),
        ({"obj": object()}, "not a JSON value"),
    ]:
        with pytest.raises(ValidationError, match=says):
            metadata_filter(flt)


async def test_configuration_errors(amm: AsyncMemoryManager) -> None:
    with pytest.raises(ConfigurationError, match="index.embed"):
        ActroneStore(amm, AGENT, index={"dims": 256, "embed": lambda texts: []})
    with pytest.raises(ConfigurationError, match="index.dims"):
        ActroneStore(amm, AGENT, index={"dims": 3})
    ActroneStore(amm, AGENT, index={"dims": amm.embedder.dimensions, "fields": ["a.b[*].c"]})
    with pytest.raises(ConfigurationError, match="refresh_on_read"):
        ActroneStore(amm, AGENT, ttl={"refresh_on_read": True, "default_ttl": 5})
    with pytest.raises(ConfigurationError, match="sweep"):
        ActroneStore(amm, AGENT, ttl={"sweep_interval_minutes": 5})
    with pytest.raises(ValidationError, match="agent_id"):
        ActroneStore(amm, " ")
    with pytest.raises(TypeError, match="needs an actrone_pg.MemoryManager"):
        ActroneStore(object(), AGENT)  # type: ignore[arg-type]


async def test_an_async_manager_has_only_the_async_methods(amm: AsyncMemoryManager) -> None:
    store = ActroneStore(amm, AGENT)
    with pytest.raises(TypeError, match="only the async methods"):
        store.put(("a",), "k", {"a": 1})
    assert await amm.count_memories(AGENT) == 0


async def test_stores_of_two_agents_are_isolated(amm: AsyncMemoryManager) -> None:
    one, two = ActroneStore(amm, "agent-1"), ActroneStore(amm, "agent-2")
    await one.aput(("shared",), "k", {"text": "secret of one"})
    assert await two.aget(("shared",), "k") is None
    assert await two.asearch(("shared",), query="secret of one") == []
    assert await two.alist_namespaces() == []
    await two.adelete(("shared",), "k")
    assert await one.aget(("shared",), "k") is not None


async def test_memories_not_written_by_the_store_are_not_items(amm: AsyncMemoryManager) -> None:
    store = ActroneStore(amm, AGENT)
    await amm.inject_memory(AGENT, "tomato soup recipe", metadata={"key": "k", "value": {}})
    assert await store.asearch((), limit=100) == []
    assert await store.asearch((), query="tomato soup") == []
    assert await store.alist_namespaces() == []


# -- sync and a graph --


def test_sync_api_over_the_sync_manager(mm: MemoryManager) -> None:
    store = ActroneStore(mm, AGENT, index={"fields": ["text"]})
    fill(store)
    reference = oracle()
    for namespace, key, _ in ITEMS:
        ours, theirs = store.get(namespace, key), reference.get(namespace, key)
        assert ours is not None and theirs is not None
        assert (ours.namespace, ours.key, ours.value) == (
            theirs.namespace,
            theirs.key,
            theirs.value,
        )
    assert keys(store.search(("a",), query="pizza margherita"))[0] == "k3"
    assert store.list_namespaces(prefix=("a", "b"), max_depth=3) == reference.list_namespaces(
        prefix=("a", "b"), max_depth=3
    )
    store.delete(("a", "b", "c"), "k1")
    assert store.get(("a", "b", "c"), "k1") is None


async def test_async_api_over_the_sync_manager(mm: MemoryManager) -> None:
    store = ActroneStore(mm, AGENT)
    await store.aput(("a",), "k", {"text": "hello"})
    item = await store.aget(("a",), "k")
    assert item is not None and item.value == {"text": "hello"}
    assert keys(await store.asearch(("a",))) == ["k"]


async def test_reads_in_a_batch_see_the_state_before_its_writes(mm: MemoryManager) -> None:
    store = ActroneStore(mm, AGENT)
    store.put(("a",), "k", {"v": 1})
    results = store.batch(
        [
            PutOp(("a",), "k", {"v": 2}),
            GetOp(("a",), "k"),
            PutOp(("a",), "k", {"v": 3}),
            PutOp(("a",), "new", {"v": 1}),
        ]
    )
    assert results[0] is None and results[1].value == {"v": 1}  # type: ignore[union-attr]
    got = store.get(("a",), "k")
    assert got is not None and got.value == {"v": 3}  # the last put of a key wins
    assert store.get(("a",), "new") is not None


class State(TypedDict):
    user: str
    message: str
    recalled: list[str]


def build_graph(store: BaseStore) -> Any:
    def remember(state: State, runtime: Runtime[None]) -> dict[str, Any]:
        assert runtime.store is not None
        runtime.store.put(("users", state["user"]), "latest", {"text": state["message"]})
        return {}

    def recall(state: State, runtime: Runtime[None]) -> dict[str, Any]:
        assert runtime.store is not None
        hits = runtime.store.search(("users", state["user"]), query=state["message"], limit=3)
        return {"recalled": [h.value["text"] for h in hits]}

    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("recall", recall)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    return builder.compile(store=store)


def test_a_graph_uses_the_store(mm: MemoryManager) -> None:
    store = ActroneStore(mm, AGENT, index={"fields": ["text"]})
    graph = build_graph(store)
    out = graph.invoke({"user": "u1", "message": "I keep bees in Oslo", "recalled": []})
    assert out["recalled"] == ["I keep bees in Oslo"]
    # another user's namespace is not searched
    out = graph.invoke({"user": "u2", "message": "bees in Oslo", "recalled": []})
    assert out["recalled"] == ["bees in Oslo"]
    assert store.list_namespaces() == [("users", "u1"), ("users", "u2")]


async def test_a_graph_uses_the_store_async(amm: AsyncMemoryManager) -> None:
    async def remember(state: State, runtime: Runtime[None]) -> dict[str, Any]:
        assert runtime.store is not None
        await runtime.store.aput(("users", state["user"]), "latest", {"text": state["message"]})
        hits = await runtime.store.asearch(("users", state["user"]), query=state["message"])
        return {"recalled": [h.value["text"] for h in hits]}

    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_edge(START, "remember")
    graph = builder.compile(store=ActroneStore(amm, AGENT, index={"fields": ["text"]}))
    out = await graph.ainvoke({"user": "u1", "message": "I keep bees in Oslo", "recalled": []})
    assert out["recalled"] == ["I keep bees in Oslo"]


@pytest.mark.postgres
def test_sync_store_and_graph_on_postgres(postgres_dsn: str, scratch_schema: str) -> None:
    cfg = MemoryConfig(
        backend="postgres",
        postgres_dsn=postgres_dsn,
        postgres_schema=scratch_schema,
        embedding_provider="hashing",
    )
    with MemoryManager.create(cfg) as manager:
        store = ActroneStore(manager, AGENT, index={"fields": ["text"]})
        out = build_graph(store).invoke(
            {"user": "u1", "message": "I keep bees in Oslo", "recalled": []}
        )
        assert out["recalled"] == ["I keep bees in Oslo"]
        fill(store)
        assert store.list_namespaces(prefix=("a",), max_depth=2) == [("a", "b"), ("a", "c")]
        assert sorted(keys(store.search((), filter={"kind": "food"}))) == ["k1", "k3", "k5"]


async def test_memories_the_adapter_did_not_write_are_skipped(amm: AsyncMemoryManager) -> None:
    # Any client can write a memory with the adapter's content type (inject_memory, an MCP
    # tool): without the adapter's metadata, or with it but under another id, it is not an
    # item, and every read skips it instead of raising a bare KeyError.
    store = ActroneStore(amm, AGENT)
    await afill(store)
    await amm.inject_memory(AGENT, "hello", content_type=INDEXED)
    await amm.inject_memory(AGENT, "pasta", content_type=INDEXED, metadata={"namespace": "a.b"})
    await amm.inject_memory(
        AGENT,
        "tomato",
        content_type=UNINDEXED,
        metadata={"namespace": {"0": "a"}, "key": "forged", "value": {"text": "tomato"}},
    )
    lg = oracle()
    assert await store.alist_namespaces() == await lg.alist_namespaces()
    assert sorted(keys(await store.asearch(()))) == sorted(keys(await lg.asearch(())))
    assert sorted(keys(await store.asearch(("a",), query="tomato pasta"))) == ["k1", "k5"]
    assert await store.aget(("a",), "forged") is None
    assert len(await store.asearch((), limit=2, offset=4)) == 1


async def test_batch_refuses_the_labels_langgraph_refuses(amm: AsyncMemoryManager) -> None:
    store = ActroneStore(amm, AGENT)
    with pytest.raises(InvalidNamespaceError):
        await LangGraphMemoryStore().aget(("a.b",), "k")  # LangGraph's own rule
    for op in (
        PutOp(("a.b",), "k", {"text": "dotted"}),
        PutOp(("a", "x\x00y"), "k", {"text": "nul"}),
        PutOp(("langgraph", "x"), "k", {"text": "reserved root"}),
        GetOp(("a.b",), "k"),
        SearchOp(("a.b",)),
    ):
        with pytest.raises(InvalidNamespaceError):
            await store.abatch([op])
    assert await amm.count_memories(AGENT) == 0
