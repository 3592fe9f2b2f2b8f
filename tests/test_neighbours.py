"""A memory rises with the one written just before it in its session (``neighbour_weight``)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from actrone_pg.config import MemoryConfig
from actrone_pg.manager import MemoryManager
from actrone_pg.models import Explain, ScoredMemory
from actrone_pg.pipeline import NEIGHBOUR_POOL, inherit_from_predecessors
from tests.factories import NOW, memory
from tests.helpers import FixedEmbedder


def hit(memory_id: str, score: float, seconds: int, session: str | None = "s") -> ScoredMemory:
    m = memory("a", memory_id, memory_id, created_at=NOW + timedelta(seconds=seconds))
    m = replace(m, session_id=session)
    return ScoredMemory(m, Explain(0.5, 1, None, 1, score))


def ids(hits: list[ScoredMemory]) -> list[str]:
    return [h.memory.id for h in hits]


def test_a_hit_scores_at_least_the_weighted_score_of_its_predecessor() -> None:
    # q (the question turn, 0.080) was written just before its answer a (0.050): 0.9 × 0.080 =
    # 0.072 lifts a over x (0.060). x, in another session, lifts nothing; the hit after a in
    # its session (b, 0.010) inherits from a's own 0.050 (0.045), not from what a inherited.
    hits = [
        hit("q", 0.080, 1),
        hit("x", 0.060, 0, session="t"),
        hit("a", 0.050, 2),
        hit("b", 0.010, 3),
    ]
    out = inherit_from_predecessors(hits, 0.9)
    assert ids(out) == ["q", "a", "x", "b"]
    lifted = {h.memory.id: h.explain.neighbour_score for h in out}
    assert lifted == {"q": None, "a": 0.9 * 0.080, "x": None, "b": 0.9 * 0.050}
    assert out[1].explain.fused_score == 0.050  # the fused score stays what the fusion gave


def test_no_session_no_weight_or_a_lower_lift_changes_nothing() -> None:
    hits = [hit("q", 0.080, 1, session=None), hit("a", 0.050, 2, session=None)]
    assert ids(inherit_from_predecessors(hits, 0.9)) == ["q", "a"]
    same = [hit("q", 0.080, 1), hit("x", 0.075, 0, session="t"), hit("a", 0.050, 2)]
    assert ids(inherit_from_predecessors(same, 0.0)) == ["q", "x", "a"]
    # 0.9 × 0.080 = 0.072 < 0.075: a rises to 0.072 but stays under x.
    out = inherit_from_predecessors(same, 0.9)
    assert ids(out) == ["q", "x", "a"]
    assert out[2].explain.neighbour_score == 0.9 * 0.080


def test_equal_scores_break_ties_newer_first_then_by_id() -> None:
    # With weight 1 the answer equals its predecessor and, newer, goes first.
    hits = [hit("q", 0.080, 1), hit("a", 0.050, 2)]
    assert ids(inherit_from_predecessors(hits, 1.0)) == ["a", "q"]
    # Written at the same moment: the smaller id is the predecessor.
    same_time = [hit("m2", 0.050, 5), hit("m1", 0.080, 5)]
    out = inherit_from_predecessors(same_time, 0.9)
    assert [h.explain.neighbour_score for h in out] == [None, 0.9 * 0.080]


VECTORS = {
    "Did you finish the painting of the lake?": [1.0, 0.0, 0.0, 0.0],
    "Yes, last week, it took a month.": [0.6, 0.8, 0.0, 0.0],
    "Our cottage is rented out in summer.": [0.8, 0.0, 0.6, 0.0],
    "How long did the painting of the lake take?": [1.0, 0.0, 0.0, 0.0],
}


async def _search(weight: float) -> list[str]:
    config = MemoryConfig.from_env({}, neighbour_weight=weight, relevance_threshold=0.5)
    mm = await MemoryManager.create(config, embedder=FixedEmbedder(VECTORS))
    try:
        texts = list(VECTORS)[:3]
        await mm.inject_memories(
            "a",
            [
                {
                    "content": text,
                    "memory_id": f"m{i}",
                    "session_id": "s2" if i == 2 else "s1",
                    "created_at": NOW + timedelta(seconds=i),
                }
                for i, text in enumerate(texts)
            ],
        )
        return [m.id for m in await mm.search_memories("a", list(VECTORS)[3], limit=2)]
    finally:
        await mm.close()


async def test_the_answer_rises_with_the_question_it_answers() -> None:
    # Fused (weights 1, 4, 0.1; k = 60): m0 1/61 + 4/61 + 0.1/63 = 0.0836 (nearest, shares
    # "paint", "lake", ...); the cottage m2 1/62 + 0.1/61 = 0.0178 (cosine 0.8, no shared term);
    # the answer m1 1/63 + 0.1/62 = 0.0175. Lifted by m0, its predecessor: 0.9 × 0.0836.
    assert await _search(0.0) == ["m0", "m2"]
    assert await _search(0.9) == ["m0", "m1"]


async def test_a_budget_holding_more_than_the_pool_gets_every_memory() -> None:
    n = NEIGHBOUR_POOL + 30
    same = {f"note {i} about tea": [1.0, 0.0, 0.0, 0.0] for i in range(n)} | {"tea": [1.0, 0, 0, 0]}
    config = MemoryConfig.from_env({}, relevance_threshold=0.5)
    mm = await MemoryManager.create(config, embedder=FixedEmbedder(same))
    try:
        await mm.inject_memories(
            "a",
            [
                {
                    "content": f"note {i} about tea",
                    "memory_id": f"m{i:03d}",
                    "session_id": "s1",
                    "created_at": NOW + timedelta(seconds=i),
                }
                for i in range(n)
            ],
        )
        ctx = await mm.retrieve_context("a", "s9", "tea", token_budget=1_000_000)
        assert len(ctx.episodic_memories) == n
        assert ctx.candidates_considered == n
        found = await mm.search_memories("a", "tea", limit=n)
        assert [m.id for m in ctx.episodic_memories] == [m.id for m in found]
    finally:
        await mm.close()


def test_hits_searched_without_explanations_cannot_be_lifted_or_reranked() -> None:
    # SearchRequest.explain=False leaves each hit's explain None; the manager asks for them
    # whenever it lifts or reranks, and a caller that did not gets a clear error.
    import pytest

    from actrone_pg.pipeline import explanation, rerank

    bare = [replace(hit("q", 0.08, 1), explain=None), replace(hit("a", 0.05, 2), explain=None)]
    assert explanation(hit("q", 0.08, 1)).fused_score == 0.08
    with pytest.raises(ValueError, match="without their explanations"):
        inherit_from_predecessors(bare, 0.9)
    with pytest.raises(ValueError, match="without their explanations"):
        rerank(bare, [0.1, 0.2])
