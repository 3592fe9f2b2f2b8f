"""The README's quickstart and its psql examples run as written (test server, scratch schema).

Each runs with the two embedders a newcomer meets: the hashing embedder (no model installed) and
all-MiniLM-L6-v2 (after ``scripts/demo`` or ``scripts/test`` exported it into the models
directory, where ``embedding_provider="local"``, the default, finds it).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import psycopg
import pytest

from actrone_pg.cli import main
from actrone_pg.manager import MemoryManager
from actrone_pg.models import RetrievedContext

README = Path(__file__).parent.parent / "README.md"
SCRIPTS = README.parent / "scripts"
MINILM = "onnx:sentence-transformers/all-MiniLM-L6-v2"


@pytest.fixture(params=["hashing", pytest.param("minilm", marks=pytest.mark.model)])
def default_embedder(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    isolated_model_caches: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> str:
    """The default provider's models directory: empty, or holding MiniLM as the scripts leave it.

    Returns the name of the embedder the library will pick by itself.
    """
    for var in ("ACTRONE_EMBEDDING_PROVIDER", "ACTRONE_EMBEDDING_MODEL"):
        monkeypatch.delenv(var, raising=False)
    if request.param == "hashing":
        return "hashing-v1-256"
    minilm_dir: Path = request.getfixturevalue("minilm_dir")
    # isolated_model_caches points models_dir() at tmp_path / "models"
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "all-MiniLM-L6-v2").symlink_to(minilm_dir)
    return MINILM


@pytest.mark.postgres
def test_quickstart_surfaces_the_memory_it_shows(
    default_embedder: str,
    postgres_dsn: str,
    scratch_schema: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The snippet sets backend="postgres" in code; the environment supplies the server, as a
    # deployment would (ACTRONE_POSTGRES_DSN), and keeps it out of other tests' schema.
    monkeypatch.setenv("ACTRONE_POSTGRES_DSN", postgres_dsn)
    monkeypatch.setenv("ACTRONE_POSTGRES_SCHEMA", scratch_schema)
    seen: list[tuple[MemoryManager, RetrievedContext]] = []
    original = MemoryManager.retrieve_context

    async def keep(self: MemoryManager, *args: Any, **kwargs: Any) -> RetrievedContext:
        ctx = await original(self, *args, **kwargs)
        seen.append((self, ctx))
        return ctx

    monkeypatch.setattr(MemoryManager, "retrieve_context", keep)
    exec(compile(quickstart(), "README quickstart", "exec"), {"__name__": "quickstart"})
    ((mm, ctx),) = seen
    assert mm.embedder.name == default_embedder
    assert [m.content for m in ctx.episodic_memories] == ["The user is allergic to peanuts"]
    (memory,) = ctx.episodic_memories
    assert memory.explain is not None and memory.explain.cosine >= mm.relevance_threshold
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "I'm baking for a party on Saturday. -> Fun! What would you like to bake?"
    assert out[1].startswith("The user is allergic to peanuts Explain(cosine=")
    # tokens used / shares of the 2,000-token budget: the turn is ceil(35/4) + ceil(33/4) = 18,
    # the memory ceil(31/4) = 8; the L1 share is floor(0.35 * 2000), the L2 share floor(0.25 * 2000)
    assert out[-1] == "18 / 700 8 / 500"
    # the cosines the README quotes (hashing: 1 shared feature of 4 and 3, 1/sqrt(12))
    quoted = {"hashing-v1-256": "0.289", MINILM: "0.445"}[default_embedder]
    assert f"{memory.explain.cosine:.3f}" == quoted
    assert f"{quoted} against {mm.relevance_threshold:.3f}" in README.read_text().replace("\n", " ")


def quickstart() -> str:
    """The README's Python quickstart, as written."""
    match = re.search(r"## Quickstart\n\n```python\n(.*?)```", README.read_text(), re.S)
    assert match is not None
    return match.group(1)


@pytest.mark.postgres
def test_the_quickstart_run_twice_prints_the_same(
    postgres_dsn: str,
    scratch_schema: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # the embedded server keeps its data between runs, as this server does between the two
    monkeypatch.setenv("ACTRONE_POSTGRES_DSN", postgres_dsn)
    monkeypatch.setenv("ACTRONE_POSTGRES_SCHEMA", scratch_schema)
    monkeypatch.setenv("ACTRONE_EMBEDDING_PROVIDER", "hashing")
    runs = []
    for _ in range(2):
        exec(compile(quickstart(), "README quickstart", "exec"), {"__name__": "quickstart"})
        runs.append(capsys.readouterr().out.splitlines())
    first, second = runs
    assert first[0].startswith("I'm baking for a party on Saturday. -> Fun!")
    assert len(first) == 3 and first[-1] == "18 / 700 8 / 500"
    # one turn and one memory again, not two; the explain's ranks and scores are the same
    assert second == first


@pytest.mark.postgres
def test_the_readme_sql_runs_on_the_demo_data(
    default_embedder: str,
    postgres_dsn: str,
    scratch_schema: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("ACTRONE_POSTGRES_SCHEMA", scratch_schema)
    # the demo as a user runs it: no embedder chosen, so the default provider picks
    assert main(["demo", "--backend", "postgres", "--dsn", postgres_dsn, "--json"]) == 0
    assert f'"embedder": "{default_embedder}"' in capsys.readouterr().out
    block = re.search(r"```sql\n(SELECT session_id.*?)```", README.read_text(), re.S)
    assert block is not None
    code = re.sub(r"--[^\n]*", "", block.group(1))  # the block's comments hold no SQL
    statements = [q for q in code.split(";") if q.strip()]
    assert len(statements) == 5
    with psycopg.connect(postgres_dsn) as conn:
        results = [
            conn.execute(q.replace("actrone.", f"{scratch_schema}.")).fetchall() for q in statements
        ]
    assert all(results[:4]), [len(r) for r in results]
    # the hybrid search finds the allergy memory by its own vector: cosine 1, first by dense
    # rank (its fused position also depends on recency: it is the demo's oldest memory but one)
    found = {str(row[-1]): row for row in results[3]}
    allergy = found["Food allergies: the user is allergic to peanuts."]
    assert allergy[1] == pytest.approx(1.0) and allergy[2] == 1
    # the packing example gives what it says
    assert results[4] == [([1, 3],)]


def test_the_first_hour_note_comes_before_the_demo_command_and_matches_the_scripts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = README.read_text()
    section = text[text.index("## Contributing: two commands") :]
    note = " ".join(section[: section.index("```bash")].split())
    # no torch any more, and the note says so (scripts/export_test_model.py never imports it)
    assert "without torch" in note
    script_text = (SCRIPTS / "export_test_model.py").read_text()
    assert "import torch" not in script_text and "torch==" not in script_text
    # the place it names is where the library looks (on Linux, XDG_CACHE_HOME unset)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    import platformdirs

    models = Path(platformdirs.user_cache_dir("actrone-pg")) / "models" / "all-MiniLM-L6-v2"
    assert f"`~/{models.relative_to(Path.home())}` on Linux" in note
    # and the way out is one scripts/demo honours (tests/cli/test_output_streams.py runs it)
    assert "**`./scripts/demo --embedder hashing` skips the model**" in note


def test_the_typescript_quickstart_is_the_one_the_npm_package_tests() -> None:
    # typescript/test/pack.test.ts installs the packed tarball into an empty project and runs
    # typescript/README.md's quickstart; the README shows that same code.
    def first_ts_block(path: Path) -> str:
        match = re.search(r"```ts\n(.*?)```", path.read_text(), re.S)
        assert match is not None, path
        return match.group(1)

    assert first_ts_block(README) == first_ts_block(README.parent / "typescript" / "README.md")
