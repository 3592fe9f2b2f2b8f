"""One suite every store passes (README, "Backends"), parametrized over ``BACKENDS``."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from actrone_pg.errors import DimensionMismatchError, LockLostError
from actrone_pg.ranking import RankingParams
from actrone_pg.stores.base import Fence, Store
from tests.factories import NOW, ago, record, request, turn

TTL = 3600.0


# -- L1 ------------------------------------------------------------------------------------------


async def test_turns_come_back_oldest_first_and_limited_to_the_newest(store: Store) -> None:
    for i in range(6):
        await store.append_turn(turn(text=f"t{i}"), max_turns=50, ttl_seconds=TTL)
    got = await store.recent_turns("agent", "s1", limit=4, ttl_seconds=TTL)
    assert [t.user_message for t in got] == ["user: t2", "user: t3", "user: t4", "user: t5"]


async def test_turn_fields_round_trip(store: Store) -> None:
    created = datetime(2026, 11, 30, 10, 11, 12, 345678, tzinfo=UTC)
    t = turn(text="héllo — 你好 🙂", created_at=created)
    t = type(t)(
        **{**{f: getattr(t, f) for f in t.__slots__}, "tool_results": [{"tool": "x", "ok": True}]}
    )
    await store.append_turn(t, max_turns=50, ttl_seconds=TTL)
    (got,) = await store.recent_turns("agent", "s1", limit=10, ttl_seconds=TTL)
    assert got == t


async def test_session_is_trimmed_to_max_turns(store: Store) -> None:
    for i in range(8):
        await store.append_turn(turn(text=f"t{i}"), max_turns=5, ttl_seconds=TTL)
    got = await store.recent_turns("agent", "s1", limit=100, ttl_seconds=TTL)
    assert [t.user_message for t in got] == [f"user: t{i}" for i in range(3, 8)]
    info = await store.get_session("agent", "s1", ttl_seconds=TTL)
    assert info is not None and info.turn_count == 5


async def test_retried_append_is_not_duplicated(store: Store) -> None:
    t = turn(text="once")
    for _ in range(3):
        await store.append_turn(t, max_turns=50, ttl_seconds=TTL)
    got = await store.recent_turns("agent", "s1", limit=10, ttl_seconds=TTL)
    assert [x.id for x in got] == [t.id]


async def test_session_expires_after_its_ttl_and_restarts_empty(store: Store) -> None:
    await store.append_turn(turn(text="old"), max_turns=50, ttl_seconds=0.3)
    assert len(await store.recent_turns("agent", "s1", limit=10, ttl_seconds=0.3)) == 1
    await asyncio.sleep(0.7)
    assert await store.recent_turns("agent", "s1", limit=10, ttl_seconds=0.3) == []
    assert await store.get_session("agent", "s1", ttl_seconds=0.3) is None
    await store.append_turn(turn(text="new"), max_turns=50, ttl_seconds=0.3)
    got = await store.recent_turns("agent", "s1", limit=10, ttl_seconds=0.3)
    assert [t.user_message for t in got] == ["user: new"]


async def test_sweep_removes_expired_sessions_and_nothing_live(store: Store) -> None:
    for agent, session in (("A", "old-1"), ("B", "old-2"), ("A", "old-3")):
        await store.append_turn(turn(agent, session, "old"), max_turns=50, ttl_seconds=0.3)
    await asyncio.sleep(0.8)
    # Idle 0.8 s against a TTL of 0.5 s; the live session has half a second of margin.
    await store.append_turn(turn("A", "live", "new"), max_turns=50, ttl_seconds=5.0)
    first = await store.sweep_expired_sessions(ttl_seconds=0.5, limit=2)
    rest = await store.sweep_expired_sessions(ttl_seconds=0.5, limit=100)
    assert (first, rest) == (2, 1)  # the limit holds; the next call takes the rest
    assert await store.sweep_expired_sessions(ttl_seconds=0.5, limit=100) == 0
    live = await store.recent_turns("A", "live", limit=10, ttl_seconds=5.0)
    assert [t.user_message for t in live] == ["user: new"]
    for agent, session in (("A", "old-1"), ("B", "old-2"), ("A", "old-3")):
        # Read with a long TTL: only a removed session reads as absent.
        assert await store.get_session(agent, session, ttl_seconds=3600) is None


#: The short session TTL of the sweeper test.
SHORT_TTL = 2.0


async def test_an_expired_session_waits_for_the_sweeper_whoever_reads_it(store: Store) -> None:
    # What the sweeper needs to consolidate an expired session (spec §9.1) on every backend:
    # it is listed, reads with the TTL see nothing (and do not destroy it), a longer TTL reads it.
    # SHORT_TTL: 2 s, so that the live session outlasts a few calls on a loaded machine.
    for i in range(3):
        await store.append_turn(turn("A", "s", f"t{i}"), max_turns=50, ttl_seconds=SHORT_TTL)
    await store.append_turn(turn("A:x", "s", "other"), max_turns=50, ttl_seconds=SHORT_TTL)
    await asyncio.sleep(SHORT_TTL * 1.5)
    await store.append_turn(turn("A", "live", "new"), max_turns=50, ttl_seconds=SHORT_TTL)
    await store.append_turn(turn("A", "live", "newer"), max_turns=50, ttl_seconds=SHORT_TTL)
    assert await store.recent_turns("A", "s", limit=10, ttl_seconds=SHORT_TTL) == []
    assert await store.get_session("A", "s", ttl_seconds=SHORT_TTL) is None
    expired = await store.expired_sessions(ttl_seconds=SHORT_TTL, limit=10)
    assert sorted(expired) == [("A", "s"), ("A:x", "s")]
    assert await store.expired_sessions(ttl_seconds=SHORT_TTL, limit=1) in (
        [("A", "s")],
        [("A:x", "s")],
    )
    old = await store.recent_turns("A", "s", limit=10, ttl_seconds=3600)
    assert [t.user_message for t in old] == ["user: t0", "user: t1", "user: t2"]
    info = await store.get_session("A", "s", ttl_seconds=3600)
    assert info is not None and info.turn_count == 3
    # deleted only while still expired; the other agent's session with the same id stays.
    # The live session is written again first: on a loaded machine (a Citus cluster's calls
    # take longer) the reads above may outlast its SHORT_TTL.
    await store.append_turn(turn("A", "live", "newest"), max_turns=50, ttl_seconds=SHORT_TTL)
    assert not await store.delete_expired_session("A", "live", ttl_seconds=SHORT_TTL)
    assert await store.delete_expired_session("A", "s", ttl_seconds=SHORT_TTL)
    assert not await store.delete_expired_session("A", "s", ttl_seconds=SHORT_TTL)
    assert await store.get_session("A", "s", ttl_seconds=3600) is None
    assert await store.expired_sessions(ttl_seconds=SHORT_TTL, limit=10) == [("A:x", "s")]
    assert len(await store.recent_turns("A:x", "s", limit=10, ttl_seconds=3600)) == 1
    assert len(await store.recent_turns("A", "live", limit=10, ttl_seconds=3600)) == 3


async def test_writing_refreshes_the_ttl(store: Store) -> None:
    for i in range(4):
        await store.append_turn(turn(text=f"t{i}"), max_turns=50, ttl_seconds=0.6)
        await asyncio.sleep(0.25)
    # 1.0 s since the first write, 0.25 s since the last: still alive
    assert len(await store.recent_turns("agent", "s1", limit=10, ttl_seconds=0.6)) == 4


async def test_sessions_and_agents_are_isolated(store: Store) -> None:
    await store.append_turn(turn("agent", "s1", "a-s1"), max_turns=50, ttl_seconds=TTL)
    await store.append_turn(turn("agent", "s2", "a-s2"), max_turns=50, ttl_seconds=TTL)
    await store.append_turn(turn("other", "s1", "o-s1"), max_turns=50, ttl_seconds=TTL)
    got = await store.recent_turns("agent", "s1", limit=10, ttl_seconds=TTL)
    assert [t.user_message for t in got] == ["user: a-s1"]
    got = await store.recent_turns("other", "s1", limit=10, ttl_seconds=TTL)
    assert [t.user_message for t in got] == ["user: o-s1"]


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (("a:b", "c"), ("a", "b:c")),
        (("a", "b:c"), ("a:b", "c")),
        (("user_%", "s"), ("user_1", "s")),
        (("a*", "s?"), ("ab", "sx")),
        (("a/b", "c"), ("a", "b/c")),
    ],
)
async def test_ids_that_look_alike_never_collide(
    store: Store, first: tuple[str, str], second: tuple[str, str]
) -> None:
    await store.append_turn(turn(*first, "first"), max_turns=50, ttl_seconds=TTL)
    await store.append_turn(turn(*second, "second"), max_turns=50, ttl_seconds=TTL)
    got1 = await store.recent_turns(*first, limit=10, ttl_seconds=TTL)
    got2 = await store.recent_turns(*second, limit=10, ttl_seconds=TTL)
    assert [t.user_message for t in got1] == ["user: first"]
    assert [t.user_message for t in got2] == ["user: second"]
    await store.clear_session(*first)
    assert await store.recent_turns(*first, limit=10, ttl_seconds=TTL) == []
    assert len(await store.recent_turns(*second, limit=10, ttl_seconds=TTL)) == 1
    await store.erase_agent(first[0])
    assert len(await store.recent_turns(*second, limit=10, ttl_seconds=TTL)) == 1


async def test_clear_session_leaves_other_sessions(store: Store) -> None:
    await store.append_turn(turn("agent", "s1"), max_turns=50, ttl_seconds=TTL)
    await store.append_turn(turn("agent", "s2"), max_turns=50, ttl_seconds=TTL)
    await store.clear_session("agent", "s1")
    assert await store.recent_turns("agent", "s1", limit=10, ttl_seconds=TTL) == []
    assert await store.get_session("agent", "s1", ttl_seconds=TTL) is None
    assert len(await store.recent_turns("agent", "s2", limit=10, ttl_seconds=TTL)) == 1


async def test_session_metadata_merges(store: Store) -> None:
    await store.set_session_metadata("agent", "s1", {"a": 1, "b": "x"}, ttl_seconds=TTL)
    await store.set_session_metadata("agent", "s1", {"b": "y", "c": [1, 2]}, ttl_seconds=TTL)
    info = await store.get_session("agent", "s1", ttl_seconds=TTL)
    assert info is not None
    assert info.metadata == {"a": 1, "b": "y", "c": [1, 2]}
    assert info.turn_count == 0


async def test_list_sessions_lists_the_agents_live_sessions_in_id_order(store: Store) -> None:
    # Ids whose order differs between code points and their percent- or byte-encodings.
    for session, n in (("é", 1), ("b:c", 2), ("Z", 1), ("a", 3), ("a b", 1)):
        for i in range(n):
            await store.append_turn(turn("agent", session, f"t{i}"), max_turns=50, ttl_seconds=TTL)
    await store.set_session_metadata("agent", "a", {"k": [1]}, ttl_seconds=TTL)
    # Other agents whose keys look alike (spec §8): none of theirs is listed.
    for agent, session in (("agent:x", "s"), ("agen", "t:s"), ("agent%", "s"), ("AGENT", "s")):
        await store.append_turn(turn(agent, session, "other"), max_turns=50, ttl_seconds=TTL)
    listed = await store.list_sessions("agent", ttl_seconds=TTL)
    assert [s.session_id for s in listed] == ["Z", "a", "a b", "b:c", "é"]
    assert [s.turn_count for s in listed] == [1, 3, 1, 2, 1]
    assert {s.agent_id for s in listed} == {"agent"}
    assert listed[1].metadata == {"k": [1]}
    for info in listed:
        assert info == await store.get_session("agent", info.session_id, ttl_seconds=TTL)
    assert [s.session_id for s in await store.list_sessions("agent:x", ttl_seconds=TTL)] == ["s"]
    assert await store.list_sessions("agent:", ttl_seconds=TTL) == []
    assert await store.list_sessions("nobody", ttl_seconds=TTL) == []
    await store.clear_session("agent", "a")
    await store.erase_agent("agent:x")
    assert [s.session_id for s in await store.list_sessions("agent", ttl_seconds=TTL)] == [
        "Z",
        "a b",
        "b:c",
        "é",
    ]
    assert await store.list_sessions("agent:x", ttl_seconds=TTL) == []


async def test_list_sessions_leaves_out_expired_sessions_before_the_sweep(store: Store) -> None:
    await store.append_turn(turn("agent", "old", "old"), max_turns=50, ttl_seconds=0.3)
    await asyncio.sleep(0.7)
    await store.append_turn(turn("agent", "new", "new"), max_turns=50, ttl_seconds=5.0)
    assert [s.session_id for s in await store.list_sessions("agent", ttl_seconds=0.5)] == ["new"]
    await asyncio.sleep(0.3)
    assert await store.list_sessions("agent", ttl_seconds=0.1) == []


async def test_lock_admits_exactly_one_of_100_concurrent_callers(store: Store) -> None:
    holders = [f"h{i}" for i in range(100)]
    results = await asyncio.gather(
        *(store.acquire_lock("agent", "summary", h, 30.0) for h in holders)
    )
    assert sum(results) == 1
    winner = holders[results.index(True)]
    loser = holders[results.index(False)]
    assert await store.release_lock("agent", "summary", loser) is False
    assert await store.release_lock("agent", "summary", winner) is True
    assert await store.acquire_lock("agent", "summary", loser, 30.0) is True


async def test_a_fenced_write_goes_in_only_while_its_lock_is_held(store: Store) -> None:
    # A consolidation's writes: checked against the lock in the write's own transaction.
    fence = Fence("maintenance", "h1")
    kept = record("agent", "m1", "coffee", [1, 0, 0, 0])
    with pytest.raises(LockLostError, match="no longer holds"):
        await store.upsert_memories([kept], fence=fence)  # never taken
    assert await store.acquire_lock("agent", "maintenance", "h1", 30.0)
    await store.upsert_memories([kept], fence=fence)
    with pytest.raises(LockLostError):
        await store.upsert_memories(
            [record("agent", "m2", "tea", [0, 1, 0, 0])], fence=Fence("maintenance", "h2")
        )
    assert await store.release_lock("agent", "maintenance", "h1")
    with pytest.raises(LockLostError):
        await store.upsert_memories([record("agent", "m3", "tea", [0, 1, 0, 0]), kept], fence=fence)
    assert await store.count_memories("agent") == 1
    assert await store.get_memory("agent", "m1") is not None
    assert await store.get_memory("agent", "m3") is None


async def test_lock_lapses_after_its_ttl(store: Store) -> None:
    assert await store.acquire_lock("agent", "m", "h1", 0.3)
    assert not await store.acquire_lock("agent", "m", "h2", 0.3)
    await asyncio.sleep(0.6)
    results = await asyncio.gather(
        *(store.acquire_lock("agent", "m", f"x{i}", 5.0) for i in range(20))
    )
    assert sum(results) == 1
    assert await store.release_lock("agent", "m", "h1") is False


async def test_locks_are_per_agent_and_name(store: Store) -> None:
    assert await store.acquire_lock("a", "m", "h", 30.0)
    assert await store.acquire_lock("b", "m", "h", 30.0)
    assert await store.acquire_lock("a", "n", "h", 30.0)


# -- L2 ------------------------------------------------------------------------------------------


async def test_memory_fields_round_trip(store: Store) -> None:
    created = datetime(2026, 10, 2, 3, 4, 5, 678901, tzinfo=UTC)
    rec = record(
        "agent",
        "m1",
        "Ünïcödé content — 漢字 'quotes' \"double\" \\ back",
        [1, 0, 0, 0],
        created_at=created,
        session_id="sess",
        tags=("a", "b c"),
        metadata={"k": [1, 2, {"x": None}], "n": 1.5},
    )
    await store.upsert_memories([rec])
    got = await store.get_memory("agent", "m1")
    assert got == rec.memory
    assert await store.count_memories("agent") == 1


async def test_lifecycle_fields_round_trip_through_get_and_search(store: Store) -> None:
    expires = datetime(2031, 1, 2, 3, 4, 5, 6, tzinfo=UTC)
    valid = datetime(2026, 11, 30, 9, 0, 0, 123456, tzinfo=UTC)
    rec = record("agent", "m1", "lineage of a consolidated fact", [1, 0, 0, 0])
    rec = replace(
        rec,
        memory=replace(
            rec.memory,
            expires_at=expires,
            source_turn_ids=("t-1", "t:2", "t 3"),
            version=3,
            valid_from=valid,
        ),
    )
    plain = record("agent", "m2", "an injected fact", [1, 0, 0, 0])
    await store.upsert_memories([rec, plain])
    assert await store.get_memory("agent", "m1") == rec.memory
    got = await store.get_memory("agent", "m2")
    assert got == plain.memory and got.expires_at is None and got.source_turn_ids == ()
    for budget in (None, 1000):
        found = await store.search(
            replace(request("agent", "lineage", [1, 0, 0, 0], threshold=0.5), budget=budget)
        )
        by_id = {h.memory.id: h.memory for h in found.hits}
        assert by_id["m1"] == rec.memory and by_id["m2"] == plain.memory


async def test_upsert_replaces_and_updates_search(store: Store) -> None:
    await store.upsert_memories([record("agent", "m1", "apples and pears", [1, 0, 0, 0])])
    await store.upsert_memories([record("agent", "m1", "bananas only", [0, 1, 0, 0])])
    assert await store.count_memories("agent") == 1
    got = await store.get_memory("agent", "m1")
    assert got is not None and got.content == "bananas only"
    hits = (await store.search(request("agent", "apples", [1, 0, 0, 0], threshold=0.5))).hits
    assert hits == []
    hits = (await store.search(request("agent", "bananas", [0, 1, 0, 0], threshold=0.5))).hits
    assert [h.memory.id for h in hits] == ["m1"]
    assert hits[0].explain.lexical_rank == 1


async def test_tenant_isolation_by_memory_id(store: Store) -> None:
    await store.upsert_memories([record("A", "shared-id", "A's secret", [1, 0, 0, 0])])
    # B cannot read, delete or overwrite A's memory by passing its id
    assert await store.get_memory("B", "shared-id") is None
    assert await store.delete_memory("B", "shared-id") is False
    await store.upsert_memories([record("B", "shared-id", "B's note", [1, 0, 0, 0])])
    a = await store.get_memory("A", "shared-id")
    b = await store.get_memory("B", "shared-id")
    assert a is not None and a.content == "A's secret"
    assert b is not None and b.content == "B's note"
    hits = (await store.search(request("B", "secret", [1, 0, 0, 0]))).hits
    assert [h.memory.content for h in hits] == ["B's note"]
    await store.erase_agent("B")
    a = await store.get_memory("A", "shared-id")
    assert a is not None and a.content == "A's secret"


async def test_like_patterns_in_agent_ids_match_nothing_else(store: Store) -> None:
    await store.upsert_memories([record("user_1", "m", "one", [1, 0, 0, 0])])
    await store.upsert_memories([record("user_%", "m", "pattern", [1, 0, 0, 0])])
    assert await store.count_memories("user_%") == 1
    await store.erase_agent("user_%")
    assert await store.count_memories("user_1") == 1
    assert await store.count_memories("user_%") == 0


async def test_batch_is_all_or_nothing(store: Store) -> None:
    await store.upsert_memories([record("agent", "m0", "existing", [1, 0, 0, 0])])
    bad = [
        record("agent", "m1", "fine", [0, 1, 0, 0]),
        record("agent", "m2", "wrong size", [0, 1, 0]),
    ]
    with pytest.raises(DimensionMismatchError):
        await store.upsert_memories(bad)
    assert await store.count_memories("agent") == 1
    assert await store.get_memory("agent", "m1") is None


async def test_search_with_wrong_dimension_is_an_error(store: Store) -> None:
    await store.upsert_memories([record("agent", "m0", "x", [1, 0, 0, 0])])
    with pytest.raises(DimensionMismatchError):
        await store.search(request("agent", "x", [1, 0, 0]))
    with pytest.raises(DimensionMismatchError):
        await store.search(replace(request("agent", "x", [1, 0, 0]), budget=100))


async def test_packed_search_skips_what_does_not_fit(store: Store) -> None:
    # Ranked a, b, c by cosine; b is too big for what a leaves, c still fits after it.
    await store.upsert_memories(
        [
            record("agent", "a", "a" * 40, [1, 0, 0, 0]),
            record("agent", "b", "b" * 80, [0.9, 0.1, 0, 0]),
            record("agent", "c", "c" * 20, [0.8, 0.2, 0, 0]),
            record("other", "d", "d" * 4, [1, 0, 0, 0]),
        ]
    )
    by_cosine = RankingParams(hybrid=False, relevance_weight=1.0, recency_weight=0.0)
    req = request("agent", "zzz", [1, 0, 0, 0], threshold=0.5, params=by_cosine)
    packed = await store.search(replace(req, budget=16))  # tokens: a 10, b 20, c 5
    assert [h.memory.id for h in packed.hits] == ["a", "c"]
    assert (packed.candidates_considered, packed.tokens) == (3, 15)
    assert packed.hits[1].memory.content == "c" * 20
    assert packed.hits[1].explain.dense_rank == 3
    best = await store.search(
        replace(req, budget=None, max_hits=2)
    )  # search_memories: the best two, no budget
    assert [h.memory.id for h in best.hits] == ["a", "b"]
    assert (best.candidates_considered, best.tokens) == (3, 30)
    empty = await store.search(replace(req, budget=0))
    assert (empty.hits, empty.candidates_considered, empty.tokens) == ([], 3, 0)
    nobody = await store.search(replace(request("nobody", "x", [1, 0, 0, 0]), budget=100))
    assert (nobody.hits, nobody.candidates_considered, nobody.tokens) == ([], 0, 0)


async def test_vectors_of_other_embedders_are_never_compared(store: Store) -> None:
    await store.upsert_memories(
        [
            record("agent", "m1", "same space", [1, 0, 0, 0], embedder="e1"),
            record("agent", "m2", "other space", [1, 0, 0, 0, 0, 0], embedder="e2"),
        ]
    )
    hits = (await store.search(request("agent", "space", [1, 0, 0, 0], embedder="e1"))).hits
    assert [h.memory.id for h in hits] == ["m1"]
    hits = (await store.search(request("agent", "space", [1, 0, 0, 0, 0, 0], embedder="e2"))).hits
    assert [h.memory.id for h in hits] == ["m2"]
    assert (await store.search(request("agent", "space", [1, 0, 0], embedder="e3"))).hits == []


async def test_deleted_memory_is_never_returned(store: Store) -> None:
    await store.upsert_memories(
        [record("agent", f"m{i}", f"note {i}", [1, i / 10, 0, 0]) for i in range(5)]
    )
    assert await store.delete_memory("agent", "m2") is True
    assert await store.delete_memory("agent", "m2") is False
    hits = (await store.search(request("agent", "note 2", [1, 0.2, 0, 0]))).hits
    assert "m2" not in [h.memory.id for h in hits]
    assert len(hits) == 4
    assert await store.get_memory("agent", "m2") is None


async def test_erase_agent_removes_everything_of_that_agent_only(store: Store) -> None:
    for agent in ("A", "B"):
        await store.append_turn(turn(agent, "s"), max_turns=50, ttl_seconds=TTL)
        await store.set_session_metadata(agent, "s", {"k": 1}, ttl_seconds=TTL)
        await store.upsert_memories([record(agent, "m", f"{agent} memory", [1, 0, 0, 0])])
        assert await store.acquire_lock(agent, "m", "holder", 60.0)
    await store.erase_agent("A")
    assert await store.recent_turns("A", "s", limit=10, ttl_seconds=TTL) == []
    assert await store.get_session("A", "s", ttl_seconds=TTL) is None
    assert await store.count_memories("A") == 0
    assert (await store.search(request("A", "memory", [1, 0, 0, 0]))).hits == []
    assert await store.acquire_lock("A", "m", "new-holder", 60.0)  # the old lock went too
    # B untouched
    assert len(await store.recent_turns("B", "s", limit=10, ttl_seconds=TTL)) == 1
    assert await store.count_memories("B") == 1
    assert not await store.acquire_lock("B", "m", "new-holder", 60.0)
    # A's BM25 statistics went too: a fresh memory of A is scored as if A had one document
    await store.upsert_memories([record("A", "n", "fresh memory", [1, 0, 0, 0])])
    (hit,) = (await store.search(request("A", "memory", [1, 0, 0, 0]))).hits
    # N = 1, df = 1: idf = ln(1 + 0.5/1.5); tf = 1, |D| = avgdl: bm25 = idf * 2.2 / 2.2
    import math

    assert hit.explain.bm25 == pytest.approx(math.log(1 + 0.5 / 1.5), rel=1e-6)


async def test_hand_worked_hybrid_ranking(store: Store) -> None:
    # Three memories; the query shares the word "coffee" with m2 and m3 only.
    await store.upsert_memories(
        [
            record(
                "agent", "m1", "tea in the morning", [1.0, 0.0, 0.0, 0.0], created_at=ago(days=3)
            ),
            record(
                "agent", "m2", "coffee after lunch", [0.8, 0.6, 0.0, 0.0], created_at=ago(days=2)
            ),
            record("agent", "m3", "coffee beans", [0.6, 0.8, 0.0, 0.0], created_at=ago(days=1)),
        ]
    )
    hits = (await store.search(request("agent", "coffee?", [1, 0, 0, 0], threshold=0.5))).hits
    ranks = {
        h.memory.id: (h.explain.dense_rank, h.explain.lexical_rank, h.explain.recency_rank)
        for h in hits
    }
    # dense: m1 (1.0), m2 (0.8), m3 (0.6); lexical: m3 (shorter doc) then m2; recency: m3, m2, m1
    assert ranks == {"m1": (1, None, 3), "m2": (2, 2, 2), "m3": (3, 1, 1)}
    # fused: m1 = 1/61 + 1/63; m2 = 1/62 + 1/62 + 1/62; m3 = 1/63 + 1/61 + 1/61
    assert [h.memory.id for h in hits] == ["m3", "m2", "m1"]
    assert hits[0].explain.fused_score == pytest.approx(1 / 63 + 1 / 61 + 1 / 61, rel=1e-12)
    assert hits[2].explain.fused_score == pytest.approx(1 / 61 + 1 / 63, rel=1e-12)
    assert hits[0].explain.cosine == pytest.approx(0.6, abs=1e-6)


async def test_admission_threshold_and_limit(store: Store) -> None:
    # cosines to the query: 1.0, 0.5 (exactly), 0.25, -0.5
    await store.upsert_memories(
        [
            record("agent", "a", "alpha", [1, 0, 0, 0]),
            record("agent", "b", "bravo", [0.5, 0.5, 0.5, 0.5]),
            record("agent", "c", "charlie", [0.25, 0.25, 0.25, 0.25 * 13**0.5]),
            record("agent", "d", "delta", [-0.5, 0.5, 0.5, 0.5]),
        ]
    )
    ids = lambda found: sorted(h.memory.id for h in found.hits)  # noqa: E731
    assert ids(await store.search(request("agent", "q", [1, 0, 0, 0], threshold=0.5))) == [
        "a",
        "b",
    ]
    assert ids(await store.search(request("agent", "q", [1, 0, 0, 0], threshold=0.5001))) == ["a"]
    assert ids(await store.search(request("agent", "q", [1, 0, 0, 0], threshold=0.2))) == [
        "a",
        "b",
        "c",
    ]
    # limit keeps the nearest
    assert ids(await store.search(request("agent", "q", [1, 0, 0, 0], threshold=0.1, limit=2))) == [
        "a",
        "b",
    ]


async def test_classic_blend_ranking(store: Store) -> None:
    params = RankingParams(hybrid=False, relevance_weight=0.7, recency_weight=0.3)
    await store.upsert_memories(
        [
            # cosine 1.0, 30 days old -> 0.7
            record("agent", "old", "old but close", [1, 0, 0, 0], created_at=ago(days=30)),
            # cosine 0.6, brand new -> 0.42 + 0.3 = 0.72
            record("agent", "new", "new but far", [0.6, 0.8, 0, 0], created_at=NOW),
            # cosine 0.8, 15 days -> 0.56 + 0.15 = 0.71
            record("agent", "mid", "middle", [0.8, 0.6, 0, 0], created_at=ago(days=15)),
        ]
    )
    hits = (await store.search(request("agent", "close", [1, 0, 0, 0], params=params))).hits
    assert [h.memory.id for h in hits] == ["new", "mid", "old"]
    scores = [h.explain.fused_score for h in hits]
    assert scores == pytest.approx([0.72, 0.71, 0.70], abs=1e-6)
    assert all(h.explain.lexical_rank is None for h in hits)


async def test_ties_break_newer_first_then_by_id(store: Store) -> None:
    same = [1, 0, 0, 0]
    await store.upsert_memories(
        [
            record("agent", "b", "same", same, created_at=ago(days=1)),
            record("agent", "a", "same", same, created_at=ago(days=1)),
            record("agent", "c", "same", same, created_at=NOW),
        ]
    )
    hits = (await store.search(request("agent", "same", same))).hits
    assert [h.memory.id for h in hits] == ["c", "a", "b"]
    assert [h.explain.dense_rank for h in hits] == [1, 2, 3]


async def test_queries_full_of_operators_and_punctuation_just_work(store: Store) -> None:
    await store.upsert_memories([record("agent", "m", "it's a cat & dog's toy", [1, 0, 0, 0])])
    for q in ["cat & | ! ( ) :* <-> 'dog'", '"unterminated', "!!!", "a:b:c", "-not OR and", "%_\\"]:
        hits = (await store.search(request("agent", q, [1, 0, 0, 0]))).hits
        assert [h.memory.id for h in hits] == ["m"]


async def test_concurrent_appends_lose_nothing(store: Store) -> None:
    turns = [turn(text=f"t{i}", turn_id=str(uuid.uuid4())) for i in range(100)]
    await asyncio.gather(*(store.append_turn(t, max_turns=200, ttl_seconds=TTL) for t in turns))
    got = await store.recent_turns("agent", "s1", limit=200, ttl_seconds=TTL)
    assert sorted(t.id for t in got) == sorted(t.id for t in turns)


async def test_created_at_keeps_microseconds(store: Store) -> None:
    a = NOW + timedelta(microseconds=1)
    await store.upsert_memories(
        [
            record("agent", "x", "same", [1, 0, 0, 0], created_at=NOW),
            record("agent", "y", "same", [1, 0, 0, 0], created_at=a),
        ]
    )
    hits = (await store.search(request("agent", "same", [1, 0, 0, 0]))).hits
    assert [h.memory.id for h in hits] == ["y", "x"]
