"""The decoder of ``retrieve()``'s rows (``rows.retrieved``), alone: no server.

Rows are given as psycopg returns them for a binary result (tuples; arrays as lists, timestamps
aware), with their column names; every column is read by its name, so the same rows with their
columns in another order decode to the same records.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from actrone_pg.models import Explain, Memory, Turn

pytest.importorskip("psycopg")
from actrone_pg.stores.postgres import rows  # noqa: E402

# retrieve()'s columns, in the order the function returns them.
_COLUMNS = (
    "kind candidates_considered cosine bm25 ranks fused_score id session_id content content_type"
    " importance tags source sensitivity created_at metadata embedder token_count expires_at"
    " source_turn_ids version valid_from valid_to user_message assistant_message tool_results"
).split()
_PLUS_TWO = timezone(timedelta(hours=2))
_T1 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
_T2 = datetime(2026, 5, 2, 14, 30, tzinfo=_PLUS_TWO)  # 12:30 UTC


def _row(**values: Any) -> tuple[Any, ...]:
    return tuple(values.get(name) for name in _COLUMNS)


_TURNS = [  # newest first, as retrieve() returns them
    _row(kind="turn", id="t2", created_at=_T2, token_count=9, user_message="u2",
         assistant_message="a2", tool_results=[{"tool": "x"}]),
    _row(kind="turn", id="t1", created_at=_T1, token_count=5, user_message="u1",
         assistant_message="a1"),
]  # fmt: skip
_MEMORIES = [
    _row(kind="memory", candidates_considered=12, cosine=0.9, bm25=2.5, ranks=[1, 2, 3],
         fused_score=0.05, id="m1", session_id="s", content="green tea", content_type="fact",
         importance=0.5, tags=["drink", "tea"], source="injected", sensitivity="normal",
         created_at=_T2, metadata="{}", embedder="e", token_count=3, expires_at=None,
         source_turn_ids=[], version=1, valid_from=_T1, valid_to=None),
    _row(kind="memory", candidates_considered=12, cosine=0.7, bm25=0.0, ranks=[2, 0, 1],
         fused_score=0.04, id="m2", session_id=None, content="coffee", content_type="note",
         importance=1.0, tags=[], source="consolidated", sensitivity="pii",
         created_at=_T1, metadata='{"k": [1, "two"]}', embedder="e", token_count=4,
         expires_at=_T2, source_turn_ids=["t1", "t2"], version=3, valid_from=_T2,
         valid_to=None),
]  # fmt: skip

_EXPECTED_TURNS = [
    Turn("t1", "agent", "sess", "u1", "a1", None, _T1, 5),
    Turn("t2", "agent", "sess", "u2", "a2", [{"tool": "x"}], _T2.astimezone(UTC), 9),
]
_EXPECTED_MEMORIES = [
    Memory("m1", "agent", "s", "green tea", "fact", 0.5, ("drink", "tea"), "injected", "normal",
           _T2.astimezone(UTC), {}, "e", 3, None, (), 1, _T1, None),
    Memory("m2", "agent", None, "coffee", "note", 1.0, (), "consolidated", "pii", _T1,
           {"k": [1, "two"]}, "e", 4, _T2.astimezone(UTC), ("t1", "t2"), 3, _T2.astimezone(UTC),
           None),
]  # fmt: skip
# Rank 0 and BM25 0 mean "absent from that ranking".
_EXPECTED_EXPLAINS = [
    Explain(cosine=0.9, dense_rank=1, lexical_rank=2, recency_rank=3, fused_score=0.05, bm25=2.5),
    Explain(cosine=0.7, dense_rank=2, lexical_rank=None, recency_rank=1, fused_score=0.04),
]


def _check(turns: list[Turn], packed: Any, *, with_turns: bool) -> None:
    assert turns == (_EXPECTED_TURNS if with_turns else [])
    assert [h.memory for h in packed.hits] == _EXPECTED_MEMORIES
    assert [h.explain for h in packed.hits] == _EXPECTED_EXPLAINS
    assert packed.candidates_considered == 12 and packed.tokens == 3 + 4
    for t in turns:
        assert t.created_at.tzinfo is UTC
    for m in (h.memory for h in packed.hits):
        assert m.created_at.tzinfo is UTC and m.valid_from is not None
        assert m.valid_from.tzinfo is UTC


def test_turns_oldest_first_and_memories_in_rank_order() -> None:
    turns, packed = rows.retrieved("agent", "sess", _COLUMNS, _TURNS + _MEMORIES)
    _check(turns, packed, with_turns=True)


def test_columns_are_read_by_name_in_any_order() -> None:
    order = list(reversed(range(len(_COLUMNS))))
    columns = [_COLUMNS[i] for i in order]
    found = [tuple(r[i] for i in order) for r in _TURNS + _MEMORIES]
    turns, packed = rows.retrieved("agent", "sess", columns, found)
    _check(turns, packed, with_turns=True)


def test_without_a_session_every_row_is_the_search() -> None:
    turns, packed = rows.retrieved("agent", None, _COLUMNS, _MEMORIES)
    _check(turns, packed, with_turns=False)


def test_no_hit_still_says_how_many_candidates_were_ranked() -> None:
    # retrieve() returns one row without an id when nothing fits: its count is still read.
    empty = _row(kind="memory", candidates_considered=7)
    turns, packed = rows.retrieved("agent", "sess", _COLUMNS, [_TURNS[1], empty])
    assert turns == [_EXPECTED_TURNS[0]]
    assert packed.hits == [] and packed.candidates_considered == 7 and packed.tokens == 0


@pytest.mark.parametrize("expected", _EXPECTED_MEMORIES + _EXPECTED_TURNS)
def test_records_are_what_the_constructor_makes(expected: Memory | Turn) -> None:
    # The decoder makes its records without the frozen constructor (rows._Records): the same
    # class, the same fields, still frozen, pickled and copied as the constructor's.
    import copy
    import dataclasses
    import pickle

    cls = type(expected)
    values = [getattr(expected, f.name) for f in dataclasses.fields(cls)]
    (made,) = rows._Records(cls)(*[[v] for v in values])
    assert type(made) is cls and made == cls(*values) == expected
    assert [getattr(made, f.name) for f in dataclasses.fields(cls)] == values
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.id = "other"  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(made)) == expected
    assert dataclasses.replace(made, id="x") == dataclasses.replace(expected, id="x")
    assert copy.deepcopy(made) == expected and repr(made) == repr(expected)


def test_timestamps_already_in_utc_are_kept_as_they_are() -> None:
    # The store's connections read timestamps in UTC: each is returned itself (as astimezone
    # would return it), and a column with any other zone is converted value by value.
    utc = [_T1, None, _T1]
    assert rows._in_utc(utc) is utc
    mixed = [_T1, None, _T2]
    assert rows._in_utc(mixed) == [_T1, None, _T2.astimezone(UTC)]
    assert all(v is None or v.tzinfo is UTC for v in rows._in_utc(mixed))


def test_records_refuse_a_class_with_post_init() -> None:
    import dataclasses

    @dataclasses.dataclass(frozen=True, slots=True)
    class Checked:
        a: int

        def __post_init__(self) -> None:
            pass

    with pytest.raises(TypeError, match="__post_init__"):
        rows._Records(Checked)


def test_without_explanations_the_same_records_and_no_explain() -> None:
    turns, packed = rows.retrieved("agent", "sess", _COLUMNS, _TURNS + _MEMORIES, explain=False)
    assert turns == _EXPECTED_TURNS
    assert [h.memory for h in packed.hits] == _EXPECTED_MEMORIES
    assert [h.explain for h in packed.hits] == [None, None]
    assert packed.candidates_considered == 12 and packed.tokens == 3 + 4
