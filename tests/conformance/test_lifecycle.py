"""The memory lifecycle of spec §9 through the manager, the same on every backend."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from actrone_pg.config import MemoryConfig
from actrone_pg.errors import MemoryNotFoundError, ValidationError
from actrone_pg.manager import MemoryManager
from actrone_pg.stores.base import Store
from actrone_pg.stores.memory import InMemoryStore
from tests.helpers import assert_filtered_search_is_the_subsets


async def _manager(store: Store, **config: object) -> MemoryManager:
    cfg = MemoryConfig(backend=store.backend, embedding_provider="hashing", **config)  # type: ignore[arg-type]
    return await MemoryManager.create(cfg, store=store)


def _in(**delta: float) -> datetime:
    return datetime.now(UTC) + timedelta(**delta)


async def test_expiry_and_lineage_are_stored(store: Store) -> None:
    mm = await _manager(store)
    expires = _in(days=30)
    mid = await mm.inject_memory(
        "agent",
        "The user moved to Porto.",
        expires_at=expires,
        source="consolidated",
        source_turn_ids=["turn-1", "turn-2"],
    )
    got = await mm.get_memory("agent", mid)
    assert got is not None
    assert got.expires_at == expires.astimezone(UTC)
    assert got.source_turn_ids == ("turn-1", "turn-2") and got.source == "consolidated"
    assert got.version == 1 and got.valid_to is None
    assert got.valid_from is not None and got.valid_from <= datetime.now(UTC)
    (hit,) = await mm.search_memories("agent", "porto", limit=5)
    assert hit.expires_at == got.expires_at and hit.source_turn_ids == got.source_turn_ids


@pytest.mark.parametrize(
    "bad",
    [
        datetime(2020, 1, 1, tzinfo=UTC),  # in the past: refused, a documented choice
        datetime(2099, 1, 1),  # naive
        "2099-01-01T00:00:00+00:00",  # not a datetime
    ],
)
async def test_a_bad_expiry_writes_nothing(store: Store, bad: object) -> None:
    mm = await _manager(store)
    items = [{"content": "kept?"}, {"content": "expired", "expires_at": bad}]
    with pytest.raises(ValidationError, match="expires_at"):
        await mm.inject_memories("agent", items)
    assert await mm.count_memories("agent") == 0


@pytest.mark.parametrize(
    "item",
    [
        {"content": "x", "source_turn_ids": "turn-1"},  # a string, not a list
        {"content": "x", "source_turn_ids": ["ok", ""]},  # a blank id
        {"content": "x", "version": 2},  # set by update_memory only
        {"content": "x", "valid_from": datetime.now(UTC)},
    ],
)
async def test_lifecycle_fields_are_validated(store: Store, item: dict[str, object]) -> None:
    mm = await _manager(store)
    with pytest.raises(ValidationError):
        await mm.inject_memories("agent", [item])
    assert await mm.count_memories("agent") == 0


async def test_update_writes_a_version_and_keeps_the_old_one(store: Store) -> None:
    mm = await _manager(store)
    mid = await mm.inject_memory(
        "agent", "The user lives in Lisbon.", tags=["home"], importance=0.4, metadata={"k": 1}
    )
    first = await mm.get_memory("agent", mid)
    assert first is not None
    new = await mm.update_memory("agent", mid, content="The user lives in Porto.", importance=0.9)
    assert (new.id, new.version, new.content, new.importance) == (
        mid,
        2,
        "The user lives in Porto.",
        0.9,
    )
    # fields not passed keep their values
    assert (new.tags, new.metadata, new.created_at) == (("home",), {"k": 1}, first.created_at)
    assert await mm.get_memory("agent", mid) == new
    assert await mm.count_memories("agent") == 1
    third = await mm.update_memory("agent", mid, tags=["home", "moved"])
    assert third.content == "The user lives in Porto." and third.version == 3
    history = await mm.memory_history("agent", mid)
    assert [(m.version, m.content) for m in history] == [
        (1, "The user lives in Lisbon."),
        (2, "The user lives in Porto."),
        (3, "The user lives in Porto."),
    ]
    # each replaced version closes when the next one opens; the current one is open
    assert history[0].valid_to == history[1].valid_from
    assert history[1].valid_to == history[2].valid_from and history[2].valid_to is None
    assert history[-1] == third
    # searches see the current version only: the old text is found nowhere
    found = await mm.search_memories("agent", "lisbon", limit=10, explain=True)
    assert all("Lisbon" not in m.content for m in found)
    assert all(m.explain is not None and m.explain.lexical_rank is None for m in found)
    (hit,) = await mm.search_memories("agent", "porto", limit=10)
    assert (hit.id, hit.version) == (mid, 3)


async def test_update_of_a_memory_the_agent_does_not_have(store: Store) -> None:
    mm = await _manager(store)
    mid = await mm.inject_memory("A", "agent A's secret")
    for agent, memory_id in (("B", mid), ("A", "no-such-id")):
        with pytest.raises(MemoryNotFoundError):
            await mm.update_memory(agent, memory_id, content="overwritten")
    assert await mm.memory_history("B", mid) == []
    got = await mm.get_memory("A", mid)
    assert got is not None and got.content == "agent A's secret" and got.version == 1


async def test_bad_update_arguments_write_nothing(store: Store) -> None:
    mm = await _manager(store)
    mid = await mm.inject_memory("agent", "kept as it is")
    for kwargs in (
        {"content": ""},
        {"importance": 2.0},
        {"tags": "one"},
        {"expires_at": datetime(2020, 1, 1, tzinfo=UTC)},
        {"expires_at": datetime(2099, 1, 1)},
        {"metadata": {1: "x"}},
    ):
        with pytest.raises(ValidationError):
            await mm.update_memory("agent", mid, **kwargs)  # type: ignore[arg-type]
    assert [m.version for m in await mm.memory_history("agent", mid)] == [1]


async def test_clear_expiry_removes_it_and_the_history_keeps_the_old_one(store: Store) -> None:
    mm = await _manager(store)
    soon = _in(seconds=1.5)
    mid = await mm.inject_memory("agent", "The user is in Rome this week.", expires_at=soon)
    other = await mm.inject_memory("agent", "The user visits Oslo this week.", expires_at=soon)
    new = await mm.update_memory("agent", mid, clear_expiry=True)
    assert (new.version, new.expires_at) == (2, None)
    stored = await store.get_memory("agent", mid)
    assert stored is not None and stored.expires_at is None
    await asyncio.sleep(2.0)
    # The old expiry has passed: only the memory that kept it is gone, from every read...
    assert await mm.get_memory("agent", other) is None
    got = await mm.get_memory("agent", mid)
    assert got is not None and got.expires_at is None and got.version == 2
    assert [m.id for m in await mm.search_memories("agent", "rome oslo this week")] == [mid]
    assert [m.id for m in (await mm.list_memories("agent")).items] == [mid]
    # count_memories counted the expired one until the sweeper came (issue 38: count 6, list 5)
    assert await mm.count_memories("agent") == 1
    # ...and from the sweeper, which deletes the one that expired and nothing else
    assert await mm.sweep_expired() == 1
    assert await mm.count_memories("agent") == 1
    history = await mm.memory_history("agent", mid)
    assert [(m.version, m.expires_at) for m in history] == [(1, soon.astimezone(UTC)), (2, None)]
    # A later update without either argument keeps "no expiry"; a new one can be set again.
    assert (await mm.update_memory("agent", mid, importance=0.9)).expires_at is None
    later = _in(days=3)
    assert (await mm.update_memory("agent", mid, expires_at=later)).expires_at == later


@pytest.mark.parametrize(
    "kwargs",
    [
        {"clear_expiry": True, "expires_at": datetime(2099, 1, 1, tzinfo=UTC)},
        {"clear_expiry": "yes"},
        {"clear_expiry": 1},
    ],
)
async def test_clear_expiry_with_a_new_expiry_or_not_a_bool_writes_nothing(
    store: Store, kwargs: dict[str, object]
) -> None:
    mm = await _manager(store)
    expires = _in(days=1)
    mid = await mm.inject_memory("agent", "kept as it is", expires_at=expires)
    with pytest.raises(ValidationError, match="clear_expiry"):
        await mm.update_memory("agent", mid, content="changed", **kwargs)  # type: ignore[arg-type]
    (only,) = await mm.memory_history("agent", mid)
    assert (only.version, only.content, only.expires_at) == (1, "kept as it is", expires)


async def test_delete_removes_every_version(store: Store) -> None:
    mm = await _manager(store)
    mid = await mm.inject_memory("agent", "first words")
    await mm.update_memory("agent", mid, content="second words")
    assert await mm.delete_memory("agent", mid)
    assert await mm.memory_history("agent", mid) == []
    assert await mm.get_memory("agent", mid) is None
    # the same id injected again starts a history of its own
    again = await mm.inject_memory("agent", "fresh start", memory_id=mid)
    assert [m.content for m in await mm.memory_history("agent", again)] == ["fresh start"]


async def test_concurrent_updates_each_write_a_version(store: Store) -> None:
    mm = await _manager(store)
    mid = await mm.inject_memory("agent", "counter zero")
    await asyncio.gather(
        *(mm.update_memory("agent", mid, content=f"counter {i}") for i in range(1, 4))
    )
    history = await mm.memory_history("agent", mid)
    assert [m.version for m in history] == [1, 2, 3, 4]
    assert sorted(m.content for m in history[1:]) == ["counter 1", "counter 2", "counter 3"]


# -- filters (spec §9.3) ---------------------------------------------------------------------

_T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
_TOPICS = ["coffee", "tea", "cocoa", "coffee beans", "green tea", "coffee grinder"]
_ITEMS = [
    {
        "memory_id": f"m{i:02d}",
        "content": f"The user likes {_TOPICS[i % 6]} number {i} in the morning",
        "tags": ["drink", *(["hot"] if i % 2 else []), *(["fav"] if i % 3 == 0 else [])],
        "content_type": "fact" if i % 4 else "preference",
        "session_id": f"s{i % 3}",
        "importance": round(0.1 * (i % 10), 1),
        "created_at": _T0 + timedelta(hours=i),
        "metadata": {"lang": "en" if i % 2 else "pt", "n": i % 5, "list": [i % 3, "x"]},
    }
    for i in range(24)
]
_FILTERS: list[dict[str, object]] = [
    {"tags_any": ["hot", "fav"]},
    {"tags_all": ["drink", "hot"]},
    {"content_types": ["preference"]},
    {"session_id": "s1"},
    {"created_after": _T0 + timedelta(hours=5), "created_before": _T0 + timedelta(hours=17)},
    {"min_importance": 0.5},
    {"metadata": {"lang": "pt"}},
    {"metadata": {"list": [2]}, "tags_any": ["drink"]},
    {"tags_any": ["nothing-has-this"]},
    {"tags_any": []},
]


@pytest.mark.parametrize("flt", _FILTERS, ids=[str(sorted(f)) for f in _FILTERS])
async def test_a_filtered_search_ranks_the_filtered_set_as_if_it_were_all(
    store: Store, flt: dict[str, object]
) -> None:
    """Admission, BM25 statistics, rankings and fusion are those of the filtered set: the same
    search over a store holding only the matching memories gives the same hits, scores and
    ranks (the reference: the in-memory store, without a filter)."""
    from actrone_pg.pipeline import MemoryFilter
    from actrone_pg.stores.memory import InMemoryStore

    mm = await _manager(store, relevance_threshold=0.01)
    await mm.inject_memories("agent", _ITEMS)
    matcher = MemoryFilter(
        **{k: tuple(v) if isinstance(v, list) else v for k, v in flt.items()}  # type: ignore[arg-type]
    )
    subset = [
        item
        for item in _ITEMS
        if matcher.matches(await mm.get_memory("agent", item["memory_id"]))  # type: ignore[arg-type]
    ]
    ref = await _manager(InMemoryStore(), relevance_threshold=0.01)
    if subset:
        await ref.inject_memories("agent", subset)
    for query in ("coffee in the morning", "green tea", "number 7"):
        want = await assert_filtered_search_is_the_subsets(mm, ref, query, flt)
        ctx = await mm.retrieve_context("agent", "s", query, 4000, filters=flt)
        assert [m.id for m in ctx.episodic_memories] == [m.id for m in want][
            : len(ctx.episodic_memories)
        ]
    assert len(subset) < len(_ITEMS)


@pytest.mark.parametrize(
    "flt",
    [
        {"tag_any": ["x"]},  # unknown key
        {"tags_any": "hot"},  # a string, not a list
        {"content_types": [1]},
        {"session_id": ""},
        {"created_after": datetime(2026, 1, 1)},  # naive
        {"created_before": "2026-01-01"},
        {"min_importance": 1.5},
        {"min_importance": "high"},
        {"metadata": ["not", "an", "object"]},
        ["tags_any"],
    ],
)
async def test_bad_filters_are_validation_errors(store: Store, flt: object) -> None:
    mm = await _manager(store)
    await mm.inject_memory("agent", "something")
    with pytest.raises(ValidationError):
        await mm.search_memories("agent", "something", filters=flt)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        await mm.retrieve_context("agent", "s", "something", 100, filters=flt)  # type: ignore[arg-type]


# -- expiry (spec §9.4) ----------------------------------------------------------------------


async def test_an_expired_memory_is_never_returned_and_the_sweeper_deletes_it(
    store: Store,
) -> None:
    mm = await _manager(store, relevance_threshold=0.01)
    soon = await mm.inject_memory("agent", "the parking code is 4711", expires_at=_in(seconds=1.5))
    kept = await mm.inject_memory("agent", "the parking spot is number 12")
    await mm.update_memory("agent", soon, content="the parking code is 4712")
    found = await mm.search_memories("agent", "parking code", limit=10)
    assert {m.id for m in found} == {soon, kept}
    await asyncio.sleep(2.0)
    assert await mm.get_memory("agent", soon) is None
    assert await mm.memory_history("agent", soon) == []
    with pytest.raises(MemoryNotFoundError):
        await mm.update_memory("agent", soon, content="revived?")
    for flt in (None, {"tags_all": []}):
        found = await mm.search_memories("agent", "parking code", limit=10, filters=flt)
        assert [m.id for m in found] == [kept]
        ctx = await mm.retrieve_context("agent", "s", "parking code", 4000, filters=flt)
        assert [m.id for m in ctx.episodic_memories] == [kept]
    # the sweeper deletes it, every version, and the statistics are those of what is left
    assert await mm.sweep_expired(limit=10) == 1
    assert await mm.sweep_expired(limit=10) == 0
    assert await mm.count_memories("agent") == 1
    ref = await _manager(InMemoryStore(), relevance_threshold=0.01)
    await ref.inject_memories(
        "agent", [{"content": "the parking spot is number 12", "memory_id": kept}]
    )
    (got,) = await mm.search_memories("agent", "parking spot number", limit=10, explain=True)
    (want,) = await ref.search_memories("agent", "parking spot number", limit=10, explain=True)
    assert got.explain is not None and want.explain is not None
    assert got.explain.bm25 == pytest.approx(want.explain.bm25, rel=1e-9)


# -- listing (spec §9.5) and redaction (§9.6) --------------------------------------------------


async def test_list_pages_newest_first_with_a_stable_cursor(store: Store) -> None:
    mm = await _manager(store)
    await mm.inject_memories("agent", _ITEMS)
    await mm.inject_memory("other", "another agent's memory")
    want = [item["memory_id"] for item in reversed(_ITEMS)]
    seen: list[str] = []
    page = await mm.list_memories("agent", limit=5)
    first = True
    while True:
        seen += [m.id for m in page.items]
        if first:
            # a memory written meanwhile (newer than all) neither repeats nor shifts a page
            await mm.inject_memory("agent", "written while paging", memory_id="late")
            first = False
        if page.next_cursor is None:
            break
        page = await mm.list_memories("agent", limit=5, cursor=page.next_cursor)
    assert seen == want
    filtered = await mm.list_memories("agent", filters={"tags_all": ["hot", "fav"]}, limit=100)
    assert [m.id for m in filtered.items] == [
        item["memory_id"]
        for item in reversed(_ITEMS)
        if "hot" in item["tags"] and "fav" in item["tags"]  # type: ignore[operator]
    ]
    assert filtered.next_cursor is None
    # current versions only
    await mm.update_memory("agent", "m03", content="m03, second version")
    listed = {m.id: m for m in (await mm.list_memories("agent", limit=100)).items}
    assert listed["m03"].version == 2 and len(listed) == len(_ITEMS) + 1


@pytest.mark.parametrize("cursor", ["", "not base64 !", "bm90IGpzb24", 5])
async def test_a_bad_cursor_is_a_validation_error(store: Store, cursor: object) -> None:
    mm = await _manager(store)
    with pytest.raises(ValidationError, match="cursor"):
        await mm.list_memories("agent", cursor=cursor)  # type: ignore[arg-type]


async def test_listed_sensitivities_are_redacted_on_every_read(store: Store) -> None:
    mm = await _manager(store, redact_sensitivities=("secret",))
    mid = await mm.inject_memory("agent", "the vault code is 1234", sensitivity="secret")
    plain = await mm.inject_memory("agent", "the vault is in the basement")
    shown = "[redacted: secret]"
    got = await mm.get_memory("agent", mid)
    assert got is not None and got.content == shown
    found = {m.id: m.content for m in await mm.search_memories("agent", "vault code", limit=5)}
    assert found[mid] == shown and found[plain] == "the vault is in the basement"
    ctx = await mm.retrieve_context("agent", "s", "vault code", 4000)
    assert {m.id: m.content for m in ctx.episodic_memories}[mid] == shown
    assert {m.id: m.content for m in (await mm.list_memories("agent")).items}[mid] == shown
    assert [m.content for m in await mm.memory_history("agent", mid)] == [shown]
    new = await mm.update_memory("agent", mid, importance=0.9)
    assert new.content == shown
    # the stored memory is unchanged: a manager without redaction reads it
    raw = await store.get_memory("agent", mid)
    assert raw is not None and raw.content == "the vault code is 1234"
