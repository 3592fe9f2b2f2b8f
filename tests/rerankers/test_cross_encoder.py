"""The cross-encoder reranker, on a tiny ONNX cross-encoder whose scores are known by hand.

No cross-encoder weights are reachable on the build machine, so these tests check the mechanics
(what is scored, in what order, where the budget applies) rather than the quality of a model.
The tiny model scores a pair as the sum of ``WEIGHTS`` over the words of the memory.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from actrone_pg import MemoryConfig, MemoryManager, MissingDependencyError, ModelNotAvailableError
from actrone_pg.embedders import HashingEmbedder
from actrone_pg.rerankers import CrossEncoderReranker, create_reranker
from tests.models import WEIGHTS, build_tiny_cross_encoder, cross_encoder_score, hub_cache_layout

BASE = MemoryConfig(backend="memory", embedding_provider="hashing", relevance_threshold=0.01)
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)

# Every memory shares "user" with the query, so hashing admits all of them; the tiny model gives
# them the scores in the comments (sum of WEIGHTS over their words).
MEMORIES = [
    "user likes jazz",  # 1.0
    "user likes coffee",  # 2.0
    "user lives in lisbon",  # 0.5
    "user is allergic to peanuts",  # 8.0
    "user a b c d",  # 0.0
]


async def test_scores_are_the_hand_computed_sums(tiny_cross_encoder_dir: Path) -> None:
    rr = CrossEncoderReranker.from_directory(tiny_cross_encoder_dir)
    texts = ["user likes jazz", "peanuts coffee", "nothing known here"]
    assert await rr.score("peanuts jazz coffee", texts) == [1.0, 7.0, 0.0]
    # Only the memory's tokens count, not the query's (token type 1 only).
    assert await rr.score("peanuts", ["a"]) == [0.0]
    assert await rr.score("q", []) == []
    assert [cross_encoder_score(t) for t in texts] == [1.0, 7.0, 0.0]


async def _manager(tmp_dir: Path, **overrides: object) -> MemoryManager:
    cfg = BASE.replace(rerank_enabled=True, rerank_model=str(tmp_dir), **overrides)
    mm = await MemoryManager.create(cfg)
    for i, content in enumerate(MEMORIES):
        # Older memories first, so recency alone would rank the last one highest.
        await mm.inject_memory("agent", content, created_at=NOW - timedelta(hours=10 - i))
    return mm


async def _fused_order(**overrides: object) -> list[str]:
    mm = await MemoryManager.create(BASE.replace(**overrides))
    for i, content in enumerate(MEMORIES):
        await mm.inject_memory("agent", content, created_at=NOW - timedelta(hours=10 - i))
    hits = await mm.search_memories("agent", "user", limit=10)
    await mm.close()
    return [h.content for h in hits]


async def test_only_the_top_k_are_reranked_and_ordered_by_score(
    tiny_cross_encoder_dir: Path,
) -> None:
    fused = await _fused_order()
    assert sorted(fused) == sorted(MEMORIES)
    mm = await _manager(tiny_cross_encoder_dir, rerank_top_k=3)
    assert isinstance(mm.reranker, CrossEncoderReranker)
    hits = await mm.search_memories("agent", "user", limit=10, explain=True)
    top3 = fused[:3]
    want = sorted(top3, key=lambda t: -cross_encoder_score(t))
    assert [h.content for h in hits] == want
    for h in hits:
        assert h.explain is not None
        assert h.explain.rerank_score == cross_encoder_score(h.content)
    await mm.close()


async def test_budget_is_applied_after_reranking(tiny_cross_encoder_dir: Path) -> None:
    mm = await _manager(tiny_cross_encoder_dir, rerank_top_k=5)
    # Each memory is 4-7 tokens (ceil(len / 4)); an episodic share of 10 tokens (budget 40 x 0.25)
    # holds the two best by rerank score: peanuts (7 tokens) is first, then what still fits.
    ctx = await mm.retrieve_context("agent", "s", "user", token_budget=40, explain=True)
    assert ctx.episodic_budget == 10
    contents = [m.content for m in ctx.episodic_memories]
    assert contents[0] == "user is allergic to peanuts"
    by_score = sorted(MEMORIES, key=lambda t: -cross_encoder_score(t))
    packed, used = [], 0
    for text in by_score:
        tokens = -(-len(text) // 4)
        if used + tokens <= 10:
            packed.append(text)
            used += tokens
    assert contents == packed
    assert all(m.explain and m.explain.rerank_score is not None for m in ctx.episodic_memories)
    await mm.close()


async def test_a_reranker_passed_to_create_is_used_as_is(tiny_cross_encoder_dir: Path) -> None:
    given = CrossEncoderReranker.from_directory(tiny_cross_encoder_dir)
    cfg = BASE.replace(rerank_enabled=True, rerank_model="acme/not-in-any-cache")
    mm = await MemoryManager.create(cfg, reranker=given)
    assert mm.reranker is given
    await mm.close()


async def test_missing_model_fails_at_create(tmp_path: Path, isolated_model_caches: Path) -> None:
    cfg = BASE.replace(rerank_enabled=True, rerank_model=str(tmp_path / "no-such-model"))
    with pytest.raises(ModelNotAvailableError, match="model.onnx"):
        await MemoryManager.create(cfg, embedder=HashingEmbedder())
    # The default hub model, not in the (empty, offline) cache: an error, not a fallback.
    with pytest.raises(ModelNotAvailableError, match="ms-marco-MiniLM-L-6-v2"):
        await MemoryManager.create(BASE.replace(rerank_enabled=True))


async def test_missing_extra_fails_at_create(
    monkeypatch: pytest.MonkeyPatch, tiny_cross_encoder_dir: Path
) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    cfg = BASE.replace(rerank_enabled=True, rerank_model=str(tiny_cross_encoder_dir))
    with pytest.raises(MissingDependencyError, match=r"actrone-pg\[onnx\]"):
        await MemoryManager.create(cfg)


async def test_rerank_model_from_a_hub_cache_layout(
    tmp_path: Path, isolated_model_caches: Path
) -> None:
    src = build_tiny_cross_encoder(tmp_path / "src", {"coffee": 4.0})
    hub_cache_layout(
        isolated_model_caches,
        "Xenova/ms-marco-MiniLM-L-6-v2",
        {"onnx/model.onnx": src / "model.onnx", "tokenizer.json": src / "tokenizer.json"},
        rev="b" * 40,
    )
    rr = create_reranker(BASE.replace(rerank_enabled=True))
    assert isinstance(rr, CrossEncoderReranker)
    assert rr.name == "onnx-cross-encoder:Xenova/ms-marco-MiniLM-L-6-v2"
    assert await rr.score("q", ["coffee coffee", "jazz"]) == [8.0, 0.0]
    assert WEIGHTS["coffee"] == 2.0  # the session model is untouched by this one
