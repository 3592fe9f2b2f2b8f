"""``actrone-pg eval --memories consolidated``: scoring by lineage, and a run on the shipped set."""

from __future__ import annotations

import pytest

from actrone_pg.config import MemoryConfig
from actrone_pg.embedders import HashingEmbedder
from actrone_pg.errors import ConfigurationError
from actrone_pg.evaluation import OVERALL, EvalConfig, run_eval, shipped_conversations
from actrone_pg.evaluation.metrics import QueryResult, score
from actrone_pg.evaluation.runner import consolidation_window, context_of, turn_context


def test_an_evidence_turn_counts_at_the_rank_of_the_first_memory_it_went_into() -> None:
    # Memories (ranks 1-3) made of turns; evidence t2 (rank 2) and t9 (never returned).
    r = QueryResult("c", "x", frozenset({"t2", "t9"}), ("m1", "m2", "m3"), 0.0,
                    (("t1",), ("t2", "t3"), ("t2",)))  # fmt: skip
    assert r.first_ranks() == {"t2": 2}
    s = score([r])[OVERALL]
    assert (s.recall_at_5, s.hit_at_5, s.mrr) == (0.5, 1.0, 0.5)
    raw = QueryResult("c", "x", frozenset({"t2"}), ("t1", "t2"), 0.0)
    assert score([raw])[OVERALL].mrr == 0.5  # without sources: the ids themselves


def test_the_memories_option_is_checked() -> None:
    assert consolidation_window("raw") is None
    assert consolidation_window("consolidated") == (1, 0.5)
    assert consolidation_window("consolidated:3:0.5") == (3, 0.5)
    for bad in ("consolidated:0", "summaries", "consolidated:x", "consolidated:1:2:3"):
        with pytest.raises(ConfigurationError, match="memories"):
            consolidation_window(bad)
    assert (turn_context("raw"), turn_context("context"), turn_context("context:3")) == (0, 1, 3)
    assert turn_context("consolidated:2") is None
    for bad in ("context:0", "context:x", "raw:1", "summaries"):
        with pytest.raises(ConfigurationError, match="memories"):
            turn_context(bad)


def test_a_turn_is_given_the_turns_before_it_in_its_session() -> None:
    turns = [t for c in shipped_conversations() for t in c.turns][:6]
    first, second, third = turns[0], turns[1], turns[2]
    assert first.session == second.session == third.session
    contexts = context_of(turns, 2, captions=True)
    assert contexts[:3] == [
        None,
        first.content(),
        f"{first.content()}\n{second.content()}",
    ]
    # Listed in any order, each still gets the turns said before it.
    assert context_of(turns[::-1], 2, captions=True)[::-1] == contexts


async def test_consolidated_memories_are_measured_beside_raw_turns() -> None:
    config = MemoryConfig.from_env({}, embedding_provider="hashing")
    configs = [
        EvalConfig("raw", {}, config),
        EvalConfig("consolidated", {}, config, memories="consolidated"),
    ]
    report = await run_eval(shipped_conversations(), configs, HashingEmbedder())
    raw, consolidated = report.configs
    assert [r.sources for r in raw.results] == [None] * len(raw.results)
    assert all(r.sources is not None for r in consolidated.results)
    # Every returned memory came from the conversation's turns, one each (window 1).
    turn_ids = {t.id for c in shipped_conversations() for t in c.turns}
    for r in consolidated.results:
        assert r.sources is not None
        assert all(len(ids) == 1 and ids[0] in turn_ids for ids in r.sources)
    assert consolidated.scores()[OVERALL].questions == raw.scores()[OVERALL].questions == 34
    assert consolidated.scores()[OVERALL].recall_at_10 > 0.5


async def test_turns_written_with_context_are_the_same_memories() -> None:
    config = MemoryConfig.from_env({}, embedding_provider="hashing")
    configs = [
        EvalConfig("raw", {}, config),
        EvalConfig("context", {}, config, memories="context"),
    ]
    report = await run_eval(shipped_conversations(), configs, HashingEmbedder())
    raw, context = report.configs
    turn_ids = {t.id for c in shipped_conversations() for t in c.turns}
    assert all(set(r.ranked) <= turn_ids for r in context.results)
    # Other vectors, so another ranking (the hashing embedder sees the context's words too).
    assert [r.ranked for r in context.results] != [r.ranked for r in raw.results]
