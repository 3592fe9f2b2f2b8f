"""The reference ranking (spec §3), on cases worked out by hand."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest

from actrone_pg.ranking import (
    Candidate,
    CorpusStats,
    RankingParams,
    admit,
    bm25_score,
    idf,
    query_terms,
    rank,
    recency,
    share,
    tokenize,
)
from tests.factories import NOW


def cand(cid: str, cosine: float, bm25: float = 0.0, days: float = 0.0) -> Candidate[str]:
    return Candidate(
        id=cid, created_at=NOW - timedelta(days=days), cosine=cosine, bm25=bm25, item=cid
    )


def test_tokenize_is_lowercase_runs_of_letters_and_digits() -> None:
    assert tokenize("Don't e-mail me! Café_au_lait 42x") == [
        "don", "t", "e", "mail", "me", "café", "au", "lait", "42x",
    ]  # fmt: skip
    assert query_terms("cat & dog | cat:* !") == ["cat", "dog"]
    assert tokenize("!!! ()") == []


def test_idf_and_bm25_by_hand() -> None:
    stats = CorpusStats(n_docs=4, total_length=12, doc_freq={"coffee": 2, "tea": 1})
    assert idf(4, 2) == pytest.approx(math.log(1 + 2.5 / 2.5))
    # doc of length 3 (= avgdl), tf(coffee) = 1: idf * 1 * 2.2 / (1 + 1.2)
    assert bm25_score(["coffee"], {"coffee": 1}, 3, stats) == pytest.approx(math.log(2.0))
    # tf = 2, length 6 (twice avgdl): norm = 1.2 * (0.25 + 0.75 * 2) = 2.1
    expected = math.log(2.0) * 2 * 2.2 / (2 + 2.1)
    assert bm25_score(["coffee"], {"coffee": 2}, 6, stats) == pytest.approx(expected)
    assert bm25_score(["milk"], {"coffee": 1}, 3, stats) == 0.0


def test_rrf_worked_by_hand() -> None:
    # dense order a, b, c; lexical: only c and b share a term (c first); recency: c, b, a
    cands = [cand("a", 0.9, 0.0, days=3), cand("b", 0.8, 1.0, days=2), cand("c", 0.7, 2.0, days=1)]
    out = rank(cands, RankingParams(), NOW)
    got = {c.id: e for c, e in out}
    assert got["a"].fused_score == pytest.approx(1 / 61 + 1 / 63)
    assert got["b"].fused_score == pytest.approx(3 / 62)
    assert got["c"].fused_score == pytest.approx(1 / 63 + 1 / 61 + 1 / 61)
    assert got["a"].lexical_rank is None
    assert [c.id for c, _ in out] == ["c", "b", "a"]


def test_rrf_weights_and_k() -> None:
    cands = [cand("a", 0.9, 0.0, days=3), cand("b", 0.8, 1.0, days=2)]
    out = rank(cands, RankingParams(rrf_k=10, rrf_weights=(2.0, 1.0, 0.5)), NOW)
    got = {c.id: e.fused_score for c, e in out}
    assert got["a"] == pytest.approx(2 / 11 + 0.5 / 12)
    assert got["b"] == pytest.approx(2 / 12 + 1 / 11 + 0.5 / 11)


def test_ties_break_newer_first_then_id() -> None:
    cands = [cand("b", 0.5, days=1), cand("a", 0.5, days=1), cand("z", 0.5, days=0)]
    out = rank(cands, RankingParams(), NOW)
    assert [c.id for c, _ in out] == ["z", "a", "b"]
    assert [e.dense_rank for _, e in out] == [1, 2, 3]


def test_admission_at_exactly_the_threshold_and_the_limit() -> None:
    cands = [cand("a", 0.72), cand("b", 0.7199999), cand("c", 0.9), cand("d", 0.8)]
    assert [c.id for c in admit(cands, 0.72, 10)] == ["c", "d", "a"]
    assert [c.id for c in admit(cands, 0.72, 2)] == ["c", "d"]


def test_classic_blend_with_known_ages() -> None:
    p = RankingParams(hybrid=False, relevance_weight=0.7, recency_weight=0.3)
    cands = [cand("old", 1.0, days=30), cand("new", 0.6, days=0), cand("mid", 0.8, days=15)]
    out = rank(cands, p, NOW)
    assert [c.id for c, _ in out] == ["new", "mid", "old"]
    assert [e.fused_score for _, e in out] == pytest.approx([0.72, 0.71, 0.70])
    assert recency(NOW - timedelta(days=45), NOW) == 0.0
    assert recency(NOW + timedelta(days=1), NOW) == 1.0


@pytest.mark.parametrize(
    ("budget", "fraction", "expected"),
    [
        (100, 0.35, 35),
        (100, 0.29, 29),
        (1, 0.35, 0),
        (3, 0.35, 1),
        (20, 0.35, 7),
        (1000, 0.25, 250),
    ],
)
def test_shares_are_exact_floors(budget: int, fraction: float, expected: int) -> None:
    assert share(budget, fraction) == expected
