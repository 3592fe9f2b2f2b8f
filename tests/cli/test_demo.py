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
    # Keyword-only hashing admits the two memories that share words with the query (cosines
    # 0.338 and 0.286 against the 0.218 threshold); MiniLM also finds a third by meaning below.
    chosen = [m["content"] for m in ctx["episodic_memories"]]
    assert chosen and all(("allerg" in c) or ("Diet" in c) for c in chosen)
    assert len(out["ranked_candidates"]) == 2
    for row in out["ranked_candidates"]:
        assert row["cosine"] >= out["relevance_threshold"]
        assert row["dense_rank"] >= 1 and row["recency_rank"] >= 1


def test_demo_renders_tables(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--backend", "memory", "--embedder", "hashing"]) == 0
    out = capsys.readouterr().out
    assert "L1 · recent turns" in out and "L2 · memories" in out and "budget 320 tokens" in out


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
    assert any("allergic to peanuts" in c for c in chosen)
