"""MemoryManager end to end on the in-memory store: API, budget, bad input, concurrency."""

from __future__ import annotations

import ast
import asyncio
import inspect
import math
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import actrone_pg
from actrone_pg import (
    ConfigurationError,
    DimensionMismatchError,
    MemoryConfig,
    MemoryManager,
    ValidationError,
    create_memory_manager,
)
from actrone_pg.consolidation import ConsolidatedMemory, ConsolidationContext
from actrone_pg.models import Turn
from actrone_pg.stores.memory import InMemoryStore
from tests.helpers import FixedEmbedder, ScoreByKeywordReranker, SlowStore

CFG = MemoryConfig(backend="memory", embedding_provider="hashing")


def test_public_names_are_sorted_and_importable() -> None:
    assert actrone_pg.__all__ == sorted(actrone_pg.__all__)
    for name in actrone_pg.__all__:
        assert getattr(actrone_pg, name) is not None
    from actrone_pg.embedders import HashingEmbedder, OnnxEmbedder  # noqa: F401

    assert issubclass(actrone_pg.ValidationError, actrone_pg.ActroneError)
    assert issubclass(actrone_pg.ConfigurationError, ValueError)


async def make(embedder: FixedEmbedder | None = None, **cfg: object) -> MemoryManager:
    return await MemoryManager.create(
        CFG.replace(**cfg), embedder=embedder or FixedEmbedder(), store=InMemoryStore()
    )


async def test_threshold_resolution() -> None:
    assert (await make(FixedEmbedder())).relevance_threshold == 0.72
    assert (await make(FixedEmbedder(relevance_threshold=0.3))).relevance_threshold == 0.3
    mm = await make(FixedEmbedder(relevance_threshold=0.3), relevance_threshold=0.5)
    assert mm.relevance_threshold == 0.5


async def test_retrieve_context_end_to_end_with_explain() -> None:
    emb = FixedEmbedder(
        {"q": [1, 0, 0, 0], "peanut allergy": [0.8, 0.6, 0, 0], "likes jazz": [0, 1, 0, 0]}
    )
    mm = await make(emb, relevance_threshold=0.5)
    await mm.store_turn("ag", "s", "hi", "hello")
    ids = await mm.inject_memories("ag", ["peanut allergy", "likes jazz"])
    ctx = await mm.retrieve_context("ag", "s", "q", 1000, explain=True)
    assert [m.id for m in ctx.episodic_memories] == [ids[0]]
    e = ctx.episodic_memories[0].explain
    assert e is not None
    assert e.cosine == pytest.approx(0.8, abs=1e-6)
    assert (e.dense_rank, e.lexical_rank, e.recency_rank) == (1, None, 1)
    assert e.fused_score == pytest.approx((1.0 + 0.1) / 61)  # default weights: dense 1, recency 0.1
    assert e.rerank_score is None
    assert [t.user_message for t in ctx.recent_turns] == ["hi"]
    assert (ctx.token_budget, ctx.session_budget, ctx.episodic_budget) == (1000, 350, 250)
    assert ctx.session_tokens == 1 + 2  # ceil(2/4) + ceil(5/4)
    assert ctx.episodic_tokens == math.ceil(len("peanut allergy") / 4)
    plain = await mm.retrieve_context("ag", "s", "q", 1000)
    assert plain.episodic_memories[0].explain is None
    hits = await mm.search_memories("ag", "q", explain=True)
    assert [h.id for h in hits] == [ids[0]] and hits[0].explain is not None


async def test_a_store_that_leaves_explanations_on_its_memories_never_shows_them_unasked() -> None:
    # The manager returns the stored memories themselves when nothing changes them; one that a
    # store returns with an explanation attached is still returned without it, unless asked.
    from dataclasses import replace

    from actrone_pg.models import ScoredMemory
    from actrone_pg.pipeline import PackedSearch, SearchRequest

    class Explaining(InMemoryStore):
        async def search(self, request: SearchRequest) -> PackedSearch:
            found = await super().search(request)
            hits = [
                ScoredMemory(replace(h.memory, explain=h.explain), h.explain) for h in found.hits
            ]
            return replace(found, hits=hits)

    emb = FixedEmbedder({"q": [1, 0, 0, 0], "peanut allergy": [0.8, 0.6, 0, 0]})
    mm = await MemoryManager.create(
        CFG.replace(relevance_threshold=0.5), embedder=emb, store=Explaining()
    )
    await mm.inject_memories("ag", ["peanut allergy"])
    (plain,) = await mm.search_memories("ag", "q")
    (explained,) = await mm.search_memories("ag", "q", explain=True)
    assert plain.explain is None and explained.explain is not None
    assert replace(explained, explain=None) == plain


async def test_empty_l1_leaves_the_l2_share_unchanged() -> None:
    emb = FixedEmbedder({"q": [1, 0, 0, 0]})
    mm = await make(emb, relevance_threshold=0.1)
    # ten memories of 10 tokens each (40 characters)
    for i in range(10):
        text = f"memory number {i:02d} " + "x" * 23
        emb.vectors[text] = [1, i / 100, 0, 0]
        await mm.inject_memory("ag", text)
    ctx = await mm.retrieve_context("ag", "no-such-session", "q", 200)
    assert ctx.recent_turns == [] and ctx.session_tokens == 0
    assert ctx.episodic_budget == 50
    assert ctx.episodic_tokens == 50  # five memories, not more: L1's unused 70 are not handed over
    assert len(ctx.episodic_memories) == 5


async def test_turn_budget_is_newest_first_without_holes() -> None:
    mm = await make()
    await mm.store_turn("ag", "s", "a" * 40, "")  # 10 tokens
    await mm.store_turn("ag", "s", "b" * 200, "")  # 50 tokens
    await mm.store_turn("ag", "s", "c" * 40, "")  # 10 tokens
    await mm.store_turn("ag", "s", "d" * 40, "")  # 10 tokens
    ctx = await mm.retrieve_context("ag", "s", "anything", 100)  # L1 share 35
    assert [t.user_message[0] for t in ctx.recent_turns] == ["c", "d"]
    assert ctx.session_tokens == 20 <= ctx.session_budget


async def test_tokens_used_never_exceed_a_share() -> None:
    emb = FixedEmbedder({"q": [1, 0, 0, 0]})
    mm = await make(emb, relevance_threshold=0.01)
    for i in range(30):
        text = "m" * (7 + 13 * i)
        emb.vectors[text] = [1, (i % 7) / 10, 0, 0]
        await mm.inject_memory("ag", text)
        await mm.store_turn("ag", "s", "u" * (3 + 11 * i), "a" * i)
    for budget in (1, 2, 3, 7, 50, 99, 333, 1000, 5000):
        ctx = await mm.retrieve_context("ag", "s", "q", budget)
        assert ctx.session_tokens <= ctx.session_budget == math.floor(0.35 * budget + 1e-9)
        assert ctx.episodic_tokens <= ctx.episodic_budget == math.floor(0.25 * budget + 1e-9)
        assert ctx.session_tokens == sum(t.token_count for t in ctx.recent_turns)
        assert ctx.episodic_tokens == sum(m.token_count for m in ctx.episodic_memories)


async def test_budget_of_one_returns_nothing_but_works() -> None:
    mm = await make()
    await mm.store_turn("ag", "s", "hi", "there")
    ctx = await mm.retrieve_context("ag", "s", "hi", 1)
    assert (ctx.session_budget, ctx.episodic_budget) == (0, 0)
    assert ctx.recent_turns == [] and ctx.episodic_memories == []


async def test_max_episodic_memories_truncates_candidates() -> None:
    emb = FixedEmbedder({"q": [1, 0, 0, 0]})
    mm = await make(emb, relevance_threshold=0.1, max_episodic_memories=3)
    for i in range(6):
        emb.vectors[f"m{i}"] = [1, i / 10, 0, 0]  # m0 nearest
        await mm.inject_memory("ag", f"m{i}")
    hits = await mm.search_memories("ag", "q", limit=10)
    assert sorted(h.content for h in hits) == ["m0", "m1", "m2"]
    ctx = await mm.retrieve_context("ag", "s", "q", 10_000)
    assert ctx.candidates_considered == 3


async def test_default_threshold_072_applies_to_an_embedder_without_one() -> None:
    emb = FixedEmbedder({"q": [1, 0, 0, 0], "near": [0.72, math.sqrt(1 - 0.72**2), 0, 0]})
    emb.vectors["far"] = [0.7, math.sqrt(1 - 0.49), 0, 0]
    mm = await make(emb)
    await mm.inject_memories("ag", ["near", "far"])
    assert [m.content for m in await mm.search_memories("ag", "q")] == ["near"]


async def test_custom_token_counter() -> None:
    mm = await MemoryManager.create(
        CFG, store=InMemoryStore(), embedder=FixedEmbedder(), token_counter=lambda s: len(s.split())
    )
    t = await mm.store_turn("ag", "s", "one two three", "four five")
    assert t.token_count == 5
    assert mm.count_tokens("a b") == 2


async def test_rerank_applies_to_the_top_k_then_the_budget() -> None:
    emb = FixedEmbedder({"q": [1, 0, 0, 0]})
    reranker = ScoreByKeywordReranker("!")
    mm = await MemoryManager.create(
        CFG.replace(rerank_top_k=3, relevance_threshold=0.1),
        store=InMemoryStore(),
        embedder=emb,
        reranker=reranker,
    )
    texts = ["a.", "b!", "c!!", "d!!!!"]  # fused order a, b, c, d (nearest first)
    for i, t in enumerate(texts):
        emb.vectors[t] = [1, i / 5, 0, 0]
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    for i, t in enumerate(texts):  # same age order as nearness, so recency agrees
        await mm.inject_memory("ag", t, created_at=t0 - timedelta(days=i))
    hits = await mm.search_memories("ag", "q", explain=True)
    assert reranker.seen[-1] == ["a.", "b!", "c!!"]  # only the top 3
    assert [h.content for h in hits] == ["c!!", "b!", "a."]  # "d!!!!" was never a top-3 candidate
    assert [h.explain.rerank_score for h in hits if h.explain] == [2.0, 1.0, 0.0]
    ctx = await mm.retrieve_context("ag", "s", "q", 4)  # L2 share: 1 token
    assert [m.content for m in ctx.episodic_memories] == ["c!!"]


async def test_query_embeddings_are_cached() -> None:
    emb = FixedEmbedder()
    mm = await make(emb)
    for _ in range(3):
        await mm.search_memories("ag", "same query")
    assert sum(1 for c in emb.calls if c == ["same query"]) == 1


async def test_fetch_overlaps_l1_and_l2() -> None:
    delay = 0.4
    mm = await MemoryManager.create(
        CFG, store=SlowStore(InMemoryStore(), delay), embedder=FixedEmbedder(delay=delay)
    )
    started = time.perf_counter()
    await mm.retrieve_context("ag", "s", "a query", 100)
    elapsed = time.perf_counter() - started
    # serial would take 0.8 s; overlapped takes the larger delay (0.4 s) plus overhead
    assert delay <= elapsed < 1.5 * delay


async def test_100_concurrent_writes_and_reads_lose_nothing() -> None:
    mm = await make(max_session_turns=200)

    async def write(i: int) -> None:
        await mm.store_turn("ag", "s", f"message {i}", f"reply {i}")

    async def read(i: int) -> None:
        await mm.retrieve_context("ag", "s", f"query {i}", 2000)

    await asyncio.gather(*(write(i) for i in range(100)), *(read(i) for i in range(100)))
    turns = await mm.get_recent_turns("ag", "s", limit=200)
    assert sorted(t.user_message for t in turns) == sorted(f"message {i}" for i in range(100))


async def test_inject_is_idempotent_and_replaceable() -> None:
    mm = await make()
    a = await mm.inject_memory("ag", "The user likes tea")
    b = await mm.inject_memory("ag", "The user likes tea")
    assert a == b and await mm.count_memories("ag") == 1
    c = await mm.inject_memory("ag", "The user likes coffee", memory_id=a)
    assert c == a
    got = await mm.get_memory("ag", a)
    assert got is not None and got.content == "The user likes coffee"


@pytest.mark.parametrize("drop", [True, False])
async def test_question_words_do_not_match_memories_by_default(drop: bool) -> None:
    texts = ["What a day it was", "Green tea in the morning", "What tea?"]
    emb = FixedEmbedder({t: [1, 0, 0, 0] for t in texts})  # every memory admitted
    mm = await make(emb, relevance_threshold=0.5, drop_question_words=drop)
    await mm.inject_memories("ag", texts[:2])
    hits = await mm.search_memories("ag", "What tea?", explain=True)
    ranks = {h.content: h.explain.lexical_rank for h in hits if h.explain is not None}
    assert ranks["Green tea in the morning"] == 1
    assert ranks["What a day it was"] == (None if drop else 2)


async def test_an_embedding_context_goes_into_the_vector_only() -> None:
    emb = FixedEmbedder()
    mm = await make(emb)
    mid = await mm.inject_memory(
        "ag", "Yes! It was amazing.", embedding_context="Ana: Did you go to the concert?"
    )
    assert emb.calls[-1] == ["Ana: Did you go to the concert?\nYes! It was amazing."]
    got = await mm.get_memory("ag", mid)
    assert got is not None and got.content == "Yes! It was amazing."
    assert got.token_count == mm.count_tokens("Yes! It was amazing.")
    # The same content without a context is the same memory (its id), embedded alone.
    await mm.inject_memories("ag", [{"content": "Yes! It was amazing."}])
    assert emb.calls[-1] == ["Yes! It was amazing."]


@pytest.mark.parametrize("context", ["", "  ", "a\x00b", 42])
async def test_a_bad_embedding_context_rejects_the_batch(context: object) -> None:
    mm = await make()
    with pytest.raises(ValidationError, match="embedding_context"):
        await mm.inject_memories(
            "ag", ["good one", {"content": "ok", "embedding_context": context}]
        )
    await assert_nothing_written(mm)


async def test_erase_and_delete_through_the_manager() -> None:
    mm = await make()
    mid = await mm.inject_memory("A", "secret")
    await mm.store_turn("A", "s", "hi", "hello")
    await mm.inject_memory("B", "other")
    assert await mm.delete_memory("B", mid) is False
    await mm.erase_agent("A")
    assert await mm.count_memories("A") == 0
    assert await mm.get_recent_turns("A", "s") == []
    assert await mm.count_memories("B") == 1


async def test_lock_through_the_manager() -> None:
    mm = await make()
    tokens = await asyncio.gather(*(mm.try_lock("ag") for _ in range(100)))
    winners = [t for t in tokens if t is not None]
    assert len(winners) == 1
    assert await mm.release_lock("ag", winners[0]) is True


async def test_create_memory_manager_closes_on_exit() -> None:
    async with create_memory_manager(CFG) as mm:
        await mm.store_turn("ag", "s", "x", "y")
        assert mm.backend == "memory"
    assert mm._closed


def test_the_manager_holds_its_collaborators_and_consolidation_needs_only_a_protocol() -> None:
    assert MemoryManager.__mro__ == (MemoryManager, object)
    import actrone_pg.consolidation as consolidation

    for path in Path(consolidation.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names.append(node.module)
            assert not [
                n for n in names if n.startswith(("actrone_pg.manager", "actrone_pg._manager"))
            ], path


def test_create_memory_manager_takes_what_create_takes() -> None:
    assert (
        inspect.signature(create_memory_manager).parameters
        == inspect.signature(MemoryManager.create).parameters
    )


async def test_create_memory_manager_passes_the_consolidator_on() -> None:
    class Mine:
        name = "mine"

        async def consolidate(
            self, turns: Sequence[Turn], context: ConsolidationContext
        ) -> list[ConsolidatedMemory]:
            return [ConsolidatedMemory("The user drinks green tea.")]

    given = Mine()
    async with create_memory_manager(CFG, store=InMemoryStore(), consolidator=given) as mm:
        assert mm.consolidator is given
        await mm.store_turn("ag", "s", "I drink green tea.", "Noted.")
        (memory_id,) = await mm.consolidate_session("ag", "s")
        memory = await mm.get_memory("ag", memory_id)
        assert memory is not None and memory.metadata["consolidator"] == "mine"


# -- bad input (docs/retrieval.md, "Bad input"): a typed error, and nothing written ----------

BAD_IDS = ["", "   ", "x" * 257, "a\x00b", 5, None]


async def assert_nothing_written(mm: MemoryManager) -> None:
    assert await mm.count_memories("ag") == 0
    assert await mm.get_recent_turns("ag", "s") == []


@pytest.mark.parametrize("bad", BAD_IDS)
async def test_bad_ids_are_rejected(bad: object) -> None:
    mm = await make()
    with pytest.raises(ValidationError):
        await mm.store_turn(bad, "s", "u", "a")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        await mm.store_turn("ag", bad, "u", "a")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        await mm.inject_memory(bad, "content")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        await mm.retrieve_context("ag", bad, "q", 100)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        await mm.delete_memory("ag", bad)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        await mm.erase_agent(bad)  # type: ignore[arg-type]
    await assert_nothing_written(mm)


@pytest.mark.parametrize("budget", [0, -5, 1.5, "100", True])
async def test_bad_budgets_are_rejected(budget: object) -> None:
    mm = await make()
    with pytest.raises(ValidationError, match="token_budget"):
        await mm.retrieve_context("ag", "s", "q", budget)  # type: ignore[arg-type]


async def test_nul_bytes_and_huge_texts_are_rejected_and_write_nothing() -> None:
    mm = await make(max_text_chars=1000)
    with pytest.raises(ValidationError, match="NUL"):
        await mm.store_turn("ag", "s", "a\x00b", "ok")
    with pytest.raises(ValidationError, match="NUL"):
        await mm.inject_memory("ag", "bad\x00content")
    with pytest.raises(ValidationError, match="limit"):
        await mm.inject_memory("ag", "x" * 1001)
    with pytest.raises(ValidationError, match="limit"):
        await mm.store_turn("ag", "s", "x" * 1001, "ok")
    with pytest.raises(ValidationError):
        await mm.search_memories("ag", "q\x00")
    with pytest.raises(ValidationError, match="NUL"):
        await mm.inject_memory("ag", "fine", metadata={"k": "v\x00"})
    await assert_nothing_written(mm)


async def test_a_megabyte_message_is_rejected_by_default() -> None:
    mm = await make()
    with pytest.raises(ValidationError, match="limit"):
        await mm.store_turn("ag", "s", "x" * 2_000_000, "ok")
    await assert_nothing_written(mm)


@pytest.mark.parametrize(
    "item",
    [
        {"content": ""},
        {"content": "ok", "importance": 2},
        {"content": "ok", "importance": float("nan")},
        {"content": "ok", "tags": "not-a-list"},
        {"content": "ok", "created_at": datetime(2026, 1, 1)},
        {"content": "ok", "metadata": {"k": float("inf")}},
        {"content": "ok", "metadata": ["not", "a", "dict"]},
        {"content": "ok", "unknown": 1},
        {"importance": 0.5},
        {"content": "ok", "source": ""},
        42,
    ],
)
async def test_a_bad_item_rejects_the_whole_batch(item: object) -> None:
    mm = await make()
    with pytest.raises(ValidationError):
        await mm.inject_memories("ag", ["good one", item, "another good one"])  # type: ignore[list-item]
    await assert_nothing_written(mm)


class BadEmbedder(FixedEmbedder):
    def __init__(self, value: list[float]) -> None:
        super().__init__()
        self.value = value

    async def embed_batch(self, texts):  # type: ignore[no-untyped-def, override]
        return [self.value for _ in texts]


@pytest.mark.parametrize(
    "vector", [[float("nan"), 0, 0, 0], [float("inf"), 0, 0, 0], [0, 0, 0, 0], [1, 0, 0]]
)
async def test_bad_vectors_are_rejected_and_write_nothing(vector: list[float]) -> None:
    mm = await make(BadEmbedder(vector))
    with pytest.raises(actrone_pg.ActroneError) as info:
        await mm.inject_memory("ag", "text")
    if len(vector) == 3:
        assert isinstance(info.value, (DimensionMismatchError, actrone_pg.EmbedderError))
    await assert_nothing_written(mm)


async def test_query_full_of_operators_just_works() -> None:
    mm = await make(relevance_threshold=0.01)
    await mm.inject_memory("ag", "cats & dogs: (friends)")
    for q in ["cats & | ! ( ) :*", "'", '"', "<->", "!!!", "OR AND NOT", "%_"]:
        await mm.search_memories("ag", q)
        await mm.retrieve_context("ag", "s", q, 100)


async def test_unknown_backend_and_bad_objects_fail_at_create() -> None:
    with pytest.raises(ConfigurationError):
        MemoryConfig(backend="nope")
    with pytest.raises(ConfigurationError, match="embedder"):
        await MemoryManager.create(CFG, embedder=object())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="config"):
        await MemoryManager.create({"backend": "memory"})  # type: ignore[arg-type]


async def test_returned_memories_carry_every_stored_field() -> None:
    import dataclasses

    mm = await make(relevance_threshold=0.01)
    created = datetime(2026, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    mid = await mm.inject_memory(
        "ag",
        "tea with lemon",
        session_id="s9",
        content_type="preference",
        importance=0.9,
        tags=["drink"],
        source="chat",
        sensitivity="low",
        created_at=created,
        metadata={"k": 1},
    )
    stored = await mm.get_memory("ag", mid)
    (hit,) = await mm.search_memories("ag", "tea with lemon", explain=True)
    assert hit.explain is not None
    assert hit == dataclasses.replace(stored, explain=hit.explain)  # type: ignore[type-var]


async def test_sweep_reclaims_expired_sessions() -> None:
    mm = await make(session_ttl_hours=0.5 / 3600)  # half a second
    await mm.store_turn("ag", "old", "hello", "hi")
    await asyncio.sleep(0.8)
    await mm.store_turn("ag", "new", "hello again", "hi")
    assert await mm.sweep_expired_sessions() == 1
    assert await mm.sweep_expired_sessions() == 0
    assert await mm.get_session("ag", "new") is not None
    with pytest.raises(ValidationError):
        await mm.sweep_expired_sessions(limit=0)
