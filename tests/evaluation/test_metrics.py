"""The scores, on rankings small enough to work out by hand."""

from __future__ import annotations

import pytest

from actrone_pg.evaluation.metrics import (
    OVERALL,
    QueryResult,
    hit_at,
    recall_at,
    reciprocal_rank,
    score,
    session_recall_at,
)

RANKED = ("a", "b", "c", "d", "e", "f", "g", "h", "i", "j")


def test_recall_hit_and_reciprocal_rank() -> None:
    relevant = frozenset({"c", "g", "z"})
    assert recall_at(RANKED, relevant, 5) == pytest.approx(1 / 3)  # c
    assert recall_at(RANKED, relevant, 10) == pytest.approx(2 / 3)  # c, g; z never returned
    assert hit_at(RANKED, relevant, 5) == 1.0
    assert hit_at(RANKED, relevant, 2) == 0.0
    assert reciprocal_rank(RANKED, relevant) == pytest.approx(1 / 3)
    assert reciprocal_rank(RANKED, frozenset({"z"})) == 0.0
    assert reciprocal_rank((), relevant) == 0.0


def test_scores_per_category_and_overall() -> None:
    results = [
        QueryResult("c1", "single-hop", frozenset({"a"}), RANKED, 1.0),  # rr 1, r@5 1
        QueryResult("c1", "single-hop", frozenset({"f"}), RANKED, 2.0),  # rr 1/6, r@5 0, r@10 1
        QueryResult("c2", "multi-hop", frozenset({"b", "x"}), RANKED, 3.0),  # rr 1/2, r 1/2
    ]
    s = score(results)
    assert list(s) == ["multi-hop", "single-hop", OVERALL]
    single = s["single-hop"]
    assert single.questions == 2
    assert single.recall_at_5 == pytest.approx(0.5)
    assert single.recall_at_10 == pytest.approx(1.0)
    assert single.hit_at_5 == pytest.approx(0.5)
    assert single.mrr == pytest.approx((1 + 1 / 6) / 2)
    overall = s[OVERALL]
    assert overall.questions == 3
    assert overall.recall_at_10 == pytest.approx((1 + 1 + 0.5) / 3)
    assert overall.mrr == pytest.approx((1 + 1 / 6 + 1 / 2) / 3)
    assert s["multi-hop"].as_dict()["recall@5"] == pytest.approx(0.5)


def test_session_recall_counts_the_sessions_of_the_first_k() -> None:
    sessions = ("s1", "s1", "s2", None, "s3", "s4")
    assert session_recall_at(sessions, frozenset({"s2", "s4"}), 3) == 0.5  # s2 by rank 3
    assert session_recall_at(sessions, frozenset({"s2", "s4"}), 6) == 1.0
    assert session_recall_at(sessions, frozenset({"s9"}), 6) == 0.0
    assert session_recall_at(sessions, frozenset(), 6) == 0.0
    # A memory of an evidence session counts even if it is not an evidence turn.
    r = QueryResult(
        "c", "x", frozenset({"t9"}), ("a", "b"), 0.0,
        relevant_sessions=frozenset({"s2"}), ranked_sessions=("s1", "s2"),
    )  # fmt: skip
    s = score([r])[OVERALL]
    assert (s.recall_at_10, s.session_recall_at_5, s.session_recall_at_10) == (0.0, 1.0, 1.0)
    two = QueryResult(
        "c", "x", frozenset({"t9"}), ("a", "b"), 0.0,
        relevant_sessions=frozenset({"s2", "s7"}), ranked_sessions=("s1", "s2"),
    )  # fmt: skip
    both = score([two])[OVERALL]
    assert (both.session_recall_at_10, both.session_hit_at_10) == (0.5, 1.0)
    assert s.as_dict()["session_recall@10"] == 1.0
