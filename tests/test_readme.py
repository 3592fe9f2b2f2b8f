"""The README's quickstart and its psql examples run as written (test server, scratch schema)."""

from __future__ import annotations

import re
from pathlib import Path

import psycopg
import pytest

from actrone_pg.cli import main

README = Path(__file__).parent.parent / "README.md"


@pytest.mark.postgres
def test_quickstart_runs(
    postgres_dsn: str,
    scratch_schema: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The snippet sets backend="postgres" in code; the environment supplies the server, as a
    # deployment would (ACTRONE_POSTGRES_DSN), and keeps it out of other tests' schema.
    monkeypatch.setenv("ACTRONE_POSTGRES_DSN", postgres_dsn)
    monkeypatch.setenv("ACTRONE_POSTGRES_SCHEMA", scratch_schema)
    monkeypatch.setenv("ACTRONE_EMBEDDING_PROVIDER", "hashing")
    match = re.search(r"## Quickstart\n\n```python\n(.*?)```", README.read_text(), re.S)
    assert match is not None
    exec(compile(match.group(1), "README quickstart", "exec"), {"__name__": "quickstart"})
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Plan dinner? -> Sure, for how many?"
    # tokens used / shares of the 2,000-token budget: the turn is ceil(12/4) + ceil(19/4) = 8;
    # the hashing embedder shares no word between the query and the memory, so L2 uses 0
    assert out[-1] == "8 / 700 0 / 500"


@pytest.mark.postgres
def test_the_readme_sql_runs_on_the_demo_data(
    postgres_dsn: str,
    scratch_schema: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("ACTRONE_POSTGRES_SCHEMA", scratch_schema)
    args = ["demo", "--backend", "postgres", "--dsn", postgres_dsn, "--embedder", "hashing"]
    assert main(args) == 0
    capsys.readouterr()
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
    # the hybrid search finds the allergy memory first; the packing example gives what it says
    assert str(results[3][0][-1]).startswith("Food allergies")
    assert results[4] == [([1, 3],)]
