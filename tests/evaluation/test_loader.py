"""Reading LoCoMo (both shapes) and the JSON Lines format; bad files fail with one clear error.

The LoCoMo-shaped samples here are written for these tests (two speakers, three sessions), not
taken from the data set.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from actrone_pg.evaluation import EvalFormatError, load_conversations, shipped_conversations
from actrone_pg.evaluation.loader import parse_locomo_time


def locomo_conversation() -> dict[str, Any]:
    return {
        "speaker_a": "Ana",
        "speaker_b": "Ben",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ana", "dia_id": "D1:1", "text": "I bought a red bike."},
            {
                "speaker": "Ben",
                "dia_id": "D1:2",
                "text": "Look at this!",
                "img_url": ["http://example.invalid/x.jpg"],
                "blip_caption": "a photo of a dog on a beach",
            },
        ],
        "session_2_date_time": "9:05 am on 1 June, 2023",
        "session_2": [{"speaker": "Ana", "dia_id": "D2:1", "text": "The bike got a flat."}],
        "session_3_date_time": "10:00 am on 2 June, 2023",  # a date without turns is ignored
        "session_1_summary": "not a turn",
        "qa": [
            {
                "question": "What colour is Ana's bike?",
                "answer": "red",
                "evidence": ["D1:1"],
                "category": 4,
            },
            {
                "question": "What happened?",
                "answer": "x",
                "evidence": ["D1:1; D2:1"],
                "category": 1,
            },
            {
                "question": "Unanswerable?",
                "adversarial_answer": "x",
                "evidence": ["D1:2"],
                "category": 5,
            },
            {"question": "No evidence?", "answer": "x", "evidence": [], "category": 2},
            {"question": "Bad evidence?", "answer": "x", "evidence": ["D9:9"], "category": 3},
        ],
    }


def test_a_locomo_file(tmp_path: Path) -> None:
    path = tmp_path / "conv-x.json"
    path.write_text(json.dumps(locomo_conversation()))
    (conv,) = load_conversations([path])
    assert conv.id == "conv-x"
    assert [t.id for t in conv.turns] == ["D1:1", "D1:2", "D2:1"]
    first, photo, later = conv.turns
    assert first.created_at == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert photo.created_at == datetime(2023, 5, 8, 13, 56, 1, tzinfo=UTC)  # one second per turn
    assert later.created_at == datetime(2023, 6, 1, 9, 5, tzinfo=UTC)
    assert first.content() == "Ana: I bought a red bike."
    assert photo.content() == "Ben: Look at this! [shares a photo: a photo of a dog on a beach]"
    assert photo.content(captions=False) == "Ben: Look at this!"
    assert [(q.category, sorted(q.evidence)) for q in conv.questions] == [
        ("single-hop", ["D1:1"]),
        ("multi-hop", ["D1:1", "D2:1"]),
    ]
    assert conv.skipped == {"adversarial": 1, "no_evidence": 2, "unknown_evidence_ids": 1}


def test_the_release_list_and_a_directory(tmp_path: Path) -> None:
    release = [
        {
            "sample_id": "conv-a",
            "conversation": locomo_conversation(),
            "qa": locomo_conversation()["qa"],
        },
        {"sample_id": "conv-b", "conversation": locomo_conversation(), "qa": []},
    ]
    (tmp_path / "locomo10.json").write_text(json.dumps(release))
    convs = load_conversations([tmp_path])
    assert [c.id for c in convs] == ["conv-a", "conv-b"]
    assert len(convs[0].questions) == 2 and convs[1].questions == ()


def test_twelve_hour_clock() -> None:
    assert parse_locomo_time("12:05 am on 3 March, 2024", "x").hour == 0
    assert parse_locomo_time("12:05 pm on 3 March, 2024", "x").hour == 12
    with pytest.raises(EvalFormatError, match="cannot read the date"):
        parse_locomo_time("yesterday", "x")


def test_the_shipped_set() -> None:
    convs = shipped_conversations()
    assert [c.id for c in convs] == ["garden", "chess", "move"]
    assert sum(len(c.questions) for c in convs) == 34
    assert sum(len(c.turns) for c in convs) == 59


def jsonl(tmp_path: Path, *rows: object) -> Path:
    path = tmp_path / "data.jsonl"
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows))
    return path


TURN = {
    "conversation": "c",
    "id": "t1",
    "time": "2024-01-01T10:00:00+00:00",
    "speaker": "A",
    "text": "hello",
}


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (["{not json"], "not a JSON object"),
        ([{"id": "t1", "text": "x"}], "needs a 'conversation'"),
        ([{**TURN, "time": "2024-01-01T10:00:00"}], "needs a UTC offset"),
        ([{**TURN, "id": ""}], "needs an 'id'"),
        ([TURN, TURN], "two turns with id 't1'"),
        ([TURN, {"conversation": "c", "question": "q?", "evidence": ["t9"]}], "names no turn"),
        ([TURN, {"conversation": "c", "question": "q?", "evidence": []}], "non-empty list"),
        ([{"conversation": "c", "hello": 1}], r"a turn \('text'\) or a question"),
        ([TURN], "no questions with evidence"),
    ],
)
def test_bad_jsonl(tmp_path: Path, rows: list[object], message: str) -> None:
    with pytest.raises(EvalFormatError, match=message):
        load_conversations([jsonl(tmp_path, *rows)])


def test_bad_paths_and_files(tmp_path: Path) -> None:
    with pytest.raises(EvalFormatError, match="no such file or directory"):
        load_conversations([tmp_path / "missing.json"])
    with pytest.raises(EvalFormatError, match="no .json or .jsonl files"):
        load_conversations([tmp_path])
    (tmp_path / "other.json").write_text('{"hello": "world"}')
    with pytest.raises(EvalFormatError, match="not a LoCoMo conversation"):
        load_conversations([tmp_path / "other.json"])
    (tmp_path / "text.json").write_text("plain text")
    with pytest.raises(EvalFormatError, match="not JSON"):
        load_conversations([tmp_path / "text.json"])
