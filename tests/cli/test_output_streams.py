"""stdout holds a command's output and nothing else; a reader that goes away ends it quietly.

These run the real programs in subprocesses, with real pipes: ``scripts/demo`` (whose setup
steps talk on stderr) and the ``actrone-pg`` entry point writing into a pipe whose reader has
closed (``| head -1``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from actrone_pg.cli import BROKEN_PIPE

ROOT = Path(__file__).parents[2]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"


def _scripts_env(tmp_path: Path, minilm_dir: Path) -> dict[str, str]:
    """The environment of a user whose models directory already holds the MiniLM export."""
    cache = tmp_path / "cache"
    (cache / "actrone-pg" / "models").mkdir(parents=True)
    (cache / "actrone-pg" / "models" / "all-MiniLM-L6-v2").symlink_to(minilm_dir)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACTRONE_")}
    env["XDG_CACHE_HOME"] = str(cache)
    return env


@pytest.fixture
def scripts_venv() -> Path:
    if not VENV_PYTHON.exists():
        pytest.skip("scripts/demo runs from the repository's .venv; run ./scripts/test first")
    return VENV_PYTHON


@pytest.mark.model
def test_scripts_demo_json_prints_only_json_on_stdout(
    scripts_venv: Path, tmp_path: Path, minilm_dir: Path
) -> None:
    env = _scripts_env(tmp_path, minilm_dir)
    done = subprocess.run(
        [str(ROOT / "scripts" / "demo"), "--json", "--backend", "memory"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    out = json.loads(done.stdout)  # the whole of stdout is the document
    assert out["embedder"] == "onnx:sentence-transformers/all-MiniLM-L6-v2"
    # the model step ran, and said so where it belongs
    assert "model already exported: " in done.stderr


@pytest.mark.model
def test_scripts_demo_with_the_hashing_embedder_skips_the_model_step(
    scripts_venv: Path, tmp_path: Path, minilm_dir: Path
) -> None:
    env = _scripts_env(tmp_path, minilm_dir)
    for args in (["--embedder", "hashing"], ["--embedder=hashing"]):
        done = subprocess.run(
            [str(ROOT / "scripts" / "demo"), "--json", "--backend", "memory", *args],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        assert json.loads(done.stdout)["embedder"] == "hashing-v1-256"
        assert "model" not in done.stderr  # the export script never ran


def test_the_export_script_keeps_stdout_empty(tmp_path: Path) -> None:
    out = tmp_path / "minilm"
    out.mkdir()
    (out / "model.onnx").write_bytes(b"")  # a complete export, as far as the script checks
    (out / "tokenizer.json").write_text("{}")
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "export_test_model.py"), "--out", str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout == ""
    assert done.stderr == f"model already exported: {out.resolve()}\n"


def _into_a_closed_pipe(args: list[str]) -> subprocess.CompletedProcess[str]:
    """Run ``actrone-pg ARGS`` with stdout a pipe whose reader closed before it wrote a byte.

    This is ``| head -1`` at its most hostile: every write fails with EPIPE, whatever the
    timing, so the test is deterministic.
    """
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "actrone_pg.cli", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize(
    "args",
    [
        ["server", "status", "--data-dir", "{tmp}/no-cluster"],
        ["demo", "--backend", "memory", "--embedder", "hashing", "--json"],
        ["demo", "--backend", "memory", "--embedder", "hashing"],  # rich's tables
    ],
    ids=["server-status", "demo-json", "demo-tables"],
)
def test_a_reader_that_went_away_ends_the_command_quietly(args: list[str], tmp_path: Path) -> None:
    done = _into_a_closed_pipe([a.replace("{tmp}", str(tmp_path)) for a in args])
    assert done.stderr == ""  # no traceback, no "Exception ignored"
    assert done.returncode == BROKEN_PIPE


def test_head_reads_the_first_line_and_nothing_is_printed_on_stderr(tmp_path: Path) -> None:
    # The ordinary pipeline, repeated: the reader exits after one line while the writer may
    # still be writing (the race that printed a traceback in about half the runs).
    command = (
        f"{sys.executable} -m actrone_pg.cli server status --data-dir {tmp_path}/none | head -1"
    )
    for _ in range(10):
        done = subprocess.run(
            ["bash", "-c", command], capture_output=True, text=True, timeout=60, check=True
        )
        assert done.stdout == f"data directory  {tmp_path.resolve()}/none\n"
        assert done.stderr == ""
