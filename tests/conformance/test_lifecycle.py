"""The memory lifecycle of spec §9 through the manager, the same on every backend."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from actrone_pg.config import MemoryConfig
from actrone_pg.errors import MemoryNotFoundError, ValidationError
from actrone_pg.manager import MemoryManager
from actrone_pg.stores.base import Store


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
