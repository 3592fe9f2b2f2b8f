"""The ranking pipeline (docs/retrieval.md), on cases worked out by hand."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta

import numpy as np
import numpy.typing as npt
import pytest

from actrone_pg.budget import share
from actrone_pg.pipeline import Candidates, PackedSearch, rerank, search
from actrone_pg.ranking import (
    CorpusStats,
    RankingParams,
    bm25,
    code_point_ranks,
    idf,
    micros,
    nearest_first,
    query_terms,
    tokenize,
)
from tests.factories import NOW, memory, request

STATS = CorpusStats(n_docs=10, total_length=30, doc_freq={"milk": 3})


def run(
    rows: Sequence[tuple[str, float, int, float]],
    params: RankingParams | None = None,
    *,
    threshold: float = 0.0,
    limit: int = 500,
    budget: int | None = None,
    max_hits: int | None = None,
) -> PackedSearch:
    """The pipeline over ``(id, cosine, tf of "milk", age in days)`` rows of 3 tokens each."""
    ids = [r[0] for r in rows]
    created = [NOW - timedelta(days=r[3]) for r in rows]

    def tf(
        idx: npt.NDArray[np.intp], terms: Sequence[str]
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        counts = [[float(rows[i][2]) if t == "milk" else 0.0 for i in idx] for t in terms]
        return np.array(counts).reshape(len(terms), idx.size), np.full(idx.size, 3.0)

    candidates = Candidates(
        cosine=np.array([r[1] for r in rows], dtype=np.float64),
        created_us=np.array([micros(t) for t in created], dtype=np.int64),
        id_order=code_point_ranks(ids),
        tokens=np.full(len(rows), 10, dtype=np.int64),
        term_frequencies=tf,
        memories=lambda at: [memory("ag", ids[i], "x" * 40, created_at=created[i]) for i in at],
    )
    req = request("ag", "milk", [1, 0], threshold=threshold, limit=limit, params=params)
    return search(replace(req, budget=budget, max_hits=max_hits), candidates, STATS)


def test_tokenize_is_lowercase_runs_of_letters_and_digits() -> None:
    assert tokenize("Don't e-mail me! Café_au_lait 42x") == [
        "don", "t", "e", "mail", "me", "café", "au", "lait", "42x",
    ]  # fmt: skip
    assert query_terms("cat & dog | cat:* !") == ["cat", "dog"]
    assert tokenize("!!! ()") == []


def test_idf_and_bm25_by_hand() -> None:
    stats = CorpusStats(n_docs=4, total_length=12, doc_freq={"milk": 2, "tea": 1})
    assert idf(4, 2) == pytest.approx(math.log(1 + 2.5 / 2.5))
    # doc 0 of length 3 (= avgdl), tf(coffee) = 1: idf * 1 * 2.2 / (1 + 1.2)
    # doc 1: tf = 2, length 6 (twice avgdl): norm = 1.2 * (0.25 + 0.75 * 2) = 2.1
    # doc 2: no query term
    got = bm25(np.array([[1.0, 2.0, 0.0]]), np.array([3.0, 6.0, 3.0]), [2], stats, 1.2, 0.75)
    expected = [math.log(2.0), math.log(2.0) * 2 * 2.2 / (2 + 2.1), 0.0]
    assert got.tolist() == pytest.approx(expected)


def test_rrf_worked_by_hand() -> None:
    # dense order a, b, c; lexical: only c and b share a term (c first); recency: c, b, a
    out = run([("a", 0.9, 0, 3), ("b", 0.8, 1, 2), ("c", 0.7, 2, 1)])
    got = {h.memory.id: h.explain for h in out.hits}
    assert got["a"].fused_score == pytest.approx(1 / 61 + 1 / 63)
    assert got["b"].fused_score == pytest.approx(3 / 62)
    assert got["c"].fused_score == pytest.approx(1 / 63 + 1 / 61 + 1 / 61)
    assert got["a"].lexical_rank is None and got["a"].bm25 is None
    assert got["c"].lexical_rank == 1 and got["b"].lexical_rank == 2
    assert [h.memory.id for h in out.hits] == ["c", "b", "a"]


def test_rrf_weights_and_k() -> None:
    out = run(
        [("a", 0.9, 0, 3), ("b", 0.8, 1, 2)], RankingParams(rrf_k=10, rrf_weights=(2, 1, 0.5))
    )
    got = {h.memory.id: h.explain.fused_score for h in out.hits}
    assert got["a"] == pytest.approx(2 / 11 + 0.5 / 12)
    assert got["b"] == pytest.approx(2 / 12 + 1 / 11 + 0.5 / 11)


def test_ties_break_newer_first_then_id() -> None:
    out = run([("b", 0.5, 0, 1), ("a", 0.5, 0, 1), ("z", 0.5, 0, 0)])
    assert [h.memory.id for h in out.hits] == ["z", "a", "b"]
    assert [h.explain.dense_rank for h in out.hits] == [1, 2, 3]


def test_admission_at_exactly_the_threshold_and_the_limit() -> None:
    rows = [("a", 0.72, 0, 0), ("b", 0.7199999, 0, 0), ("c", 0.9, 0, 0), ("d", 0.8, 0, 0)]
    p = RankingParams(hybrid=False, relevance_weight=1.0, recency_weight=0.0)
    assert [h.memory.id for h in run(rows, p, threshold=0.72).hits] == ["c", "d", "a"]
    assert [h.memory.id for h in run(rows, p, threshold=0.72, limit=2).hits] == ["c", "d"]
    assert run(rows, p, threshold=0.95) == PackedSearch(hits=[], candidates_considered=0, tokens=0)


def test_classic_blend_with_known_ages() -> None:
    p = RankingParams(hybrid=False, relevance_weight=0.7, recency_weight=0.3)
    out = run(
        [("old", 1.0, 1, 30), ("new", 0.6, 0, 0), ("mid", 0.8, 0, 15), ("gone", 0.9, 0, 45)], p
    )
    assert [h.memory.id for h in out.hits] == ["new", "mid", "old", "gone"]
    assert [h.explain.fused_score for h in out.hits] == pytest.approx([0.72, 0.71, 0.70, 0.63])
    assert all(h.explain.lexical_rank is None for h in out.hits)  # no lexical channel


def test_packing_takes_what_fits_in_rank_order() -> None:
    rows = [("a", 0.9, 0, 0), ("b", 0.8, 0, 0), ("c", 0.7, 0, 0)]  # 10 tokens each
    out = run(rows, RankingParams(hybrid=False), budget=25)
    assert ([h.memory.id for h in out.hits], out.candidates_considered, out.tokens) == (
        ["a", "b"],
        3,
        20,
    )
    best = run(rows, RankingParams(hybrid=False), max_hits=1)
    assert ([h.memory.id for h in best.hits], best.candidates_considered, best.tokens) == (
        ["a"],
        3,
        10,
    )


def test_rerank_orders_by_score_and_keeps_fused_order_on_ties() -> None:
    hits = run([("a", 0.9, 0, 0), ("b", 0.8, 0, 0), ("c", 0.7, 0, 0)], RankingParams()).hits
    out = rerank(hits, [0.1, 0.5, 0.1])
    assert [h.memory.id for h in out] == ["b", "a", "c"]
    assert [h.explain.rerank_score for h in out] == [0.5, 0.1, 0.1]
    assert out[1].explain.fused_score == hits[0].explain.fused_score


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


def test_question_words_leave_a_query_but_never_all_of_it() -> None:
    from actrone_pg.ranking import QUESTION_WORDS, query_terms

    query = "What did Ana paint, and when was it?"
    assert query_terms(query) == ["what", "did", "ana", "paint", "and", "when", "was", "it"]
    assert query_terms(query, drop_question_words=True) == ["ana", "paint", "and", "it"]
    assert query_terms("Who is who?", drop_question_words=True) == ["who", "is"]  # all of it
    assert query_terms("Did she move in May?", drop_question_words=True) == [
        "she",
        "move",
        "in",
        "may",
    ]
    # Dropped before stemming: "does" is not left behind as its stem "doe".
    assert query_terms("Where does Ben run?", "english", drop_question_words=True) == ["ben", "run"]
    assert {"what", "did", "was", "when"} <= QUESTION_WORDS and "may" not in QUESTION_WORDS


def test_a_channel_added_later_is_off_for_weights_written_before_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A test-only optional channel appended (docs/architecture.md, "A new ranking channel"): a
    # list of the weights before it ranks as before, one more brings it in, another is refused.
    from actrone_pg import config as config_module
    from actrone_pg import ranking
    from actrone_pg.config import MemoryConfig
    from actrone_pg.errors import ConfigurationError

    rng = np.random.default_rng(7)
    n = 40
    inputs = (
        np.arange(n, dtype=np.int64),
        rng.integers(0, 5, n).astype(np.int64) * 1_000_000,  # ties in age
        np.round(rng.uniform(0.3, 0.9, n), 2),  # ties in cosine
        np.where(rng.uniform(size=n) < 0.5, rng.uniform(0.1, 3.0, n), 0.0),
    )
    weights = ranking.full_weights(ranking.DEFAULT_RRF_WEIGHTS)  # every channel of today
    before = ranking.rank_arrays(*inputs, RankingParams(rrf_weights=weights), NOW)

    def id_descending(
        values: dict[str, npt.NDArray[np.int64]], recent: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.int64]:
        order = np.argsort(-values["id_order"], kind="stable")
        ranks = np.zeros(recent.size, dtype=np.int64)
        ranks[order] = np.arange(1, recent.size + 1)
        return ranks

    extra = ranking.Channel("test_only", id_descending, weight=0.0, optional=True)
    channels = (*ranking.CHANNELS, extra)
    monkeypatch.setattr(ranking, "CHANNELS", channels)
    monkeypatch.setattr(config_module, "CHANNELS", channels)
    least = ranking.required_weights()
    assert ranking.full_weights(weights) == (*weights, 0.0)

    same = ranking.rank_arrays(*inputs, RankingParams(rrf_weights=weights), NOW)
    assert same.order.tolist() == before.order.tolist()
    assert same.score.tolist() == before.score.tolist()  # adding 0.0 changes no bit
    assert sorted(same.ranks["test_only"].tolist()) == list(range(1, n + 1))
    on = ranking.rank_arrays(*inputs, RankingParams(rrf_weights=(*weights, 2.0)), NOW)
    assert on.score.tolist() != before.score.tolist()

    assert MemoryConfig(rrf_weights=weights).rrf_weights == weights
    assert MemoryConfig(rrf_weights=(*weights, 2.0)).rrf_weights == (*weights, 2.0)
    refused = rf"{least} to {len(channels)} weights .*\[, test_only\]"
    for wrong in (weights[: least - 1], (*weights, 2.0, 1.0)):
        with pytest.raises(ConfigurationError, match=refused):
            MemoryConfig(rrf_weights=wrong)
    # Off by default: its weight of 0 leaves MemoryConfig's default as it was.
    assert ranking._without_optional_zeros((*weights, 0.0)) == ranking.DEFAULT_RRF_WEIGHTS


def test_nearest_first_is_the_three_key_order_on_ties() -> None:
    # The fast path sorts on the cosine alone; with equal cosines (±0 among them) it must fall
    # back to the three keys, on the whole array and on a subset given by ``among``.
    rng = np.random.default_rng(5)
    for trial in range(2000):
        n = int(rng.integers(0, 30))
        limit = int(rng.integers(1, 35))
        pool = [0.1, 0.3, -0.0, 0.0, 0.5] if trial % 2 else [float(x) for x in rng.random(50)]
        cos = rng.choice(pool, size=n)
        created = rng.integers(0, 4, n)
        ids = rng.permutation(n).astype(np.int64)
        want = np.lexsort((ids, -created, -cos))[:limit]
        assert nearest_first(cos, created, ids, limit).tolist() == want.tolist()
        among = np.flatnonzero(rng.random(n) < 0.6)
        sub = np.lexsort((ids[among], -created[among], -cos[among]))[:limit]
        got = nearest_first(cos, created, ids, limit, among=among)
        assert got.tolist() == among[sub].tolist()
