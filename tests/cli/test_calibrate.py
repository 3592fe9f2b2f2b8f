"""``actrone-pg calibrate`` end to end: files in, the hand-worked threshold out."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import pytest

from actrone_pg.cli import main
from actrone_pg.embedders.hashing import HASHING_THRESHOLD


class AngleEmbedder:
    """'q' is the x axis; a text 's=0.6125' is the unit vector whose cosine with 'q' is 0.6125."""

    name = "angle"
    dimensions = 2
    relevance_threshold = None

    async def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        out = []
        for t in texts:
            c = 1.0 if t == "q" else float(t.split("=")[1])
            out.append([c, math.sqrt(1.0 - c * c)])
        return out


ROWS = [
    (0.9125, True),
    (0.8125, False),
    (0.7125, True),
    (0.6125, True),
    (0.5125, False),
    (0.3125, False),
]


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    assert main(["calibrate", *args, "--json"]) == 0
    out: dict[str, object] = json.loads(capsys.readouterr().out)
    return out


def test_calibrate_a_jsonl_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "pairs.jsonl"
    path.write_text(
        "\n".join(json.dumps({"query": "q", "memory": f"s={s}", "relevant": r}) for s, r in ROWS)
    )
    out = run_json(
        capsys, "--embedder", "tests.cli.test_calibrate:AngleEmbedder", "--pairs", str(path)
    )
    # Worked out in tests/test_calibration.py: best F2 15/16 at 0.612 (TP 3, FP 1).
    assert out["threshold"] == 0.612
    assert out["precision"] == 0.75 and out["recall"] == 1.0
    assert out["embedder"] == "angle" and out["declared"] is None


def test_calibrate_a_csv_file_prints_a_histogram(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "pairs.csv"
    path.write_text("query,memory,relevant\n" + "".join(f"q,s={s},{r}\n" for s, r in ROWS))
    assert (
        main(
            [
                "calibrate",
                "--embedder",
                "tests.cli.test_calibrate:AngleEmbedder",
                "--pairs",
                str(path),
                "--bins",
                "4",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "threshold 0.612" in text and "precision 0.750" in text and "◀ threshold" in text
    assert "█" in text


def test_hashing_reproduces_its_built_in_threshold(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_json(capsys, "--embedder", "hashing")
    assert out["threshold"] == HASHING_THRESHOLD
    assert out["declared"] is not None


@pytest.mark.model
def test_minilm_reproduces_its_built_in_threshold(
    minilm_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from actrone_pg.embedders.onnx import MINILM_THRESHOLD

    out = run_json(capsys, "--embedder", "minilm", "--model-dir", str(minilm_dir))
    assert out["embedder"] == "onnx:sentence-transformers/all-MiniLM-L6-v2"
    assert out["threshold"] == MINILM_THRESHOLD


def test_bad_pairs_file_is_a_clean_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"query": "q"}\n')
    assert main(["calibrate", "--embedder", "hashing", "--pairs", str(path)]) == 2
    assert "missing memory, relevant" in capsys.readouterr().err
