"""Running the reference system, actrone-memory 0.3.0, on the benchmark's data.

actrone-memory is never imported here: it lives in its own virtual environment
(``--setup-reference`` creates one) and :mod:`actrone_pg.bench.reference_driver` runs there as
a script in a subprocess. This module writes the data the driver reads (plain float32 files and
JSON, so the driver needs no numpy), launches it, and turns its raw timings and search hits into
a :class:`~actrone_pg.bench.workload.BenchResult` computed exactly as for actrone_pg (same
percentiles, same exact scan for recall).
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from actrone_pg.bench.workload import (
    SESSION_ID,
    TOKEN_BUDGET,
    BenchResult,
    Dataset,
    LatencyStats,
    exact_candidates,
    schedule,
    tie_keys,
    unit_rows,
)

__all__ = [
    "REFERENCE_REQUIREMENT",
    "ReferenceError",
    "default_reference_venv",
    "find_driver",
    "reference_python",
    "reference_result",
    "run_driver",
    "run_reference",
    "setup_reference_venv",
    "write_reference_data",
]

#: What ``--setup-reference`` installs into the reference environment.
REFERENCE_REQUIREMENT = "actrone-memory[pgvector]==0.3.0"
#: Environment variable naming the reference environment's Python.
PYTHON_ENV = "ACTRONE_BENCH_REFERENCE_PYTHON"


class ReferenceError(RuntimeError):
    """The reference system could not be set up or run; the message says what to do."""


def default_reference_venv() -> Path:
    """Where ``--setup-reference`` puts the reference environment by default."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("actrone-pg")) / "reference-venv"


def _venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def reference_python(explicit: str | None, venv: Path | None = None) -> Path | None:
    """The reference Python: ``--reference-python``, else the env variable, else the venv's."""
    if explicit:
        return Path(explicit)
    from_env = os.environ.get(PYTHON_ENV)
    if from_env:
        return Path(from_env)
    candidate = _venv_python(venv or default_reference_venv())
    return candidate if candidate.exists() else None


def setup_reference_venv(venv: Path) -> Path:
    """Create ``venv`` (if needed) and install actrone-memory 0.3.0 into it; returns its Python."""
    python = _venv_python(venv)
    try:
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", REFERENCE_REQUIREMENT],
            check=True,
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        raise ReferenceError(
            f"could not set up the reference environment in {venv}: {exc}. Create it by hand: "
            f"python3 -m venv {venv} && {python} -m pip install '{REFERENCE_REQUIREMENT}'"
        ) from None
    return python


def find_driver(explicit: str | None = None) -> Path:
    """The driver script the reference Python runs: the given path, else the one shipped here.

    :mod:`actrone_pg.bench.reference_driver` is a file of this package that only the reference
    environment executes; actrone_pg never imports it.
    """
    path = Path(explicit) if explicit else Path(__file__).with_name("reference_driver.py")
    if not path.is_file():
        raise ReferenceError(f"reference driver {path} not found; check --reference-driver")
    return path


def write_reference_data(
    dataset: Dataset, directory: Path, *, queries: int, warmup: int, limit: int
) -> None:
    """Write what the driver reads: ``meta.json`` and per-agent little-endian float32 files."""
    directory.mkdir(parents=True, exist_ok=True)
    agents = []
    for i, agent in enumerate(dataset.agents):
        agent.vectors.astype("<f4").tofile(directory / f"vectors_{i}.f32")
        agent.query_vectors.astype("<f4").tofile(directory / f"queries_{i}.f32")
        agents.append(
            {
                "agent_id": agent.agent_id,
                "texts": agent.texts,
                "query_texts": agent.query_texts,
                "turns": agent.turns,
            }
        )
    meta = {
        "dimensions": dataset.spec.dimensions,
        "threshold": dataset.threshold,
        "limit": limit,
        "token_budget": TOKEN_BUDGET,
        "session_id": SESSION_ID,
        "warmup_schedule": schedule(dataset, warmup),
        "schedule": schedule(dataset, queries),
        "agents": agents,
    }
    (directory / "meta.json").write_text(json.dumps(meta))


def run_reference(
    python: Path, driver: Path, data_dir: Path, dsn: str, *, table_prefix: str
) -> dict[str, Any]:
    """Run the driver with the reference Python; returns its JSON output."""
    if not python.exists():
        raise ReferenceError(
            f"reference Python {python} does not exist; pass --setup-reference to create the "
            f"environment, or point --reference-python / {PYTHON_ENV} at a Python that has "
            f"'{REFERENCE_REQUIREMENT}' installed"
        )
    cmd = [
        str(python),
        str(driver),
        "--data",
        str(data_dir),
        "--dsn",
        dsn,
        "--table-prefix",
        table_prefix,
    ]
    return run_driver(cmd)


def run_driver(cmd: list[str]) -> dict[str, Any]:
    """Run a reference driver's command line; the JSON object it printed last on stdout.

    Its stderr (progress lines, or the error) goes straight to the terminal.
    """
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=False)
    if proc.returncode != 0:
        raise ReferenceError(
            f"the reference driver failed (exit {proc.returncode}); its error is printed above"
        )
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    try:
        out: dict[str, Any] = json.loads(lines[-1])
    except (IndexError, ValueError):
        raise ReferenceError("the reference driver printed no JSON result") from None
    return out


def reference_result(
    raw: dict[str, Any], dataset: Dataset, *, queries: int, warmup: int, limit: int
) -> BenchResult:
    """Summarise the driver's raw output the same way actrone_pg's run is summarised."""
    pairs = schedule(dataset, queries)
    hits: list[list[int]] = raw["search_hits"]
    stored = [unit_rows(a.vectors) for a in dataset.agents]
    ties = [tie_keys(a) for a in dataset.agents]
    recalls: list[float] = []
    admitted: list[int] = []
    for (a, q), got_idx in zip(pairs, hits, strict=True):
        agent = dataset.agents[a]
        qv = unit_rows(agent.query_vectors[q : q + 1])[0]
        n_admitted, exact = exact_candidates(stored[a], qv, dataset.threshold, limit, ties[a])
        admitted.append(n_admitted)
        want = {int(i) for i in exact}
        recalls.append(len(want & set(got_idx)) / len(want) if want else 1.0)
    spec = dataset.spec
    return BenchResult(
        backend=f"{raw['system']} {raw['version']}",
        agents=spec.agents,
        per_agent=spec.per_agent,
        dimensions=spec.dimensions,
        threshold=dataset.threshold,
        seed=spec.seed,
        memories=int(raw["memories"]),
        ingest_seconds=float(raw["ingest_seconds"]),
        ingest_rate=float(raw["ingest_rate"]),
        retrieve=LatencyStats.of(raw["retrieve_ms"]),
        search=LatencyStats.of(raw["search_ms"]),
        recall_mean=statistics.fmean(recalls) if recalls else math.nan,
        recall_min=min(recalls) if recalls else math.nan,
        recall_queries=len(recalls),
        admitted_median=statistics.median(admitted) if admitted else math.nan,
        admitted_min=min(admitted) if admitted else 0,
        admitted_max=max(admitted) if admitted else 0,
        returned_median=statistics.median(len(h) for h in hits) if hits else math.nan,
        context_memories_median=statistics.median(raw["context_sizes"])
        if raw["context_sizes"]
        else math.nan,
        warmup=warmup,
        notes=[f"{raw['stores']} on {raw['server']}"],
    )
