"""``actrone-pg eval`` end to end: the shipped set in, tables or JSON out; bad input, one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from actrone_pg.cli import main


def test_json_output_has_every_configuration(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "eval",
            "--embedder",
            "hashing",
            "--config",
            "rrf_weights=0,1,0",
            "--config",
            "hybrid_retrieval=false;relevance_threshold=0.1",
            "--json",
        ]
    )
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert [c["label"] for c in out["configs"]] == [
        "default",
        "rrf_weights=0,1,0",
        "hybrid_retrieval=false relevance_threshold=0.1",
    ]
    assert out["embedder"] == "hashing-v1-256" and out["search_limit"] == 10
    assert [c["id"] for c in out["conversations"]] == ["garden", "chess", "move"]
    default, bm25, blend = out["configs"]
    assert blend["threshold"] == 0.1
    for config in out["configs"]:
        overall = config["scores"]["overall"]
        assert overall["questions"] == 34
        assert 0.0 <= overall["recall@5"] <= overall["recall@10"] <= 1.0
        assert set(config["scores"]) == {
            "multi-hop",
            "open-domain",
            "single-hop",
            "temporal",
            "overall",
        }
        assert set(config["per_conversation"]) == {"garden", "chess", "move"}


def test_table_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "--embedder", "hashing", "--config", "rrf_weights=1,1,1"]) == 0
    out = capsys.readouterr().out
    assert "recall@10" in out and "rrf_weights=1,1,1" in out and "single-hop" in out


def test_chart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    chart = tmp_path / "eval.png"
    assert main(["eval", "--embedder", "hashing", "--json", "--chart", str(chart)]) == 0
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["/nonexistent/conv.json"], "no such file or directory"),
        (["--config", "no_such_field=1"], "no_such_field: unknown setting"),
        (["--config", "rrf_weights=a,b"], "rrf_weights"),
        (["--config", "relevance_threshold=2"], "relevance_threshold"),
        (["--config", "rrf_weights"], "expected FIELD=VALUE"),
        (["--embedder", "nope"], "unknown embedder 'nope'"),
    ],
)
def test_bad_input_is_one_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["eval", "--embedder", "hashing", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("actrone-pg eval: ") and message in err
    assert "\n" not in err


def test_a_file_that_is_not_an_eval_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "pairs.jsonl"
    path.write_text('{"query": "q", "memory": "m", "relevant": true}\n')
    assert main(["eval", "--embedder", "hashing", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "needs a 'conversation'" in err and "\n" not in err
