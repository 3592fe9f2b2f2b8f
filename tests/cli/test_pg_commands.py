"""``actrone-pg migrate``, ``inspect``, ``dsn`` and ``sweep`` against the test server."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from actrone_pg import migrations
from actrone_pg.cli import main
from actrone_pg.stores.postgres import PostgresStore
from tests.factories import turn

pytestmark = pytest.mark.postgres


def test_migrate_inspect_and_dsn(
    postgres_dsn: str, scratch_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["migrate", "--dsn", postgres_dsn, "--schema", scratch_schema]) == 0
    out = capsys.readouterr().out
    assert f"schema {scratch_schema}: empty -> {migrations.head_revision()}" in out
    assert main(["inspect", "--dsn", postgres_dsn, "--schema", scratch_schema]) == 0
    out = capsys.readouterr().out
    for title in ("session_overview", "recent_turns", "memory_overview"):
        assert f"{scratch_schema}.{title}" in out
    assert main(["dsn", "--dsn", postgres_dsn]) == 0
    assert capsys.readouterr().out.strip() == postgres_dsn


def test_bad_schema_is_a_clean_error(postgres_dsn: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["migrate", "--dsn", postgres_dsn, "--schema", "x;drop"]) == 2
    assert "postgres_schema" in capsys.readouterr().err


def test_inspect_of_an_unmigrated_schema_says_what_to_do(
    postgres_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["inspect", "--dsn", postgres_dsn, "--schema", "nothing_here"]) == 1
    assert "actrone-pg migrate" in capsys.readouterr().out


def test_sweep_removes_expired_sessions_and_their_turns(
    postgres_dsn: str, scratch_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    async def seed() -> None:
        store = PostgresStore(postgres_dsn, schema=scratch_schema)
        await store.setup()
        try:
            for session in ("old-1", "old-2"):
                await store.append_turn(turn("A", session), max_turns=50, ttl_seconds=1.0)
        finally:
            await store.close()

    def turns() -> int:
        with psycopg.connect(postgres_dsn) as conn:
            row = conn.execute(
                sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(scratch_schema, "turns"))
            ).fetchone()
        assert row is not None
        return int(row[0])

    asyncio.run(seed())
    assert turns() == 2
    time.sleep(1.5)
    args = ["sweep", "--backend", "postgres", "--dsn", postgres_dsn, "--schema", scratch_schema]
    assert main([*args, "--ttl-hours", "1", "--batch", "1"]) == 0  # nothing idle for an hour
    assert "removed 0 expired session(s) from the postgres store" in capsys.readouterr().out
    assert main([*args, "--ttl-hours", str(1 / 3600), "--batch", "1"]) == 0  # one second
    assert "removed 2 expired session(s) from the postgres store" in capsys.readouterr().out
    assert turns() == 0  # the turns went with their sessions


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
    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```sql\n(SELECT session_id.*?)```", readme, re.S)
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
