"""The PostgreSQL store's two ways of reading a filtered set rank exactly as the pipeline does.

A filter matching few of an agent's memories is read through its own index; one matching many,
in one pass over the agent's rows, where the statistics of a broad filter are the agent's minus
those of the memories it leaves out (retrieve()). Each way is forced
here in turn (a filter no index serves always takes the one pass), on data with expired
memories, a second embedder and another agent, and compared with the in-memory store.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from actrone_pg.models import Memory
from actrone_pg.pipeline import MemoryFilter, SearchRequest
from actrone_pg.ranking import RankingParams, query_terms
from actrone_pg.stores.base import MemoryRecord
from actrone_pg.stores.memory import InMemoryStore
from tests.helpers import assert_same_explain

if TYPE_CHECKING:
    from actrone_pg.stores.postgres import PostgresStore

pytestmark = pytest.mark.postgres

_NOW = datetime(2026, 11, 20, tzinfo=UTC)
_WORDS = ["tea", "coffee", "garden", "river", "cocoa", "morning", "train", "book"]


def _records() -> list[MemoryRecord]:
    rng = np.random.default_rng(7)
    out = []
    for i in range(60):
        embedder, dims = ("e8", 8) if i % 10 else ("e4", 4)
        vector = rng.normal(size=dims).astype(np.float32)
        words = " ".join(_WORDS[(i * k) % len(_WORDS)] for k in (1, 3, 5))
        memory = Memory(
            id=f"m{i:02d}",
            agent_id="agent",
            session_id=f"s{i % 3}",
            content=f"{words} number {i}",
            content_type="fact" if i % 4 else "preference",
            source="injected",
            sensitivity="none",
            metadata={},
            importance=round(0.1 * (i % 10), 1),
            tags=("all", *(["half"] if i % 2 else []), *(["few"] if i % 7 == 0 else [])),
            created_at=_NOW - timedelta(hours=i),
            embedder=embedder,
            token_count=5,
            # every ninth memory has expired and is not swept yet: never a candidate, still
            # counted in the statistics, as the pipeline counts it
            expires_at=_NOW - timedelta(minutes=1) if i % 9 == 4 else None,
        )
        out.append(MemoryRecord(memory=memory, vector=vector / np.linalg.norm(vector)))
    # another agent's memories never count
    other = [
        MemoryRecord(memory=replace(r.memory, agent_id="other"), vector=r.vector) for r in out[:20]
    ]
    return [*out, *other]


_FILTERS: list[dict[str, Any]] = [
    {"tags_any": ("all",)},
    {"tags_any": ("half",)},
    {"tags_any": ("few",)},
    {"tags_all": ("all", "half")},
    {"content_types": ("fact",)},
    {"session_id": "s1"},
    {"min_importance": 0.2},
    {"created_before": _NOW - timedelta(hours=3)},
    {"tags_any": ("nothing",)},
]


@pytest.fixture(params=["selective", "matches", "rest"])
def path(
    request: pytest.FixtureRequest, store_postgres: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """Force every filter down one path: its own index ('selective'), or one pass over the
    agent's rows with the document frequencies counted among the matches or among the rest:
    retrieve() reads the session's actrone.filter_path, set before each call."""
    db = store_postgres.db
    fetch = db.fetch

    async def forced(conn: Any, statement: Any, params: Any, **kwargs: Any) -> Any:
        await conn.execute("SELECT set_config('actrone.filter_path', %s, false)", (request.param,))
        return await fetch(conn, statement, params, **kwargs)

    monkeypatch.setattr(db, "fetch", forced)
    yield str(request.param)


@pytest.mark.parametrize("flt", _FILTERS, ids=[str(f) for f in _FILTERS])
async def test_either_path_ranks_the_filtered_set_as_the_pipeline_does(
    store_postgres: PostgresStore, path: str, flt: dict[str, Any]
) -> None:
    records = _records()
    reference = InMemoryStore()
    await reference.upsert_memories(records)
    await store_postgres.upsert_memories(records)
    rng = np.random.default_rng(11)
    for query in ("tea garden", "coffee river morning", "book number 12"):
        vector = rng.normal(size=8).astype(np.float32)
        request = SearchRequest(
            agent_id="agent",
            query=query,
            terms=tuple(query_terms(query)),
            vector=vector / np.linalg.norm(vector),
            embedder="e8",
            threshold=-1.0,
            limit=20,
            params=RankingParams(rrf_weights=(1.0, 4.0, 0.1)),
            now=_NOW,
            filter=MemoryFilter(**flt),
        )
        got = (await store_postgres.search(request)).hits
        want = (await reference.search(request)).hits
        assert [h.memory.id for h in got] == [h.memory.id for h in want], (path, query)
        for g, w in zip(got, want, strict=True):
            assert_same_explain(g.explain, w.explain)
        packed = await store_postgres.search(replace(request, budget=12))
        assert [h.memory.id for h in packed.hits] == [h.memory.id for h in want][:2]
