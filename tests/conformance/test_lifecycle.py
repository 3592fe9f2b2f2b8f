"""The memory lifecycle of spec §9 through the manager, the same on every backend."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from actrone_pg.config import MemoryConfig
from actrone_pg.errors import ValidationError
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
