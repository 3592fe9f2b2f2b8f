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

import pytest

from actrone_pg.bench.reference import ReferenceError, find_driver, run_driver
from actrone_pg.evaluation.reference import find_eval_driver

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPTS = sorted(BENCHMARKS.glob("*.py"))


def test_the_benchmark_scripts_are_found() -> None:
    assert "qdrant_score_precision.py" in {p.name for p in SCRIPTS}


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_a_benchmark_script_imports(path: Path) -> None:
    spec = importlib.util.spec_from_file_location(f"benchmarks_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
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
