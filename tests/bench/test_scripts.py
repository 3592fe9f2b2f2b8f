"""Every script under ``benchmarks/`` imports, and the reference drivers stand alone.

The scripts are run by hand, so nothing else would notice when one of them imports a name that
moved. Importing runs no benchmark: each script does its work under ``__main__`` only.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from actrone_pg.bench.reference import ReferenceError, find_driver, run_driver
from actrone_pg.embedders import OnnxEmbedder
from actrone_pg.evaluation.reference import find_eval_driver

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
#: The meters and helpers in benchmarks/, the one-off experiments in benchmarks/experiments/.
SCRIPTS = sorted(BENCHMARKS.glob("*.py")) + sorted((BENCHMARKS / "experiments").glob("*.py"))


def test_the_benchmark_scripts_are_found() -> None:
    found = {p.relative_to(BENCHMARKS).as_posix() for p in SCRIPTS}
    assert {"faults.py", "experiments/qdrant_score_precision.py"} <= found


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_a_benchmark_script_imports(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name = f"benchmarks_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # As an import would: dataclasses resolve a module's string annotations through sys.modules.
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    assert callable(getattr(module, "main", None)), f"{path.name} has no main()"


@pytest.mark.parametrize("driver", [find_driver(), find_eval_driver()], ids=str)
def test_a_reference_driver_runs_without_actrone_pg(driver: Path) -> None:
    # -I: isolated mode, neither the working directory nor site-packages' actrone_pg is on the
    # path; the reference environment has only the standard library and actrone-memory.
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(driver), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "--data" in done.stdout


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("import sys; sys.exit(3)", "failed (exit 3)"),
        ("print('progress, no result')", "printed no JSON result"),
    ],
)
def test_a_failing_driver_is_a_clear_error(code: str, message: str) -> None:
    with pytest.raises(ReferenceError, match=re.escape(message)):
        run_driver([sys.executable, "-c", code])


def test_a_driver_result_is_its_last_stdout_line() -> None:
    code = 'print(\'warming up\'); print(); print(\'{"system": "x", "hits": [1, 2]}\')'
    assert run_driver([sys.executable, "-c", code]) == {"system": "x", "hits": [1, 2]}


# -- benchmarks/embedder_vs_fastembed.py: everything but fastembed itself --


def _load_script(name: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    path = BENCHMARKS / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"benchmarks_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


def test_the_fastembed_driver_runs_without_actrone_pg() -> None:
    # fastembed's environment has no actrone_pg: the driver must parse its arguments with the
    # standard library alone (fastembed is imported only after that).
    driver = BENCHMARKS / "fastembed_driver.py"
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(driver), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "--model-dir" in done.stdout


def test_the_comparison_says_how_to_get_a_fastembed_python(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = _load_script("embedder_vs_fastembed", monkeypatch)
    monkeypatch.delenv(script.PYTHON_ENV, raising=False)
    (tmp_path / "model.onnx").write_bytes(b"")
    with pytest.raises(SystemExit) as exit_info:
        script.parse_args(["--model-dir", str(tmp_path)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert script.PYTHON_ENV in err and "pip install fastembed==0.9.1" in err

    monkeypatch.setenv(script.PYTHON_ENV, sys.executable)
    args, python = script.parse_args(["--model-dir", str(tmp_path), "--batch-sizes", "32,64"])
    assert python == Path(sys.executable) and args.batch_sizes == [32, 64] and not args.sync
    for bad in (["--batch-sizes", "0"], ["--rounds", "0"], ["--model-dir", str(tmp_path / "x")]):
        with pytest.raises(SystemExit):
            script.parse_args(["--model-dir", str(tmp_path), *bad])


def test_the_comparison_refuses_embedders_that_compute_different_vectors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    script = _load_script("embedder_vs_fastembed", monkeypatch)
    ours = np.array([[1.0, 0.0], [0.6, 0.8]])
    # Same directions, other lengths: cosines 1 and 1 (the check normalises both sides).
    assert script.check_same_vectors(ours, ours * 3.0) == pytest.approx(1.0)
    tilted = np.array([[1.0, 0.0], [0.8, 0.6]])  # second row: cosine 0.6*0.8 + 0.8*0.6 = 0.96
    with pytest.raises(SystemExit, match=r"lowest cosine 0\.960000 .* text #1"):
        script.check_same_vectors(ours, tilted)


def test_the_comparison_reports_ratios_of_time_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    script = _load_script("embedder_vs_fastembed", monkeypatch)
    work = script.Workload("batch ingest", 32)
    work.add_round([0.2, 0.4, 0.3], [0.4, 0.6, 0.5])  # medians 0.3 / 0.5
    work.add_round([0.1], [0.4])  # 0.1 / 0.4
    assert work.round_ratios == pytest.approx([0.6, 0.25])
    text = "\n".join(work.lines())
    # Over all calls: ours median 0.25 s (128 texts/s), theirs median 0.45 s; p99 0.4 / 0.6.
    assert "128.0 texts/s" in text
    assert "median 0.556, p99 0.667; per-round medians 0.250-0.600" in text


async def test_the_comparison_times_our_embedder_on_its_texts(
    monkeypatch: pytest.MonkeyPatch, tiny_encoder_dir: Path
) -> None:
    script = _load_script("embedder_vs_fastembed", monkeypatch)
    texts = script.memory_texts(40, seed=3)
    assert len(set(texts)) == 40 and texts == script.memory_texts(40, seed=3)
    assert max(len(t.split()) for t in texts) < 100  # far below MiniLM's 256 tokens
    emb = OnnxEmbedder.from_directory(tiny_encoder_dir, "mean")
    chunks = [texts[:8], texts[8:16], script.query_texts(1, seed=3)]
    seconds = await script.time_calls(emb, chunks)
    assert len(seconds) == 3 and all(s > 0 for s in seconds)
    blocking = script.time_calls_sync(emb, chunks)
    assert len(blocking) == 3 and all(s > 0 for s in blocking)


def test_the_index_names_every_script_and_only_those() -> None:
    # benchmarks/README.md says what each script is for; a script added, moved or removed
    # without its line there fails here.
    index = (BENCHMARKS / "README.md").read_text(encoding="utf-8")
    scripts = {p.name for p in SCRIPTS}
    named = set(re.findall(r"`(?:experiments/)?(\w+\.py)`", index))
    assert scripts - named == set(), "scripts missing from benchmarks/README.md"
    assert named - scripts == set(), "benchmarks/README.md names scripts that do not exist"
    # each experiment is named under the experiments heading, each meter above it
    experiments = index[index.index("## Experiments") : index.index("## Helpers")]
    for path in SCRIPTS:
        in_experiments = f"`{path.name}`" in experiments
        assert in_experiments == (path.parent.name == "experiments"), path.name


# -- the scripts that load the bench's data (actrone_pg.bench.loaded.data_arguments) --


@pytest.mark.parametrize("name", ["pg_call_breakdown", "pg_client_cpu", "retrieve_ab"])
@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("0", "argument --agents: must be at least 1, not 0"),
        ("x", "argument --agents: expected a whole number, not 'x'"),
    ],
)
def test_a_data_script_refuses_a_count_before_it_starts_a_server(
    name: str, given: str, said: str
) -> None:
    texts = ["head"] if name == "retrieve_ab" else []
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / f"{name}.py"), *texts, "--agents", given],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert said in done.stderr
    assert "Traceback" not in done.stderr and "embedded PostgreSQL" not in done.stderr
