"""The Redis + Qdrant store against a real Redis and Qdrant (local mode, or a server if
``ACTRONE_TEST_QDRANT_URL`` is set): key layout, L1 atomicity, locks, tenant isolation,
all-or-nothing batches, failure behaviour and parity with the in-memory reference.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from actrone_pg import MemoryConfig, MemoryManager, create_memory_manager
from actrone_pg.embedders import HashingEmbedder
from actrone_pg.errors import (
    DimensionMismatchError,
    LockLostError,
    PoolSaturatedError,
    StoreUnavailableError,
)
from actrone_pg.models import Memory, Turn
from actrone_pg.stores.base import MemoryRecord, SearchRequest
from actrone_pg.stores.memory import InMemoryStore
from tests import factories
from tests.backends.redis_qdrant import (
    cleanup,
    isolated_store,
    redis_qdrant_settings,
    unique_prefix,
)
from tests.factories import unit

pytestmark = [pytest.mark.redis, pytest.mark.qdrant]

rq = pytest.importorskip("actrone_pg.stores.redis_qdrant")
from qdrant_client import models as qm  # noqa: E402
from qdrant_client.http.exceptions import ResponseHandlingException  # noqa: E402

from actrone_pg.stores.redis_qdrant import index, layout, registry, writes  # noqa: E402

RedisQdrantStore = rq.RedisQdrantStore
RedisQdrantSettings = rq.RedisQdrantSettings

TTL = 3600.0
NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def turn(agent: str, session: str, n: int, *, tid: str | None = None) -> Turn:
    return Turn(
        id=tid or f"t{n}",
        agent_id=agent,
        session_id=session,
        user_message=f"user {n}",
        assistant_message=f"assistant {n}",
        tool_results=None,
        created_at=NOW + timedelta(seconds=n),
        token_count=6,
    )


# The shared factories, with this module's defaults: embedder "e", ages counted back from NOW.


def memory(agent: str, mid: str, content: str, *, embedder: str = "e", age_s: int = 0) -> Memory:
    return factories.memory(
        agent, mid, content, embedder=embedder, created_at=NOW - timedelta(seconds=age_s)
    )


def record(
    agent: str, mid: str, content: str, vec: list[float], *, embedder: str = "e", age_s: int = 0
) -> MemoryRecord:
    return MemoryRecord(
        memory=memory(agent, mid, content, embedder=embedder, age_s=age_s), vector=unit(vec)
    )


def request(agent: str, query: str, vec: list[float], *, threshold: float = 0.1) -> SearchRequest:
    return factories.request(agent, query, vec, threshold=threshold, embedder="e", now=NOW)


async def redis_state(store: Any, agent: str) -> dict[str, Any]:
    """The agent's memory index and BM25 statistics as stored in Redis."""
    ak = layout.AgentKeys.of(store.servers.prefix, agent)
    r = store.servers.redis()
    return {
        "mem": await r.hgetall(ak.mem),
        "doc": await r.hgetall(ak.doc),
        "df": await r.hgetall(ak.df),
        "stats": await r.hgetall(ak.stats),
    }


def assert_same_explanations(got: list[Any], want: list[Any]) -> None:
    """Ranks and fused scores identical; cosines equal up to float32 summation order.

    A float32 product's last bit depends on the matrix a row is part of (OpenBLAS kernels sum in
    different orders), and the reference multiplies the agent's whole matrix while this store
    multiplies the candidates' matrix: cosines may differ by an ulp (~6e-8).
    """
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert replace(g.explain, cosine=0.0) == replace(w.explain, cosine=0.0)
        assert g.explain.cosine == pytest.approx(w.explain.cosine, abs=1e-6)


# -- keys --


async def test_keys_of_colliding_looking_ids_are_distinct() -> None:
    a = layout.AgentKeys.of("p", "a:b").session_keys("c")[0]
    b = layout.AgentKeys.of("p", "a").session_keys("b:c")[0]
    assert set(a).isdisjoint(b[:3])
    # Glob and hash-tag characters never reach a key.
    key = layout.AgentKeys.of("p", "user_%*?{x}").turns(layout.enc("[s] *"))
    assert key == "p:v1:{user_%25%2A%3F%7Bx%7D}:turns:%5Bs%5D%20%2A"


async def test_agent_a_colon_b_session_c_is_not_agent_a_session_b_colon_c(
    store_redis_qdrant: Any,
) -> None:
    s = store_redis_qdrant
    await s.append_turn(turn("a:b", "c", 1), max_turns=10, ttl_seconds=TTL)
    await s.append_turn(turn("a", "b:c", 2), max_turns=10, ttl_seconds=TTL)
    one = await s.recent_turns("a:b", "c", limit=10, ttl_seconds=TTL)
    two = await s.recent_turns("a", "b:c", limit=10, ttl_seconds=TTL)
    assert [t.id for t in one] == ["t1"]
    assert [t.id for t in two] == ["t2"]
    await s.clear_session("a", "b:c")
    assert [t.id for t in await s.recent_turns("a:b", "c", limit=10, ttl_seconds=TTL)] == ["t1"]


async def test_wildcard_ids_match_only_themselves(store_redis_qdrant: Any) -> None:
    s = store_redis_qdrant
    for agent in ("user_%", "user_1", "*", "?"):
        await s.append_turn(turn(agent, "*", 1), max_turns=10, ttl_seconds=TTL)
        await s.append_turn(turn(agent, "s1", 2), max_turns=10, ttl_seconds=TTL)
        await s.upsert_memories([record(agent, "m", f"note of {agent}", [1, 0, 0])])
    await s.clear_session("user_%", "*")
    assert await s.recent_turns("user_%", "*", limit=10, ttl_seconds=TTL) == []
    assert len(await s.recent_turns("user_%", "s1", limit=10, ttl_seconds=TTL)) == 1
    assert len(await s.recent_turns("user_1", "*", limit=10, ttl_seconds=TTL)) == 1
    await s.erase_agent("*")
    await s.erase_agent("user_%")
    assert await s.count_memories("*") == 0
    assert await s.count_memories("user_%") == 0
    for agent in ("user_1", "?"):
        assert await s.count_memories(agent) == 1
        assert len(await s.recent_turns(agent, "*", limit=10, ttl_seconds=TTL)) == 1
        hits = (await s.search(request(agent, "note", [1, 0, 0]))).hits
        assert [h.memory.content for h in hits] == [f"note of {agent}"]


# -- L1 --


async def test_append_trims_to_max_turns_oldest_first(store_redis_qdrant: Any) -> None:
    s = store_redis_qdrant
    for n in range(1, 6):
        await s.append_turn(turn("a", "s", n), max_turns=3, ttl_seconds=TTL)
    turns = await s.recent_turns("a", "s", limit=50, ttl_seconds=TTL)
    assert [t.id for t in turns] == ["t3", "t4", "t5"]
    assert [t.id for t in await s.recent_turns("a", "s", limit=2, ttl_seconds=TTL)] == ["t4", "t5"]


async def test_concurrent_appends_never_exceed_max_turns(store_redis_qdrant: Any) -> None:
    s = store_redis_qdrant
    await asyncio.gather(
        *(s.append_turn(turn("a", "s", n), max_turns=3, ttl_seconds=TTL) for n in range(1, 31))
    )
    keys, _ = layout.AgentKeys.of(s.servers.prefix, "a").session_keys("s")
    assert await s.servers.redis().llen(keys[0]) == 3
    assert await s.servers.redis().zcard(keys[1]) == 30  # every id is remembered for retries
    info = await s.get_session("a", "s", ttl_seconds=TTL)
    assert info is not None and info.turn_count == 3


async def test_retried_append_is_stored_once_even_after_trimming(store_redis_qdrant: Any) -> None:
    s = store_redis_qdrant
    for n in range(1, 5):
        await s.append_turn(turn("a", "s", n), max_turns=2, ttl_seconds=TTL)
    await s.append_turn(turn("a", "s", 4), max_turns=2, ttl_seconds=TTL)  # retry of the newest
    await s.append_turn(turn("a", "s", 1), max_turns=2, ttl_seconds=TTL)  # late retry, trimmed
    assert [t.id for t in await s.recent_turns("a", "s", limit=10, ttl_seconds=TTL)] == ["t3", "t4"]


async def test_remembered_turn_ids_are_bounded(store_redis_qdrant: Any) -> None:
    s = store_redis_qdrant
    keys, _ = layout.AgentKeys.of(s.servers.prefix, "a").session_keys("s")
    for n in range(1, layout.TURN_IDS_KEPT + 6):
        await s.append_turn(turn("a", "s", n), max_turns=2, ttl_seconds=TTL)
    assert await s.servers.redis().zcard(keys[1]) == layout.TURN_IDS_KEPT
    # the oldest remembered id is the 6th; retries of anything newer are still no-ops
    assert await s.servers.redis().zrange(keys[1], 0, 0) == ["t6"]
    await s.append_turn(turn("a", "s", 6), max_turns=2, ttl_seconds=TTL)
    got = await s.recent_turns("a", "s", limit=5, ttl_seconds=TTL)
    assert [t.id for t in got] == [f"t{layout.TURN_IDS_KEPT + 4}", f"t{layout.TURN_IDS_KEPT + 5}"]


@pytest.fixture
async def short_grace() -> AsyncIterator[Any]:
    """A store whose sessions' keys outlive their TTL by 0.3 s only."""
    async with isolated_store(redis_session_grace_hours=0.3 / 3600) as store:
        yield store


async def test_the_erasure_keyset_holds_only_live_keys(short_grace: Any) -> None:
    s = short_grace
    ak = layout.AgentKeys.of(s.servers.prefix, "a")
    await s.append_turn(turn("a", "old", 1), max_turns=5, ttl_seconds=0.4)
    assert await s.acquire_lock("a", "brief", "h", 0.6)
    await s.append_turn(turn("a", "live", 1), max_turns=5, ttl_seconds=TTL)
    assert set(await s.servers.redis().zrange(ak.keyset, 0, -1)) == {"s:old", "l:brief", "s:live"}
    await asyncio.sleep(0.9)  # past the old session's TTL and grace, and the lock's TTL
    await s.append_turn(turn("a", "live", 2), max_turns=5, ttl_seconds=TTL)
    assert await s.servers.redis().zrange(ak.keyset, 0, -1) == ["s:live"]
    await s.clear_session("a", "live")
    assert await s.servers.redis().exists(ak.keyset) == 0


async def test_session_keys_outlive_the_ttl_by_the_grace_then_vanish(short_grace: Any) -> None:
    s = short_grace
    await s.append_turn(turn("a:b", "s", 1), max_turns=5, ttl_seconds=0.4)
    await s.set_session_metadata("a:b", "s", {"k": 1}, ttl_seconds=0.4)
    keys, _ = layout.AgentKeys.of(s.servers.prefix, "a:b").session_keys("s")
    for key in keys[:3]:
        assert 400 < await s.servers.redis().pttl(key) <= 700
    # the sessions set names it by encoded agent and session, scored by its activity
    assert [
        m for m, _ in await s.servers.redis().zrange(s.servers.sessions_key, 0, -1, withscores=True)
    ] == ["a%3Ab:s"]
    await asyncio.sleep(0.5)  # expired, in its grace: reads see none, the sweeper lists it
    assert await s.recent_turns("a:b", "s", limit=5, ttl_seconds=0.4) == []
    assert await s.expired_sessions(ttl_seconds=0.4, limit=10) == [("a:b", "s")]
    await asyncio.sleep(0.4)  # past the grace: Redis dropped the keys
    assert await s.servers.redis().exists(*keys[:3]) == 0
    assert await s.get_session("a:b", "s", ttl_seconds=TTL) is None
    # the listing drops the entry of a session whose keys are gone
    assert await s.expired_sessions(ttl_seconds=0.4, limit=10) == []
    assert await s.servers.redis().zcard(s.servers.sessions_key) == 0


async def test_the_sessions_set_follows_clear_erase_and_writes(store_redis_qdrant: Any) -> None:
    s = store_redis_qdrant
    for agent, session in (("a", "s1"), ("a", "s2"), ("a:b", "s1"), ("b", "s1")):
        await s.append_turn(turn(agent, session, 1), max_turns=5, ttl_seconds=TTL)
    assert set(await s.servers.redis().zrange(s.servers.sessions_key, 0, -1)) == {
        "a:s1",
        "a:s2",
        "a%3Ab:s1",
        "b:s1",
    }
    await s.clear_session("a", "s1")
    await s.erase_agent("a:b")
    assert set(await s.servers.redis().zrange(s.servers.sessions_key, 0, -1)) == {"a:s2", "b:s1"}
    before = await s.servers.redis().zscore(s.servers.sessions_key, "b:s1")
    await asyncio.sleep(0.05)
    await s.set_session_metadata("b", "s1", {"k": 1}, ttl_seconds=TTL)
    assert await s.servers.redis().zscore(s.servers.sessions_key, "b:s1") > before
    info = await s.get_session("b", "s1", ttl_seconds=TTL)
    assert info is not None
    score = await s.servers.redis().zscore(s.servers.sessions_key, "b:s1")
    assert score == int(info.last_active_at.timestamp() * 1_000_000) // 1000


async def test_turn_round_trips_every_field(store_redis_qdrant: Any) -> None:
    s = store_redis_qdrant
    t = replace(turn("a", "s", 1), tool_results=[{"tool": "x", "ok": True}], user_message="é ✓")
    await s.append_turn(t, max_turns=5, ttl_seconds=TTL)
    assert await s.recent_turns("a", "s", limit=5, ttl_seconds=TTL) == [t]


async def test_session_expires_after_ttl_and_restarts_empty(store_redis_qdrant: Any) -> None:
    s = store_redis_qdrant
    await s.append_turn(turn("a", "s", 1), max_turns=5, ttl_seconds=1.0)
    await s.set_session_metadata("a", "s", {"k": 1}, ttl_seconds=1.0)
    keys, _ = layout.AgentKeys.of(s.servers.prefix, "a").session_keys("s")
    grace_ms = 48 * 3600 * 1000  # the default grace: the keys outlive the TTL for the sweeper
    for key in keys[:3]:
        assert grace_ms < await s.servers.redis().pttl(key) <= grace_ms + 1000
    assert len(await s.recent_turns("a", "s", limit=5, ttl_seconds=1.0)) == 1
    await asyncio.sleep(1.2)
    assert await s.recent_turns("a", "s", limit=5, ttl_seconds=1.0) == []
    assert await s.get_session("a", "s", ttl_seconds=1.0) is None
    # a turn under the same TTL starts the session afresh (the expired turns are gone)
    await s.append_turn(turn("a", "s", 2), max_turns=5, ttl_seconds=1.0)
    info = await s.get_session("a", "s", ttl_seconds=TTL)
    assert info is not None and info.turn_count == 1 and info.metadata == {}


async def test_shorter_ttl_at_read_time_hides_an_idle_session(store_redis_qdrant: Any) -> None:
    s = store_redis_qdrant
    await s.append_turn(turn("a", "s", 1), max_turns=5, ttl_seconds=TTL)
    await asyncio.sleep(0.15)
    assert await s.recent_turns("a", "s", limit=5, ttl_seconds=0.1) == []
    assert len(await s.recent_turns("a", "s", limit=5, ttl_seconds=TTL)) == 1


async def test_session_metadata_merges(store_redis_qdrant: Any) -> None:
    s = store_redis_qdrant
    await s.set_session_metadata("a", "s", {"x": 1, "y": [1, 2]}, ttl_seconds=TTL)
    await s.set_session_metadata("a", "s", {"y": "new", "m:z": None}, ttl_seconds=TTL)
    info = await s.get_session("a", "s", ttl_seconds=TTL)
    assert info is not None
    assert info.metadata == {"x": 1, "y": "new", "m:z": None}
    assert info.turn_count == 0
    assert info.created_at <= info.last_active_at


# -- locks --


async def test_lock_admits_exactly_one_of_100_then_again_after_ttl(store_redis_qdrant: Any) -> None:
    s = store_redis_qdrant
    holders = [f"h{i}" for i in range(100)]
    # A long TTL while 100 callers race, so that a slow machine cannot let it lapse mid-race.
    got = await asyncio.gather(*(s.acquire_lock("a", "maint", h, 30.0) for h in holders))
    assert sum(got) == 1
    winner = holders[got.index(True)]
    loser = holders[(got.index(True) + 1) % 100]
    assert await s.release_lock("a", "maint", loser) is False
    assert await s.release_lock("a", "maint", winner) is True
    # A short lock that is never released lapses by Redis's clock; then again exactly one wins.
    assert await s.acquire_lock("a", "short", "first", 0.3) is True
    assert await s.acquire_lock("a", "short", "second", 30.0) is False
    await asyncio.sleep(0.45)
    got = await asyncio.gather(*(s.acquire_lock("a", "short", h, 30.0) for h in holders))
    assert sum(got) == 1
    assert await s.release_lock("a", "short", "first") is False
    # Another agent's lock of the same name is independent.
    assert await s.acquire_lock("b", "short", "x", 5.0) is True


async def test_release_only_by_holder(store_redis_qdrant: Any) -> None:
    s = store_redis_qdrant
    assert await s.acquire_lock("a", "l", "me", 5.0) is True
    assert await s.acquire_lock("a", "l", "other", 5.0) is False
    assert await s.release_lock("a", "l", "other") is False
    assert await s.release_lock("a", "l", "me") is True
    assert await s.release_lock("a", "l", "me") is False
    assert await s.acquire_lock("a", "l", "other", 5.0) is True


# -- L2 --


async def test_tenant_isolation_with_anothers_memory_id(store_redis_qdrant: Any) -> None:
    s = store_redis_qdrant
    await s.upsert_memories([record("A", "m1", "secret of A", [1, 0, 0])])
    assert await s.get_memory("B", "m1") is None
    assert await s.delete_memory("B", "m1") is False
    await s.upsert_memories([record("B", "m1", "note of B", [1, 0, 0])])
    a = await s.get_memory("A", "m1")
    assert a is not None and a.content == "secret of A"
    assert [h.memory.content for h in (await s.search(request("B", "secret", [1, 0, 0]))).hits] == [
        "note of B"
    ]
    assert await s.delete_memory("B", "m1") is True
    assert await s.count_memories("A") == 1
    assert [h.memory.id for h in (await s.search(request("A", "x", [1, 0, 0]))).hits] == ["m1"]


async def test_upsert_replaces_and_retry_leaves_statistics_unchanged(
    store_redis_qdrant: Any,
) -> None:
    s = store_redis_qdrant
    batch = [record("a", "m1", "red apple", [1, 0, 0]), record("a", "m2", "green apple", [0, 1, 0])]
    await s.upsert_memories(batch)
    first = await redis_state(s, "a")
    # stems (english analyzer), and the date of each memory (lexical_dates: "1 January 2026")
    day = {"1": "2", "januari": "2", "2026": "2"}
    assert first["df"] == {"red": "1", "green": "1", "appl": "2", **day}
    assert first["stats"] == {"len": "10", "indexed": "1"}
    await s.upsert_memories(batch)  # a client retry
    assert await redis_state(s, "a") == first
    await s.upsert_memories([record("a", "m1", "blue sky above", [1, 0, 0])])
    state = await redis_state(s, "a")
    assert state["df"] == {
        "green": "1",
        "appl": "1",
        "blue": "1",
        "sky": "1",
        "abov": "1",
        **day,
    }
    assert state["stats"] == {"len": "11", "indexed": "1"}
    got = await s.get_memory("a", "m1")
    assert got is not None and got.content == "blue sky above"
    assert await s.count_memories("a") == 2


async def test_deleted_memory_is_never_returned(store_redis_qdrant: Any) -> None:
    s = store_redis_qdrant
    await s.upsert_memories(
        [record("a", "m1", "apple pie", [1, 0, 0]), record("a", "m2", "apple tart", [1, 0.1, 0])]
    )
    assert await s.delete_memory("a", "m1") is True
    assert await s.delete_memory("a", "m1") is False
    assert [h.memory.id for h in (await s.search(request("a", "apple", [1, 0, 0]))).hits] == ["m2"]
    assert await s.get_memory("a", "m1") is None
    day = {"1": "1", "januari": "1", "2026": "1"}  # lexical_dates: "1 January 2026"
    assert (await redis_state(s, "a"))["df"] == {"appl": "1", "tart": "1", **day}


async def test_batch_with_a_dimension_mismatch_writes_nothing(store_redis_qdrant: Any) -> None:
    s = store_redis_qdrant
    await s.upsert_memories([record("a", "m0", "existing", [1, 0, 0])])
    before = await redis_state(s, "a")
    bad = [record("a", "m1", "fine", [1, 0, 0]), record("a", "m2", "too long", [1, 0, 0, 0])]
    with pytest.raises(DimensionMismatchError):
        await s.upsert_memories(bad)
    with pytest.raises(DimensionMismatchError):
        await s.upsert_memories([record("b", "m1", "other agent, same embedder", [1, 0])])
    assert await redis_state(s, "a") == before
    assert await s.count_memories("a") == 1
    assert await s.count_memories("b") == 0
    with pytest.raises(DimensionMismatchError):
        await s.search(request("a", "x", [1, 0, 0, 0]))


async def test_qdrant_failure_mid_batch_rolls_back_everything(
    store_redis_qdrant: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = store_redis_qdrant
    await s.upsert_memories([record("a", "old", "old words here", [1, 0, 0])])
    before = await redis_state(s, "a")
    client = s.servers.qdrant()
    real_upsert = client.upsert
    calls = 0

    # A fault this test cannot produce with a real local-mode Qdrant: the second chunk fails.
    async def flaky_upsert(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise ResponseHandlingException(ConnectionError("connection reset"))
        return await real_upsert(*args, **kwargs)

    monkeypatch.setattr(client, "upsert", flaky_upsert)
    n = writes.QDRANT_CHUNK + 10
    batch = [record("a", "old", "replaced words", [1, 0, 0])] + [
        record("a", f"m{i}", f"new memory {i}", [1, 0.01 * i, 0]) for i in range(n)
    ]
    with pytest.raises(StoreUnavailableError):
        await s.upsert_memories(batch)
    monkeypatch.setattr(client, "upsert", real_upsert)
    assert await redis_state(s, "a") == before
    assert await s.count_memories("a") == 1
    old = await s.get_memory("a", "old")
    assert old is not None and old.content == "old words here"
    hits = (await s.search(request("a", "memory", [1, 0, 0], threshold=0.01))).hits
    assert [h.memory.id for h in hits] == ["old"]
    count = await client.count(
        registry.collection(s.servers, "e", 3), count_filter=layout.agent_filter("a"), exact=True
    )
    assert count.count == 1


async def test_erase_agent_removes_everything_of_that_agent_only(store_redis_qdrant: Any) -> None:
    s = store_redis_qdrant
    for agent in ("x", "y"):
        await s.append_turn(turn(agent, "s", 1), max_turns=5, ttl_seconds=TTL)
        await s.set_session_metadata(agent, "s2", {"k": 1}, ttl_seconds=TTL)
        assert await s.acquire_lock(agent, "maint", "h", 60.0)
        await s.upsert_memories([record(agent, "m", "a memory", [1, 0, 0])])
        await s.upsert_memories([record(agent, "m2", "other space", [1, 0], embedder="e2")])
    await s.erase_agent("x")
    keys = [k async for k in s.servers.redis().scan_iter(match=f"{s.servers.prefix}:*")]
    assert not [k for k in keys if k.startswith(f"{s.servers.prefix}:v1:{{x}}:")]
    assert {k for k in keys if k.startswith(f"{s.servers.prefix}:v1:{{y}}:")} == {
        f"{s.servers.prefix}:v1:{{y}}:{name}"
        for name in (
            "turns:s", "tids:s", "sess:s", "sess:s2", "lock:maint", "keys", "mem", "doc", "df",
            "stats",
        )
    }  # fmt: skip
    assert await s.count_memories("x") == 0
    assert (await s.search(request("x", "memory", [1, 0, 0]))).hits == []
    assert await s.acquire_lock("x", "maint", "h2", 60.0) is True
    assert await s.acquire_lock("y", "maint", "h2", 60.0) is False
    assert await s.count_memories("y") == 2
    for coll in (registry.collection(s.servers, "e", 3), registry.collection(s.servers, "e2", 2)):
        n = await s.servers.qdrant().count(coll, count_filter=layout.agent_filter("x"), exact=True)
        assert n.count == 0


async def test_an_update_overtaken_by_an_erase_after_its_fence_check_is_refused_typed(
    store_redis_qdrant: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two servers cannot check the fence and read the memory atomically: an erase that lands
    # between the two leaves no memory to update. A fenced writer it overtook (an import between
    # two versions) is told LockLostError, as on the other backends, not that the memory is
    # missing (the import then said "changed while it was imported"); nothing is recreated.
    s = store_redis_qdrant
    await s.upsert_memories([record("x", "m", "a memory", [1, 0, 0])])
    fence = await s.writer_fence("x")
    real_payload = writes._payload

    async def erased_first(sv: Any, agent_id: str, memory_id: str) -> Any:
        await s.erase_agent(agent_id)
        return await real_payload(sv, agent_id, memory_id)

    monkeypatch.setattr(writes, "_payload", erased_first)

    async def build(current: Memory) -> MemoryRecord:
        raise AssertionError("nothing to build on: the memory was erased")

    with pytest.raises(LockLostError):
        await s.update_memory("x", "m", build, fence=fence)
    monkeypatch.setattr(writes, "_payload", real_payload)
    keys = [k async for k in s.servers.redis().scan_iter(match=f"{s.servers.prefix}:v1:{{x}}:*")]
    # not even the index's marker that the read set (index.ensure_indexed): the erase wins whole
    assert keys == []
    assert await s.count_memories("x") == 0
    assert await s.acquire_lock("x", "", "someone else", 60.0)  # no write generation was left
    # unfenced, a missing memory is still just missing
    assert await s.update_memory("x", "m", build) is None


async def test_memory_moves_between_embedders_without_mixing_spaces(
    store_redis_qdrant: Any,
) -> None:
    s = store_redis_qdrant
    await s.upsert_memories([record("a", "m", "apple", [1, 0, 0])])
    await s.upsert_memories([record("a", "m", "apple", [1, 0], embedder="e2")])
    assert (await s.search(request("a", "apple", [1, 0, 0]))).hits == []
    got = await s.get_memory("a", "m")
    assert got is not None and got.embedder == "e2"
    n = await s.servers.qdrant().count(registry.collection(s.servers, "e", 3), exact=True)
    assert n.count == 0


async def test_admission_at_exactly_the_threshold(store_redis_qdrant: Any) -> None:
    s = store_redis_qdrant
    ref = InMemoryStore()
    rng = np.random.default_rng(7)
    recs = [
        MemoryRecord(
            memory=memory("a", f"m{i}", f"memory {i}", age_s=i),
            vector=unit(rng.standard_normal(16).tolist()),
        )
        for i in range(60)
    ]
    await s.upsert_memories(recs)
    await ref.upsert_memories(recs)
    q = unit(rng.standard_normal(16).tolist())
    cos = sorted((np.stack([r.vector for r in recs]) @ q).astype(np.float64).tolist())
    for threshold in (cos[30], cos[45], cos[-1]):
        req = replace(request("a", "memory", [1.0] * 16, threshold=threshold), vector=q)
        got = [h.memory.id for h in (await s.search(req)).hits]
        want = [h.memory.id for h in (await ref.search(req)).hits]
        assert got == want
        assert len(got) >= 1


async def test_limit_keeps_the_nearest_and_matches_reference(store_redis_qdrant: Any) -> None:
    s = store_redis_qdrant
    ref = InMemoryStore()
    rng = np.random.default_rng(3)
    words = ["apple", "pear", "plum", "fig", "kiwi", "lime"]
    recs = [
        MemoryRecord(
            memory=memory("a", f"m{i}", " ".join(rng.choice(words, 4)), age_s=int(i * 37 % 50)),
            vector=unit(rng.standard_normal(8).tolist()),
        )
        for i in range(150)
    ]
    # Exact duplicates of vectors and timestamps exercise every tie-break.
    recs += [MemoryRecord(memory=replace(r.memory, id=r.memory.id + "d"), vector=r.vector)
             for r in recs[:20]]  # fmt: skip
    await s.upsert_memories(recs)
    await ref.upsert_memories(recs)
    for k in range(5):
        q = unit(rng.standard_normal(8).tolist())
        req = replace(request("a", "apple fig", [1.0] * 8, threshold=-0.5), vector=q, limit=40)
        got = (await s.search(req)).hits
        want = (await ref.search(req)).hits
        assert [h.memory.id for h in got] == [h.memory.id for h in want], k
        assert_same_explanations(got, want)
        assert len(got) == 40


async def test_parity_with_reference_through_the_manager(store_redis_qdrant: Any) -> None:
    emb = HashingEmbedder(64)
    mm = await MemoryManager.create(MemoryConfig(), store=store_redis_qdrant, embedder=emb)
    ref = await MemoryManager.create(MemoryConfig(), store=InMemoryStore(), embedder=emb)
    rng = np.random.default_rng(11)
    vocab = "peanut allergy hiking alps cat miso vegetarian food coffee tea python rust".split()
    items = [
        {
            "content": " ".join(rng.choice(vocab, int(rng.integers(2, 7)))),
            "created_at": NOW - timedelta(hours=int(rng.integers(0, 500))),
            "memory_id": f"id{i}",
        }
        for i in range(200)
    ]
    await mm.inject_memories("agent", items)
    await ref.inject_memories("agent", items)
    for query in ["peanut allergy", "coffee or tea?", "cat miso food", "python rust alps"]:
        got = await mm.search_memories("agent", query, limit=500, explain=True)
        want = await ref.search_memories("agent", query, limit=500, explain=True)
        assert [m.id for m in got] == [m.id for m in want]
        assert_same_explanations(got, want)

        # valid_from is when each manager wrote the memory: the two wrote at different moments.
        def same(m: Memory) -> Memory:
            return replace(m, explain=None, valid_from=None)

        assert [same(m) for m in got] == [same(m) for m in want]


# -- configuration, failures --


async def test_manager_create_from_config_uses_local_qdrant() -> None:
    prefix = unique_prefix()
    cfg = MemoryConfig(**redis_qdrant_settings(prefix, qdrant_url=":memory:"))
    try:
        async with create_memory_manager(cfg, embedder=HashingEmbedder()) as mm:
            assert mm.backend == "redis_qdrant"
            await mm.store_turn("a", "s", "I am allergic to peanuts", "Noted.")
            await mm.inject_memory("a", "The user is allergic to peanuts")
            ctx = await mm.retrieve_context("a", "s", "peanuts allergy", 1000)
            assert [t.user_message for t in ctx.recent_turns] == ["I am allergic to peanuts"]
            assert [m.content for m in ctx.episodic_memories] == ["The user is allergic to peanuts"]
    finally:
        await cleanup(prefix)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_unreachable_redis_fails_fast_with_a_typed_error() -> None:
    store = RedisQdrantStore(
        RedisQdrantSettings(
            redis_url=f"redis://127.0.0.1:{_free_port()}", qdrant_url=":memory:", redis_timeout=1.0
        )
    )
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError, match="Redis at redis://127.0.0.1"):
        await store.setup()
    assert time.monotonic() - started < 2.0
    await store.close()


async def test_unreachable_qdrant_server_fails_fast_with_a_typed_error() -> None:
    store = RedisQdrantStore(
        RedisQdrantSettings(
            redis_url=redis_qdrant_settings("x")["redis_url"],
            qdrant_url=f"http://127.0.0.1:{_free_port()}",
            qdrant_timeout=2.0,
        )
    )
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError, match="Qdrant at http://127.0.0.1"):
        await store.setup()
    assert time.monotonic() - started < 2.5
    await store.close()


async def test_unreachable_servers_are_named_without_their_passwords() -> None:
    # The Qdrant URL reached the message unmasked (the Redis URL had a masking of its own).
    port = _free_port()
    store = RedisQdrantStore(
        RedisQdrantSettings(
            redis_url=f"redis://:r3dis-secret@127.0.0.1:{port}",
            qdrant_url=":memory:",
            redis_timeout=1.0,
        )
    )
    with pytest.raises(StoreUnavailableError) as redis_down:
        await store.setup()
    await store.close()
    assert f"redis://:***@127.0.0.1:{port}" in str(redis_down.value)
    assert "r3dis-secret" not in str(redis_down.value)
    store = RedisQdrantStore(
        RedisQdrantSettings(
            redis_url=redis_qdrant_settings("x")["redis_url"],
            qdrant_url=f"http://admin:qdr4nt-secret@127.0.0.1:{port}",
            qdrant_timeout=2.0,
        )
    )
    with pytest.raises(StoreUnavailableError) as qdrant_down:
        await store.setup()
    await store.close()
    assert f"http://admin:***@127.0.0.1:{port}" in str(qdrant_down.value)
    assert "qdr4nt-secret" not in str(qdrant_down.value)


@pytest.mark.parametrize(("module", "extra"), [("redis", "redis"), ("qdrant_client", "qdrant")])
def test_missing_extra_names_the_pip_line(module: str, extra: str) -> None:
    code = (
        f"import sys; sys.modules[{module!r}] = None\n"
        "try:\n"
        "    import actrone_pg.stores.redis_qdrant\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert out.startswith("MissingDependencyError")
    assert f'pip install "actrone-pg[{extra}]"' in out


class _RedisServer:
    """A private redis-server on a spare loopback port, persisting every write (AOF, fsync
    always) so that a restart keeps the data."""

    def __init__(self, directory: Path) -> None:
        self.port = _free_port()
        self.dir = directory
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        binary = shutil.which("redis-server")
        assert binary is not None
        self.proc = subprocess.Popen(
            [
                binary, "--bind", "127.0.0.1", "--port", str(self.port), "--save", "",
                "--appendonly", "yes", "--appendfsync", "always", "--dir", str(self.dir),
                "--daemonize", "no", "--loglevel", "warning",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as c:
                    c.sendall(b"PING\r\n")
                    if c.recv(64).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("redis-server did not start within 10 s")

    def stop(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGCONT)
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=10)
            self.proc = None


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[_RedisServer]:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    server = _RedisServer(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def outage_store(private_redis: _RedisServer) -> AsyncIterator[Any]:
    store = RedisQdrantStore(
        RedisQdrantSettings(
            redis_url=f"redis://127.0.0.1:{private_redis.port}",
            qdrant_url=":memory:",
            prefix="outage",
            redis_timeout=1.0,
        )
    )
    await store.setup()
    yield store
    await store.close()


@pytest.mark.slow
async def test_redis_outage_typed_error_in_time_then_recovery_without_duplicates(
    private_redis: _RedisServer, outage_store: Any
) -> None:
    s = outage_store
    await s.append_turn(turn("a", "s", 1), max_turns=10, ttl_seconds=TTL)

    # 1. A hung server (SIGSTOP): the call gives up after redis_timeout (1 s).
    assert private_redis.proc is not None
    private_redis.proc.send_signal(signal.SIGSTOP)
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError):
        await s.append_turn(turn("a", "s", 2), max_turns=10, ttl_seconds=TTL)
    elapsed = time.monotonic() - started
    assert 0.9 <= elapsed < 2.0, elapsed  # 1 s timeout + scheduling slack on a busy CI box
    # The command was already in the server's socket buffer: it may run when the server wakes.
    private_redis.proc.send_signal(signal.SIGCONT)

    # 2. A stopped server: refused at once, still a typed error.
    private_redis.stop()
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError):
        await s.append_turn(turn("a", "s", 3), max_turns=10, ttl_seconds=TTL)
    assert time.monotonic() - started < 2.0

    # 3. The same port again (the AOF keeps the data): the same store object works, and the
    # client's retries of turns 2 and 3 (same ids) store each exactly once.
    private_redis.start()
    for n in (2, 3, 2, 3):
        await s.append_turn(turn("a", "s", n), max_turns=10, ttl_seconds=TTL)
    turns = await s.recent_turns("a", "s", limit=10, ttl_seconds=TTL)
    assert [t.id for t in turns] == ["t1", "t2", "t3"]


async def test_l1_read_and_l2_search_use_separate_connections(store_redis_qdrant: Any) -> None:
    s = store_redis_qdrant
    await s.append_turn(turn("a", "s", 1), max_turns=5, ttl_seconds=TTL)
    await s.upsert_memories([record("a", "m", "apple", [1, 0, 0])])
    pool = s.servers.redis().connection_pool
    # Hold one connection hostage: with a single shared connection both calls would block.
    hostage = await pool.get_connection()
    try:
        turns, hits = await asyncio.wait_for(
            asyncio.gather(
                s.recent_turns("a", "s", limit=5, ttl_seconds=TTL),
                s.search(request("a", "apple", [1, 0, 0])),
            ),
            timeout=5,
        )
    finally:
        await pool.release(hostage)
    assert [t.id for t in turns] == ["t1"] and [h.memory.id for h in hits.hits] == ["m"]


async def test_a_saturated_redis_pool_is_load_not_an_outage() -> None:
    # Spec §8, issue 38 item 3. A pool of 4 with every connection held elsewhere: the call is
    # told the pool is saturated (not that Redis may be unreachable); once they are back, it
    # is served. Then 500 concurrent calls see only success or that error, and no connection
    # of the healthy server is dropped for it.
    from actrone_pg.stores.redis_qdrant import from_config

    prefix = unique_prefix()
    config = MemoryConfig(**redis_qdrant_settings(prefix, redis_pool_size=4, redis_timeout=0.5))
    store = from_config(config)
    await store.setup()
    try:
        pool = store.servers.redis().connection_pool
        hostages = [await pool.get_connection() for _ in range(4)]
        try:
            with pytest.raises(PoolSaturatedError, match="redis_pool_size") as raised:
                await store.recent_turns("a", "s", limit=5, ttl_seconds=TTL)
        finally:
            for conn in hostages:
                await pool.release(conn)
        assert "unreachable" not in str(raised.value) and "running" not in str(raised.value)
        assert await store.recent_turns("a", "s", limit=5, ttl_seconds=TTL) == []
        opened = {id(c) for c in pool._available_connections}
        results = await asyncio.gather(
            *(store.recent_turns("a", "s", limit=5, ttl_seconds=TTL) for _ in range(500)),
            return_exceptions=True,
        )
        errors = [r for r in results if not isinstance(r, list)]
        assert [r for r in errors if not isinstance(r, PoolSaturatedError)] == []
        assert {id(c) for c in pool._available_connections} == opened  # none dropped, none new
    finally:
        await store.close()
        await cleanup(prefix)


def test_point_ids_are_deterministic_and_tenant_scoped() -> None:
    assert layout.point_id("A", "m1") != layout.point_id("B", "m1")
    assert layout.point_id("A", "m1") == layout.point_id("A", "m1")
    assert layout.point_id("A", "m1") == str(
        uuid.uuid5(uuid.UUID("3b0f7a52-9e64-4c1d-8a7e-5d2c9f4b1e36"), "A\x00m1")
    )


async def test_lost_redis_index_is_rebuilt_from_qdrant(
    store_redis_qdrant: Any, caplog: pytest.LogCaptureFixture
) -> None:
    s = store_redis_qdrant
    await s.upsert_memories(
        [record("a", "m1", "apple pie", [1, 0, 0]), record("a", "m2", "pear pie", [1, 0.2, 0])]
    )
    await s.upsert_memories([record("b", "m1", "apple", [1, 0, 0])])
    before_state = await redis_state(s, "a")
    before = (await s.search(request("a", "apple", [1, 0, 0]))).hits
    ak = layout.AgentKeys.of(s.servers.prefix, "a")
    await s.servers.redis().delete(
        ak.mem, ak.doc, ak.df, ak.stats
    )  # what a restart without AOF does
    assert await s.servers.redis().hlen(ak.mem) == 0
    with caplog.at_level("WARNING", logger="actrone_pg.stores.redis_qdrant"):
        assert (await s.search(request("a", "apple", [1, 0, 0]))).hits == before
    assert "re-indexed agent 'a' from Qdrant (Redis had lost its index): 2 memories" in caplog.text
    assert await redis_state(s, "a") == before_state
    assert await s.count_memories("a") == 2
    assert await s.count_memories("b") == 1


async def test_cosines_are_recomputed_only_for_near_ties(
    store_redis_qdrant: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = store_redis_qdrant
    await s.upsert_memories(
        [
            record("a", "far", "one", [1, 0, 0]),
            record("a", "mid", "two", [1, 1, 0]),
            record("a", "twin1", "three", [1, 0.5, 0.2]),
            record("a", "twin2", "four", [1, 0.5, 0.2]),
        ]
    )
    asked: list[list[str]] = []
    real = s.servers.qdrant().retrieve

    async def spy(*args: Any, **kwargs: Any) -> Any:
        asked.append(sorted(str(i) for i in kwargs["ids"]))
        return await real(*args, **kwargs)

    monkeypatch.setattr(s.servers.qdrant(), "retrieve", spy)
    hits = (await s.search(request("a", "x", [1, 0, 0], threshold=0.01))).hits
    # dense ranks far 1, twin1 2, twin2 3, mid 4; recency (all equal times) by id: far, mid,
    # twin1, twin2. RRF: far 2/61, twin1 1/62+1/63, mid 1/64+1/62, twin2 1/63+1/64.
    assert [h.memory.id for h in hits] == ["far", "twin1", "mid", "twin2"]
    assert asked == [sorted([layout.point_id("a", "twin1"), layout.point_id("a", "twin2")])]
    # A threshold right at a candidate's cosine puts that candidate under recomputation too,
    # and it is admitted (cosine >= threshold, with the same float32 arithmetic).
    asked.clear()
    cos_mid = float(unit([1, 1, 0]) @ unit([1, 0, 0]))
    hits = (await s.search(request("a", "x", [1, 0, 0], threshold=cos_mid))).hits
    # The same four candidates in the same order; mid is recomputed as well as the twins.
    assert [h.memory.id for h in hits] == ["far", "twin1", "mid", "twin2"]
    assert sorted(asked[0]) == sorted([layout.point_id("a", i) for i in ("mid", "twin1", "twin2")])


async def test_a_batch_interleaving_agents_keeps_each_record_with_its_agent(
    store_redis_qdrant: Any,
) -> None:
    s = store_redis_qdrant
    await s.upsert_memories([record("b", "m1", "b old", [0, 1, 0])])
    await s.upsert_memories(
        [
            record("a", "m1", "a new", [1, 0, 0]),
            record("b", "m1", "b new", [1, 0], embedder="e2"),  # moves b's m1 to another space
            record("a", "m2", "a second", [1, 0, 0]),
        ]
    )
    b = await s.get_memory("b", "m1")
    assert b is not None and (b.content, b.embedder) == ("b new", "e2")
    assert await s.servers.qdrant().count(
        registry.collection(s.servers, "e", 3), exact=True
    ) == qm.CountResult(count=2)
    assert [h.memory.id for h in (await s.search(request("a", "a", [1, 0, 0]))).hits] == [
        "m1",
        "m2",
    ]
    assert (await s.search(request("b", "b", [0, 1, 0]))).hits == []


async def test_redis_failure_mid_batch_undoes_the_chunks_already_applied(
    store_redis_qdrant: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = store_redis_qdrant
    await s.upsert_memories([record("a", "m0", "already here", [1, 0, 0])])
    before = await redis_state(s, "a")
    real_script = s.servers.script
    calls = 0

    # A fault this test cannot produce on demand with a real server: the second chunk's script
    # fails (as if the connection dropped), after the first chunk was applied.
    async def flaky_script(name: str, keys: Any, args: Any) -> Any:
        nonlocal calls
        if name == "set_entries":
            calls += 1
            if calls == 2:
                raise StoreUnavailableError("connection lost")
        return await real_script(name, keys, args)

    monkeypatch.setattr(s.servers, "script", flaky_script)
    batch = [record("a", "m0", "replacement", [1, 0, 0])] + [
        record("a", f"m{i}", f"word{i} common", [1, 0.001 * i, 0])
        for i in range(1, index.REDIS_CHUNK + 20)
    ]
    with pytest.raises(StoreUnavailableError):
        await s.upsert_memories(batch)
    monkeypatch.setattr(s.servers, "script", real_script)
    assert calls == 3  # chunk 1, chunk 2 (failed), the undo of chunk 1
    assert await redis_state(s, "a") == before
    assert await s.servers.qdrant().count(
        registry.collection(s.servers, "e", 3), exact=True
    ) == qm.CountResult(count=1)
    got = await s.get_memory("a", "m0")
    assert got is not None and got.content == "already here"


async def _lose_redis(s: Any) -> None:
    """What a Redis restart without persistence, seen by a fresh process, looks like."""
    keys = [k async for k in s.servers.redis().scan_iter(match=f"{s.servers.prefix}:*")]
    await s.servers.redis().delete(*keys)
    s.servers.dims.clear()
    s.servers.collections.clear()
    s.servers.known.clear()


async def test_after_losing_all_of_redis_qdrant_data_is_found_again(
    store_redis_qdrant: Any,
) -> None:
    s = store_redis_qdrant
    await s.upsert_memories(
        [record("a", "m1", "apple pie", [1, 0, 0]), record("b", "m1", "secret", [1, 0, 0])]
    )
    before = (await s.search(request("a", "apple", [1, 0, 0]))).hits
    await _lose_redis(s)
    # A write with another dimension is still refused: Qdrant's collections remember it.
    with pytest.raises(DimensionMismatchError):
        await s.upsert_memories([record("c", "m", "x", [1, 0])])
    assert (await s.search(request("a", "apple", [1, 0, 0]))).hits == before
    assert await s.count_memories("a") == 1
    # Reads and deletes by id find the memories again too (each rebuilds a lost index first).
    await _lose_redis(s)
    got = await s.get_memory("a", "m1")
    assert got is not None and got.content == "apple pie"
    await _lose_redis(s)
    assert await s.delete_memory("a", "m1") is True
    assert await s.get_memory("a", "m1") is None
    assert (await s.search(request("a", "apple", [1, 0, 0]))).hits == []
    await _lose_redis(s)
    assert await s.count_memories("b") == 1
    # Erasure reaches the points even though Redis no longer lists b's memories.
    await s.erase_agent("b")
    n = await s.servers.qdrant().count(
        registry.collection(s.servers, "e", 3), count_filter=layout.agent_filter("b"), exact=True
    )
    assert n.count == 0
    assert (await s.search(request("b", "secret", [1, 0, 0]))).hits == []


async def test_collections_of_a_longer_prefix_are_not_ours(store_redis_qdrant: Any) -> None:
    s = store_redis_qdrant
    await s.upsert_memories([record("a", "m1", "mine", [1, 0, 0])])
    other = f"{s.servers.prefix}_x_e-9f2a_{'0' * 8}_3"  # what prefix "<ours>_x" could create
    await s.servers.qdrant().create_collection(
        other, vectors_config=qm.VectorParams(size=3, distance=qm.Distance.DOT)
    )
    await s.servers.qdrant().upsert(
        other,
        points=[qm.PointStruct(id=layout.point_id("a", "z"), vector=[1.0, 0.0, 0.0],
                                  payload={"agent_id": "a"})],
        wait=True,
    )  # fmt: skip
    assert [name for name, _ in await registry.own_collections(s.servers)] == [
        registry.collection(s.servers, "e", 3)
    ]
    await s.erase_agent("a")
    assert (await s.servers.qdrant().count(other, exact=True)).count == 1  # the fixture drops it
