"""Property-based tests of the public API on every backend (docs/retrieval.md, "Bad input").

Any generated input either succeeds and reads back exactly, or raises ``ValidationError`` and
writes nothing. Inputs mix clean values, for which the call must succeed, with wild ones: lone
surrogates, NUL and other control characters, numbers at and past the documented ranges,
datetimes near the ends of the calendar in odd time zones, deeply nested and non-JSON metadata.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import example, given, note
from hypothesis import strategies as st

from actrone_pg import MemoryConfig, MemoryManager, ValidationError
from actrone_pg import _validation as v
from actrone_pg.embedders import HashingEmbedder
from actrone_pg.stores import Store

MAX_TEXT = 400
CFG = MemoryConfig(backend="memory", embedding_provider="hashing", max_text_chars=MAX_TEXT)


@pytest.fixture
async def mm(store: Store) -> AsyncIterator[MemoryManager]:
    """One manager over a fresh store of each backend, shared by the examples of a test."""
    manager = await MemoryManager.create(CFG, store=store, embedder=HashingEmbedder(dimensions=64))
    yield manager


# -- strategies --
#
# Each argument has a clean strategy (values that must be accepted) and a wild one (values that
# may or may not be valid). An example makes at most one argument wild, so that the call fails,
# if it fails, because of that argument, and valid edge values get through to the store.

#: Every code point, lone surrogates, NUL and controls included.
ANY_CHAR = st.characters(codec=None, exclude_categories=())
#: Printable letters, digits and punctuation (what a sane id or label is made of).
SAFE_CHAR = st.characters(codec="utf-8", categories=("L", "N", "P", "S"))
#: Text as users write it, including newlines, tabs, emoji and other scripts.
TEXT_CHAR = st.characters(codec="utf-8", exclude_characters="\x00")


@dataclass(frozen=True)
class Arg:
    clean: st.SearchStrategy[Any]
    wild: st.SearchStrategy[Any]


@st.composite
def arguments(draw: st.DrawFn, **args: Arg) -> dict[str, tuple[Any, bool]]:
    """Each argument as (value, clean); at most one of them wild."""
    wild = draw(st.sampled_from([None, *args]))
    return {
        name: (draw(arg.wild), False) if name == wild else (draw(arg.clean), True)
        for name, arg in args.items()
    }


def optional(arg: Arg) -> Arg:
    return Arg(st.one_of(st.none(), arg.clean), arg.wild)


class Fresh(str):
    """An id suffix that the test body prefixes with a fresh UUID: examples never share ids."""


def ids() -> Arg:
    return Arg(
        st.text(SAFE_CHAR, max_size=40).map(Fresh),
        st.one_of(
            st.text(ANY_CHAR, max_size=v.MAX_ID_CHARS + 10),
            st.text(ANY_CHAR, min_size=1, max_size=8).map(Fresh),
            st.sampled_from([None, 5, b"bytes", " ", "x" * (v.MAX_ID_CHARS + 1)]),
        ),
    )


def texts(*, allow_empty: bool = False) -> Arg:
    return Arg(
        st.text(TEXT_CHAR, max_size=MAX_TEXT).filter(lambda t: allow_empty or bool(t.strip())),
        st.one_of(
            st.text(ANY_CHAR, max_size=MAX_TEXT + 20),
            st.text(ANY_CHAR, min_size=1, max_size=10).map(lambda t: "ok " + t),
        ),
    )


def labels() -> Arg:
    return Arg(
        st.text(SAFE_CHAR, min_size=1, max_size=v.MAX_LABEL_CHARS),
        st.text(ANY_CHAR, max_size=v.MAX_LABEL_CHARS + 5),
    )


def tag_lists() -> Arg:
    return Arg(
        st.lists(st.text(SAFE_CHAR, min_size=1, max_size=20), max_size=5),
        st.one_of(
            st.lists(st.text(ANY_CHAR, max_size=10), max_size=v.MAX_TAGS + 2),
            st.just("a-string-is-not-a-list"),
        ),
    )


EDGE_INTS = st.sampled_from(
    [0, 1, -1, v.MAX_INT, v.MAX_INT + 1, 2**53 + 1, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1]
)
EDGE_FLOATS = st.sampled_from([2.0**60, 1e16, -1e16, 9999999999999998.0, 1e23, 5e-324, -0.0])
#: JSON leaves that every backend stores and reads back exactly.
CLEAN_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=v.MIN_JSON_INT, max_value=v.MAX_JSON_INT),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(TEXT_CHAR, max_size=20),
)
WILD_LEAF = st.one_of(
    EDGE_INTS,
    EDGE_FLOATS,
    st.floats(),
    st.text(ANY_CHAR, max_size=10),
    st.sampled_from([b"x", {1, 2}, object()]),
)


def nested(depth: int) -> Any:
    """``depth`` lists and objects, alternating from an outermost object."""
    value: Any = 1
    for i in range(depth):
        value = {"k": value} if (depth - 1 - i) % 2 == 0 else [value]
    return value


def json_objects() -> Arg:
    def tree(leaf: st.SearchStrategy[Any], key: st.SearchStrategy[Any]) -> Any:
        return st.recursive(
            leaf,
            lambda inner: st.one_of(
                st.lists(inner, max_size=3), st.tuples(inner), st.dictionaries(key, inner)
            ),
            max_leaves=8,
        )

    clean_key = st.text(TEXT_CHAR, max_size=8)
    wild_key = st.one_of(st.text(ANY_CHAR, max_size=8), st.integers(), st.none())
    return Arg(
        st.dictionaries(clean_key, tree(CLEAN_LEAF, clean_key), max_size=4).filter(
            # within max_text_chars once encoded (with room for the list of tool_results)
            lambda d: len(json.dumps(d, ensure_ascii=False)) < MAX_TEXT - 2
        ),
        st.one_of(
            # mostly clean, with one wild leaf or key somewhere
            st.dictionaries(clean_key, tree(st.one_of(CLEAN_LEAF, WILD_LEAF), clean_key)),
            st.dictionaries(wild_key, tree(CLEAN_LEAF, wild_key), min_size=1, max_size=2),
            st.integers(min_value=v.MAX_JSON_DEPTH - 2, max_value=v.MAX_JSON_DEPTH + 2).map(nested),
            st.sampled_from([[1], "not a dict"]),
        ),
    )


def offsets() -> st.SearchStrategy[timezone]:
    return st.builds(
        timezone,
        st.timedeltas(
            min_value=timedelta(hours=-23, minutes=-59), max_value=timedelta(hours=23, minutes=59)
        ),
    )


def datetimes() -> Arg:
    edges = st.sampled_from([datetime.min, datetime.max, datetime(1970, 1, 1)])
    return Arg(
        st.one_of(
            st.none(),
            st.datetimes(min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31)).flatmap(
                lambda d: offsets().map(lambda tz: d.replace(tzinfo=tz))
            ),
            edges.map(lambda d: d.replace(tzinfo=UTC)),
        ),
        st.one_of(
            st.builds(lambda d, tz: d.replace(tzinfo=tz), edges, offsets()),
            st.datetimes(),
            st.just("2026-01-01T00:00:00Z"),
        ),
    )


def importances() -> Arg:
    return Arg(
        st.one_of(st.floats(min_value=0.0, max_value=1.0), st.sampled_from([0, 1])),
        st.one_of(st.floats(), EDGE_INTS, st.sampled_from([10**400, True, "0.5"])),
    )


def numbers(low: int, high: int) -> Arg:
    return Arg(
        st.one_of(st.integers(min_value=low, max_value=high), st.sampled_from([low, high])),
        st.one_of(EDGE_INTS, st.sampled_from([high + 1, 10**30, True]), st.floats()),
    )


# -- helpers --


def drawn(**values: tuple[Any, bool]) -> tuple[dict[str, Any], bool]:
    """The drawn values (fresh ids made unique) and whether all of them are clean."""
    out = {
        k: uuid.uuid4().hex[:8] + x if isinstance(x, Fresh) else x for k, (x, _) in values.items()
    }
    note(repr(out))
    return out, all(ok for _, ok in values.values())


def as_json(value: Any) -> Any:
    """``value`` as it reads back: JSON has arrays, not tuples."""
    if isinstance(value, (list, tuple)):
        return [as_json(x) for x in value]
    if isinstance(value, dict):
        return {k: as_json(x) for k, x in value.items()}
    return value


def valid_id(value: Any) -> bool:
    try:
        v.check_id("id", value)
    except ValidationError:
        return False
    return True


async def turn_ids(mm: MemoryManager, agent: Any, session: Any) -> list[str] | None:
    if not (valid_id(agent) and valid_id(session)):
        return None
    return [t.id for t in await mm.get_recent_turns(agent, session)]


# -- properties --


SURROGATE = "a\ud800b"


def case(clean: dict[str, Any], **wild: Any) -> Any:
    """An explicit example: ``clean`` arguments with ``wild`` ones replacing some."""
    return example(args={k: (wild[k], False) if k in wild else (x, True) for k, x in clean.items()})


def as_list(arg: Arg) -> Arg:
    """A JSON object as the one element of a list (tool_results)."""
    return Arg(arg.clean.map(lambda x: [x]), arg.wild.map(lambda x: [x]))


TURN = {"agent": Fresh(), "session": Fresh(), "user": "u", "assistant": "a", "results": None}
TURN |= {"turn_id": None}


@case(TURN, agent=SURROGATE)
@case(TURN, turn_id=SURROGATE)
@case(TURN, results=[2.0**60])
@case(TURN, results=[{"k": [SURROGATE]}])
@case(TURN, results=[2**63 - 1, -(2**63)])
@given(
    args=arguments(
        agent=ids(),
        session=ids(),
        user=texts(allow_empty=True),
        assistant=texts(),
        results=optional(as_list(json_objects())),
        turn_id=optional(ids()),
    )
)
async def test_store_turn_reads_back_or_writes_nothing(
    mm: MemoryManager, args: dict[str, tuple[Any, bool]]
) -> None:
    a, ok = drawn(**args)
    before = await turn_ids(mm, a["agent"], a["session"])
    try:
        turn = await mm.store_turn(
            a["agent"],
            a["session"],
            a["user"],
            a["assistant"],
            tool_results=a["results"],
            turn_id=a["turn_id"],
        )
    except ValidationError:
        assert not ok, "a clean turn was refused"
        assert await turn_ids(mm, a["agent"], a["session"]) == before
        return
    got = (await mm.get_recent_turns(a["agent"], a["session"]))[-1]
    assert got.id == turn.id
    assert (got.user_message, got.assistant_message) == (a["user"], a["assistant"])
    assert got.tool_results == as_json(a["results"])
    assert got.created_at == turn.created_at


MEMORY = {"agent": Fresh(), "content": "c", "session_id": None, "content_type": "t"}
MEMORY |= {"importance": 0.5, "tags": [], "source": "s", "created_at": None, "metadata": None}
MEMORY |= {"memory_id": None}


@case(MEMORY, memory_id=SURROGATE)
@case(MEMORY, tags=[SURROGATE])
@case(MEMORY, metadata={"f": 1e23})
@case(MEMORY, metadata={"f": 9999999999999998.0})
@case(MEMORY, metadata=nested(v.MAX_JSON_DEPTH))
@case(MEMORY, metadata=nested(v.MAX_JSON_DEPTH + 1))
@case(MEMORY, created_at=datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=5))))
@case(MEMORY, created_at=datetime(1, 1, 1, tzinfo=UTC))
@case(MEMORY, importance=10**400)
@given(
    args=arguments(
        agent=ids(),
        content=texts(),
        session_id=optional(ids()),
        content_type=labels(),
        importance=importances(),
        tags=tag_lists(),
        source=labels(),
        created_at=datetimes(),
        metadata=optional(json_objects()),
        memory_id=optional(ids()),
    )
)
async def test_inject_memory_reads_back_or_writes_nothing(
    mm: MemoryManager, args: dict[str, tuple[Any, bool]]
) -> None:
    a, ok = drawn(**args)
    agent, content = a.pop("agent"), a.pop("content")
    count = await mm.count_memories(agent) if valid_id(agent) else None
    try:
        mid = await mm.inject_memory(agent, content, **a)
    except ValidationError:
        assert not ok, "a clean memory was refused"
        if count is not None:
            assert await mm.count_memories(agent) == count
        return
    got = await mm.get_memory(agent, mid)
    assert got is not None
    assert (got.content, got.session_id) == (content, a["session_id"])
    assert (got.content_type, got.source) == (a["content_type"], a["source"])
    assert got.importance == a["importance"] and type(got.importance) is float
    assert got.tags == tuple(a["tags"])
    assert got.metadata == as_json(a["metadata"] or {})
    if a["created_at"] is not None:
        assert got.created_at == a["created_at"]


SESSION = {"agent": Fresh(), "session": Fresh(), "metadata": {}}


@case(SESSION, metadata={"f": 2.0**60})
@case(SESSION, metadata={"n": 2**63})
@case(SESSION, metadata={1: "x"})
@case(SESSION, metadata={SURROGATE: 1})
@given(args=arguments(agent=ids(), session=ids(), metadata=json_objects()))
async def test_session_metadata_reads_back_or_writes_nothing(
    mm: MemoryManager, args: dict[str, tuple[Any, bool]]
) -> None:
    a, ok = drawn(**args)
    valid = valid_id(a["agent"]) and valid_id(a["session"])
    try:
        await mm.set_session_metadata(a["agent"], a["session"], a["metadata"])
    except ValidationError:
        assert not ok, "clean metadata was refused"
        if valid:  # the ids are fresh: the session did not exist and still does not
            assert await mm.get_session(a["agent"], a["session"]) is None
        return
    info = await mm.get_session(a["agent"], a["session"])
    assert info is not None
    assert info.metadata == as_json(a["metadata"])


READ = {"agent": Fresh(), "session": Fresh(), "query": "q", "limit": 10, "budget": 100}


@case(READ, limit=2**31)
@case(READ, limit=2**63)
@case(READ, budget=10**30)
@case(READ, limit=v.MAX_INT)
@case(READ, query=SURROGATE)
@given(
    args=arguments(
        agent=ids(),
        session=ids(),
        query=texts(),
        limit=numbers(1, v.MAX_INT),
        budget=numbers(1, v.MAX_INT),
    )
)
async def test_reads_succeed_or_refuse_with_a_validation_error(
    mm: MemoryManager, args: dict[str, tuple[Any, bool]]
) -> None:
    a, ok = drawn(**args)
    calls = [
        mm.search_memories(a["agent"], a["query"], a["limit"]),
        mm.retrieve_context(a["agent"], a["session"], a["query"], a["budget"]),
        mm.get_recent_turns(a["agent"], a["session"], a["limit"]),
    ]
    for call in calls:
        try:
            await call
        except ValidationError:
            assert not ok, "a clean call was refused"


@case({"agent": Fresh(), "name": Fresh(), "ttl": 60}, ttl=1e300)
@case({"agent": Fresh(), "name": Fresh(), "ttl": 60}, ttl=v.MAX_TTL_SECONDS)
@given(
    args=arguments(
        agent=ids(),
        name=ids(),
        ttl=Arg(
            st.one_of(
                st.floats(min_value=0.001, max_value=v.MAX_TTL_SECONDS),
                st.sampled_from([v.MAX_TTL_SECONDS, 1]),
            ),
            st.one_of(
                st.floats(), EDGE_INTS, st.sampled_from([10**400, v.MAX_TTL_SECONDS + 1, 1e-300])
            ),
        ),
    )
)
async def test_locks_take_and_release_or_refuse(
    mm: MemoryManager, args: dict[str, tuple[Any, bool]]
) -> None:
    a, ok = drawn(**args)
    try:
        token = await mm.try_lock(a["agent"], a["name"], ttl_seconds=a["ttl"])
    except ValidationError:
        assert not ok, "a clean lock was refused"
        return
    assert token is not None
    if a["ttl"] >= 10:  # a shorter lock may lapse before the next line runs
        assert await mm.try_lock(a["agent"], a["name"], ttl_seconds=60) is None
        assert await mm.release_lock(a["agent"], token, a["name"])
    else:
        await mm.release_lock(a["agent"], token, a["name"])
