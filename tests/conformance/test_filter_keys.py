"""A filter key is one definition: a key registered here, in this test alone, works on every
backend, in searches and listings, through the manager's validation, with nothing else edited.

``min_token_count`` (memories of at least that many stored tokens) exists only while a test runs:
its :class:`~actrone_pg.filters.FilterKey` gives its parsing, its meaning and its compilers (the
in-memory mask, the SQL condition, the Qdrant pushdown), and each store applies it from there.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from actrone_pg.config import MemoryConfig
from actrone_pg.errors import ValidationError
from actrone_pg.filters import FILTERS, FieldMatch, FilterKey, MemoryFilter, register
from actrone_pg.manager import MemoryManager
from actrone_pg.models import Memory
from actrone_pg.stores import Store
from actrone_pg.stores.memory import InMemoryStore
from tests.helpers import assert_filtered_search_is_the_subsets


def _count(where: str, value: object, max_chars: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValidationError(f"{where} must be a whole number >= 0")
    return value


MIN_TOKEN_COUNT = FilterKey(
    "min_token_count",
    "Memories of at least this many tokens.",
    int,
    _count,
    matches=lambda m, n: m.token_count >= n,
    mask=lambda c, n: c.column("token_count") >= n,
    sql="m.token_count >= {value}::int",
    qdrant=lambda n: [FieldMatch("token_count", gte=n)],
)


@pytest.fixture(autouse=True)
def min_token_count() -> Iterator[FilterKey]:
    """The test-only key, registered for one test."""
    register(MIN_TOKEN_COUNT)
    yield MIN_TOKEN_COUNT
    del FILTERS[MIN_TOKEN_COUNT.name]


_T0 = datetime(2026, 3, 1, tzinfo=UTC)
_WORDS = ["tea", "coffee", "garden", "river", "cocoa", "morning"]
# Contents of 1 to 6 repetitions: stored token counts from about 6 to 40.
_ITEMS = [
    {
        "memory_id": f"m{i:02d}",
        "content": " ".join([f"the user likes {_WORDS[i % 6]} number {i}"] * (1 + i % 6)),
        "tags": ["drink", *(["hot"] if i % 2 else [])],
        "created_at": _T0 + timedelta(hours=i),
    }
    for i in range(24)
]


async def _manager(store: Store) -> MemoryManager:
    cfg = MemoryConfig(
        backend=store.backend,  # type: ignore[arg-type]
        embedding_provider="hashing",
        relevance_threshold=0.01,
    )
    return await MemoryManager.create(cfg, store=store)


@pytest.mark.parametrize(
    "filters",
    [{"min_token_count": 20}, {"min_token_count": 20, "tags_any": ["hot"]}],
    ids=["alone", "with tags_any"],
)
async def test_a_key_registered_in_a_test_filters_every_backend(
    store: Store, filters: dict[str, Any]
) -> None:
    mm = await _manager(store)
    await mm.inject_memories("agent", _ITEMS)
    stored: list[Memory] = []
    for item in _ITEMS:
        m = await mm.get_memory("agent", str(item["memory_id"]))
        assert m is not None
        stored.append(m)
    matcher = MemoryFilter(
        **{k: tuple(v) if isinstance(v, list) else v for k, v in filters.items()}
    )
    subset = [item for item, m in zip(_ITEMS, stored, strict=True) if matcher.matches(m)]
    # The filter splits the memories: the test can tell a filtered search from an unfiltered one.
    assert 0 < len(subset) < len(_ITEMS)
    ref = await _manager(InMemoryStore())
    await ref.inject_memories("agent", subset)
    for query in ("coffee in the morning", "garden river", "number 7"):
        await assert_filtered_search_is_the_subsets(mm, ref, query, filters)
    page = await mm.list_memories("agent", filters=filters, limit=100)
    assert [m.id for m in page.items] == [m.id for m in (await ref.list_memories("agent")).items]


async def test_its_values_are_checked_by_its_definition(store: Store) -> None:
    mm = await _manager(store)
    await mm.inject_memory("agent", "something")
    for bad in ("20", -1, True):
        with pytest.raises(ValidationError, match="min_token_count"):
            await mm.search_memories("agent", "something", filters={"min_token_count": bad})


def test_an_unregistered_key_is_unknown(min_token_count: FilterKey) -> None:
    del FILTERS[min_token_count.name]
    try:
        with pytest.raises(TypeError):
            MemoryFilter(min_token_count=1)
    finally:
        register(min_token_count)
