"""``actrone-pg migrate``, ``inspect`` and ``dsn`` against the test server."""

from __future__ import annotations

import pytest

from actrone_pg import migrations
from actrone_pg.cli import main

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
