"""The in-memory store's vectorised filter equals :meth:`MemoryFilter.matches`, row by row.

Random memories (several embedders, expired ones, repeated tags, shared timestamps) and random
filters (empty tag lists, unknown labels, bounds equal to stored values, bounds in other time
zones) check the three places the filter index serves: the mask, the BM25 statistics of the
filtered set, and the store's filtered search and listing, which must equal an unfiltered search
over a store holding only the matching memories.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

from actrone_pg.pipeline import MemoryFilter
from actrone_pg.ranking import CorpusStats, query_terms, term_counts
from actrone_pg.stores._memory_index import FilterIndex
from actrone_pg.stores.base import MemoryRecord
from actrone_pg.stores.memory import InMemoryStore
from tests.factories import NOW, memory, request

WORDS = ("alpha", "beta", "gamma", "delta")
TAGS = ("a", "b", "c")
UNKNOWN = "zz"
TYPES = ("fact", "note")
SESSIONS = (None, "s1", "s2")
EMBEDDERS = ("e1", "e2")
# Few distinct instants, so that bounds often equal a memory's created_at; one apart by 1 µs.
TIMES = (
    NOW - timedelta(days=2),
    NOW - timedelta(days=1),
    NOW - timedelta(days=1, microseconds=1),
    NOW,
)
IMPORTANCES = (0.0, 0.25, 0.5, 1.0)
# Values that JSON containment tells apart or not: 1 and 1.0 are the same, true and 1 are not,
# "1" and 1 are not, null is a value; a scalar inside an object does not match an array holding it.
METADATA: tuple[dict[str, Any], ...] = (
    {},
    {"k": 1},
    {"k": 1.0, "n": {"a": 1, "b": "x"}},
    {"k": True},
    {"k": "1", "l": ["x", 1]},
    {"k": None},
    {"k": [1], "l": ["x"]},
    {"k": 2, "l": ["x", 1], "n": {"a": 2}},
)
ZONES = (UTC, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-8)))
# A vector's components are ±0.5 or 0 over 8 dimensions (four of them set): float32 products are
# exact, so cosines cannot differ with the size of the matrix they are computed in.
DIMS = 8


@st.composite
def records(draw: st.DrawFn) -> list[MemoryRecord]:
    """Up to 30 memories of one agent, unique ids."""
    n = draw(st.integers(0, 30))
    out = []
    for i in range(n):
        base = memory(
            "ag",
            f"m{i}",
            " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=5))),
            created_at=draw(st.sampled_from(TIMES)),
            embedder=draw(st.sampled_from(EMBEDDERS)),
            session_id=draw(st.sampled_from(SESSIONS)),
            tags=tuple(draw(st.lists(st.sampled_from(TAGS), max_size=4))),
            metadata=draw(st.sampled_from(METADATA)),
        )
        m = replace(
            base,
            content_type=draw(st.sampled_from(TYPES)),
            importance=draw(st.sampled_from(IMPORTANCES)),
            # expired at NOW (the search's and the listing's moment), later, or never
            expires_at=draw(st.sampled_from((None, NOW, NOW + timedelta(days=1)))),
        )
        vec = np.zeros(DIMS, dtype=np.float32)
        for j in draw(st.permutations(range(DIMS)))[:4]:
            vec[j] = draw(st.sampled_from((-0.5, 0.5)))
        out.append(MemoryRecord(memory=m, vector=vec))
    return out


def _labels(pool: tuple[str, ...]) -> st.SearchStrategy[tuple[str, ...]]:
    return st.lists(st.sampled_from((*pool, UNKNOWN)), max_size=3).map(tuple)


def _instant() -> st.SearchStrategy[datetime]:
    return st.builds(
        lambda t, zone, shift: (t + timedelta(microseconds=shift)).astimezone(zone),
        st.sampled_from(TIMES),
        st.sampled_from(ZONES),
        st.sampled_from((0, 0, -1, 1)),
    )


CONDITIONS: dict[str, st.SearchStrategy[Any]] = {
    "tags_any": _labels(TAGS),
    "tags_all": _labels(TAGS),
    "content_types": _labels(TYPES),
    "session_id": st.sampled_from(("s1", "s2", "s3")),
    "created_after": _instant(),
    "created_before": _instant(),
    "min_importance": st.sampled_from((*IMPORTANCES, 0.3)),
    "metadata": st.dictionaries(
        st.sampled_from(("k", "l", "n", "zz")),
        st.sampled_from((1, 1.0, 2, True, False, "1", None, ["x"], [1], [], {"a": 1}, {})),
        max_size=2,
    ),
}


@st.composite
def filters(draw: st.DrawFn) -> MemoryFilter:
    """One to three conditions (more would rarely leave a memory to check the statistics on)."""
    keys = draw(st.lists(st.sampled_from(sorted(CONDITIONS)), min_size=1, max_size=3, unique=True))
    return MemoryFilter(**{k: draw(CONDITIONS[k]) for k in keys})


def _edge_records() -> list[MemoryRecord]:
    """Every metadata value, instant, importance, session and tag set of the pools, in turn."""
    out = []
    for i in range(len(METADATA) * 3):
        m = replace(
            memory(
                "ag",
                f"e{i}",
                WORDS[i % len(WORDS)],
                created_at=TIMES[i % len(TIMES)],
                embedder=EMBEDDERS[i % 2],
                session_id=SESSIONS[i % len(SESSIONS)],
                tags=TAGS[: i % (len(TAGS) + 1)],
                metadata=METADATA[i % len(METADATA)],
            ),
            content_type=TYPES[i % len(TYPES)],
            importance=IMPORTANCES[i % len(IMPORTANCES)],
            expires_at=(None, NOW)[i % 2],
        )
        out.append(MemoryRecord(memory=m, vector=np.eye(DIMS, dtype=np.float32)[i % DIMS]))
    return out


#: Filters at the edges: empty lists, unknown labels, bounds equal to stored values, and
#: metadata values JSON containment tells apart (true and 1, "1" and 1) or not (1 and 1.0).
EDGE_FILTERS = [
    MemoryFilter(tags_any=()),
    MemoryFilter(tags_all=()),
    MemoryFilter(tags_all=(UNKNOWN,)),
    MemoryFilter(tags_any=(UNKNOWN, "b")),
    MemoryFilter(tags_all=("a", "b", "a")),
    MemoryFilter(content_types=()),
    MemoryFilter(content_types=(UNKNOWN, "note")),
    MemoryFilter(session_id="s3"),
    MemoryFilter(session_id="s2"),
    MemoryFilter(created_after=TIMES[1]),
    MemoryFilter(created_before=TIMES[1].astimezone(ZONES[1])),
    MemoryFilter(created_after=TIMES[2], created_before=TIMES[1]),
    MemoryFilter(min_importance=0.5),
    MemoryFilter(metadata={}),
    *(
        MemoryFilter(metadata={"k": v})
        for v in (1, 1.0, 2, True, False, "1", None, [1], [], {}, float("nan"))
    ),
    MemoryFilter(metadata={"n": {"a": 1}}),
    MemoryFilter(metadata={"l": [1]}),
    MemoryFilter(metadata={"l": 1}),
    MemoryFilter(metadata={"k": 1, "l": ["x"]}),
    MemoryFilter(tags_any=("a",), metadata={"k": 1, "n": {}}),
]


def _index(recs: list[MemoryRecord]) -> FilterIndex:
    return FilterIndex.build(
        [r.memory for r in recs], [term_counts(r.memory.content)[1] for r in recs]
    )


def _postings(recs: list[MemoryRecord]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for r in recs:
        for term, count in term_counts(r.memory.content)[0].items():
            out.setdefault(term, {})[r.memory.id] = count
    return out


# Each example checks many filters against one set of memories: a filter costs microseconds,
# building the memories is what an example costs.
MANY = st.lists(filters(), min_size=1, max_size=30)


@given(recs=records(), flts=MANY)
@example(recs=[], flts=[MemoryFilter(tags_any=())])
@example(recs=_edge_records(), flts=EDGE_FILTERS)
def test_mask_is_matches_row_by_row(recs: list[MemoryRecord], flts: list[MemoryFilter]) -> None:
    index = _index(recs)
    for flt in flts:
        assert index.mask(flt).tolist() == [flt.matches(r.memory) for r in recs], flt


@example(recs=_edge_records(), flts=EDGE_FILTERS, query=["alpha", "beta", "omega"])
@given(
    recs=records(),
    flts=MANY,
    query=st.lists(st.sampled_from((*WORDS, "omega")), min_size=1, max_size=4),
)
def test_stats_are_those_of_the_matching_memories(
    recs: list[MemoryRecord], flts: list[MemoryFilter], query: list[str]
) -> None:
    index = _index(recs)
    postings = _postings(recs)
    terms = query_terms(" ".join(query))
    for flt in flts:
        matching = [term_counts(r.memory.content) for r in recs if flt.matches(r.memory)]
        want = CorpusStats(
            len(matching),
            sum(length for _, length in matching),
            dict(Counter(t for tf, _ in matching for t in set(terms) if t in tf)),
        )
        got = index.stats(index.mask(flt), terms, postings)
        assert (got.n_docs, got.total_length, dict(got.doc_freq)) == (
            want.n_docs,
            want.total_length,
            want.doc_freq,
        ), flt
        assert type(got.n_docs) is int and type(got.total_length) is int


@given(
    recs=records(),
    flts=st.lists(filters(), min_size=1, max_size=5),
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
    embedder=st.sampled_from(EMBEDDERS),
    direction=st.permutations(range(DIMS)),
)
async def test_a_filtered_search_and_listing_equal_those_of_the_matching_memories(
    recs: list[MemoryRecord],
    flts: list[MemoryFilter],
    query: list[str],
    embedder: str,
    direction: list[int],
) -> None:
    """Every embedder's matching memories count in the statistics and expired ones until swept,
    as they do in an unfiltered search of a store that holds only them."""
    store = InMemoryStore()
    await store.upsert_memories(recs)
    vector = [0.0] * DIMS
    for j in direction[:4]:
        vector[j] = 0.5
    req = request("ag", " ".join(query), vector, threshold=-1.0, embedder=embedder)
    for flt in flts:
        subset = InMemoryStore()
        await subset.upsert_memories([r for r in recs if flt.matches(r.memory)])
        got = (await store.search(replace(req, filter=flt))).hits
        want = (await subset.search(req)).hits
        assert [h.memory.id for h in got] == [h.memory.id for h in want], flt
        assert [h.explain for h in got] == [h.explain for h in want], flt  # bit-identical
        listed = await store.list_memories("ag", now=NOW, limit=100, filter=flt)
        assert listed == await subset.list_memories("ag", now=NOW, limit=100), flt


async def test_the_index_is_rebuilt_after_every_write() -> None:
    recs = [
        MemoryRecord(
            memory=memory("ag", f"m{i}", "alpha", tags=("a",) if i else ()),
            vector=np.eye(DIMS, dtype=np.float32)[i],
        )
        for i in range(3)
    ]
    store = InMemoryStore()
    await store.upsert_memories(recs[:2])
    flt = MemoryFilter(tags_any=("a",))
    assert [m.id for m in await store.list_memories("ag", now=NOW, limit=9, filter=flt)] == ["m1"]
    await store.upsert_memories(recs[2:])
    listed = await store.list_memories("ag", now=NOW, limit=9, filter=flt)
    assert sorted(m.id for m in listed) == ["m1", "m2"]
    await store.delete_memory("ag", "m1")
    assert [m.id for m in await store.list_memories("ag", now=NOW, limit=9, filter=flt)] == ["m2"]
    req = request("ag", "alpha", [1.0] + [0.0] * (DIMS - 1), threshold=-1.0)
    assert [h.memory.id for h in (await store.search(replace(req, filter=flt))).hits] == ["m2"]
