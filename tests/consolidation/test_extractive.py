"""The extractive consolidator: which sentences it keeps, how it merges turns, determinism."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from actrone_pg.consolidation import ConsolidatedMemory, ExtractiveConsolidator
from actrone_pg.consolidation.extractive import score_sentence, split_sentences
from actrone_pg.errors import ConfigurationError
from actrone_pg.models import Turn

WHEN = datetime(2026, 5, 4, 12, 0, tzinfo=UTC)


def turn(i: int, user: str, assistant: str) -> Turn:
    return Turn(f"t{i}", "ag", "s", user, assistant, None, WHEN, 10)


TURNS = [
    turn(1, "Hi there!", "Hello! How can I help?"),
    turn(2, "I moved to Oslo last March with my wife Anna.", "That is a big change."),
    turn(3, "Thanks!", "You're welcome."),
    turn(4, "I prefer tea over coffee.", "Tea it is."),
]


def test_sentences_split_at_ends_and_line_breaks() -> None:
    assert split_sentences("One. Two?  Three!\nFour") == ["One.", "Two?", "Three!", "Four"]


def test_scores_follow_the_documented_weights() -> None:
    # 10 words (0.4, the cap) + self 1.0 + preference ("moved") 0.8 + time ("last March") 0.8
    # + names (Oslo, March, Anna: 3 × 0.5)
    score, kinds = score_sentence(
        "I moved to Oslo last March with my wife Anna.", speaker_is_user=True
    )
    assert kinds == ("self", "preference", "time", "name")
    assert score == pytest.approx(0.4 + 1.0 + 0.8 + 0.8 + 3 * 0.5)
    # The assistant's "I" is not a self-disclosure; small talk sinks.
    assert score_sentence("I can help.", speaker_is_user=False)[1] == ()
    assert score_sentence("Thanks!", speaker_is_user=True)[0] == pytest.approx(1 / 25 - 2.0)
    # A question loses 0.8.
    assert score_sentence("Do you like tea?", speaker_is_user=False)[0] == pytest.approx(
        4 / 25 + 0.8 - 0.8
    )


async def test_one_memory_per_informative_turn_with_its_lineage() -> None:
    out = await ExtractiveConsolidator().consolidate(TURNS, None)  # type: ignore[arg-type]
    assert [(m.content, m.source_turn_ids, m.content_type) for m in out] == [
        ("User: I moved to Oslo last March with my wife Anna.", ("t2",), "fact"),
        ("User: I prefer tea over coffee.", ("t4",), "fact"),
    ]
    assert out[0].importance == pytest.approx(0.3 + 0.15 * (4.5 - 0.5))
    assert out[1].importance == pytest.approx(0.3 + 0.15 * (2.0 - 0.5))
    assert out[1].tags == ("preference", "self")


async def test_a_window_merges_turns_and_names_only_those_that_contributed() -> None:
    c = ExtractiveConsolidator(window_turns=4, user_label="", assistant_label="")
    (m,) = await c.consolidate(TURNS, None)  # type: ignore[arg-type]
    assert m == ConsolidatedMemory(
        "I moved to Oslo last March with my wife Anna. I prefer tea over coffee.",
        "summary",
        0.9,
        ("name", "preference", "self", "time"),
        ("t2", "t4"),
    )


async def test_the_best_sentences_that_fit_are_kept_in_order() -> None:
    c = ExtractiveConsolidator(window_turns=4, max_chars=60, user_label="")
    (m,) = await c.consolidate(TURNS, None)  # type: ignore[arg-type]
    assert m.content == "I moved to Oslo last March with my wife Anna."
    assert m.source_turn_ids == ("t2",)


async def test_the_same_turns_give_the_same_memories_and_small_talk_gives_none() -> None:
    c = ExtractiveConsolidator()
    assert await c.consolidate(TURNS, None) == await c.consolidate(TURNS, None)  # type: ignore[arg-type]
    assert await c.consolidate([TURNS[0], TURNS[2]], None) == []  # type: ignore[arg-type]


def test_bad_settings_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match="window_turns"):
        ExtractiveConsolidator(window_turns=0)
