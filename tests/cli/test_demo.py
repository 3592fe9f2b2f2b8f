"""``actrone-pg demo`` on the in-memory backend."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from actrone_pg.cli import main


def test_demo_json_reports_shares_and_explain(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["demo", "--backend", "memory", "--embedder", "hashing", "--json", "--budget", "320"]
    code = main(args)
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    ctx = out["context"]
    assert out["backend"] == "memory"
    assert (ctx["token_budget"], ctx["session_budget"], ctx["episodic_budget"]) == (320, 112, 80)
    assert ctx["reserved_budget"] == 128
    assert 0 < ctx["session_tokens"] <= 112
    assert ctx["episodic_tokens"] <= 80
    # only today's session is read, oldest first, and the newest turn is always last
    assert [t["session_id"] for t in ctx["recent_turns"]] == ["today"] * len(ctx["recent_turns"])
    assert ctx["recent_turns"][-1]["user_message"].startswith("And my sister Ana")
    # The story needs the peanut allergy and Ana's lactose intolerance for Friday's dinner.
    # Keyword-only hashing admits exactly those two, as they share words with the query ("Ana",
    # "dairy"; "allergies"): cosines 0.354 and 0.316 against the 0.218 threshold.
    chosen = [m["content"] for m in ctx["episodic_memories"]]
    assert chosen == [
        "The user's sister Ana is lactose intolerant, so meals with her avoid dairy.",
        "Food allergies: the user is allergic to peanuts.",
    ]
    assert len(out["ranked_candidates"]) == 2
    for row in out["ranked_candidates"]:
        assert row["cosine"] >= out["relevance_threshold"]
        assert row["dense_rank"] >= 1 and row["recency_rank"] >= 1
    # the six others are listed as left out, each below the threshold, with its cosine
    left = out["left_out"]
    assert len(left) == 6 and {x["reason"] for x in left} == {"below_threshold"}
    assert all(x["cosine"] < out["relevance_threshold"] for x in left)
    coriander = next(x for x in left if "coriander" in x["content"])
    assert coriander["detail"] == f"below threshold: cosine {coriander['cosine']:.3f} < 0.218"


def test_demo_says_which_memory_did_not_fit_the_budget(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["demo", "--backend", "memory", "--embedder", "hashing", "--json", "--budget", "120"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    # L2 share floor(0.25 * 120) = 30: Ana's memory (19 tokens) is taken first, which leaves 11;
    # the allergy (12 tokens) is admitted but does not fit.
    chosen = [m["content"] for m in out["context"]["episodic_memories"]]
    assert chosen == ["The user's sister Ana is lactose intolerant, so meals with her avoid dairy."]
    (over,) = [x for x in out["left_out"] if x["reason"] == "over_budget"]
    assert over["content"] == "Food allergies: the user is allergic to peanuts."
    assert over["detail"] == "over budget: 12 tokens, 11 of the 30-token L2 share left"


def test_demo_renders_tables(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--backend", "memory", "--embedder", "hashing"]) == 0
    out = capsys.readouterr().out
    assert "L1 · recent turns" in out and "L2 · memories" in out and "budget 320 tokens" in out
    assert "left out, and why" in out and "below threshold" in out


def test_bad_budget_is_a_clean_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--backend", "memory", "--embedder", "hashing", "--budget", "0"]) == 2
    assert "token_budget" in capsys.readouterr().err


@pytest.mark.model
def test_demo_with_minilm_finds_the_allergy_by_meaning(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, minilm_dir: Path
) -> None:
    monkeypatch.setenv("ACTRONE_EMBEDDING_MODEL", str(minilm_dir))
    args = ["demo", "--backend", "memory", "--embedder", "onnx", "--json"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["embedder"] == "onnx:sentence-transformers/all-MiniLM-L6-v2"
    chosen = [m["content"] for m in out["context"]["episodic_memories"]]
    # the two the story needs, as with hashing, and by meaning also the diet, which shares no
    # word with the query (cosine 0.398 against MiniLM's 0.267), and the two other food facts
    assert set(chosen) == {
        "The user's sister Ana is lactose intolerant, so meals with her avoid dairy.",
        "Food allergies: the user is allergic to peanuts.",
        "Diet preferences: mostly vegetarian, eats fish on weekends.",
        "The user dislikes coriander in food.",
        "The user's favourite cuisine is Thai food, mild on spice.",
    }
    assert {x["reason"] for x in out["left_out"]} == {"below_threshold"}
    assert len(out["left_out"]) == 3  # flights, work, piano
