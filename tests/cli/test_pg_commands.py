"""``actrone-pg migrate``, ``inspect``, ``dsn`` and ``sweep`` against the test server."""

from __future__ import annotations

import asyncio
import time

import psycopg
import psycopg.conninfo
import pytest
from psycopg import sql

from actrone_pg import migrations
from actrone_pg.cli import main
from actrone_pg.stores.postgres import PostgresSettings, PostgresStore
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
        store = PostgresStore(PostgresSettings(postgres_dsn, schema=scratch_schema))
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


@pytest.mark.parametrize("command", ["migrate", "inspect"])
def test_a_login_the_server_refuses_is_one_line_without_the_password(
    command: str, postgres_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # A role that does not exist is refused at login like a wrong password (the test server
    # trusts local logins, so a wrong password alone would be let in).
    dsn = psycopg.conninfo.make_conninfo(postgres_dsn, user="no_such_role", password="hunter2")
    assert main([command, "--dsn", dsn]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"actrone-pg {command}: StoreUnavailableError: cannot connect to PostgreSQL" in err
    assert 'role "no_such_role" does not exist' in err
    assert "hunter2" not in err and "password=***" in err


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        (["--revision", "9999"], "'9999': Can't locate revision identified by '9999'"),
        (["--revision", "9999", "--downgrade"], "'9999': Can't locate revision"),
        # a shipped revision, but above an empty schema: Alembic itself refuses it
        (["--revision", "0024", "--downgrade"], "'0024': Destination 0024 is not a valid"),
    ],
)
def test_an_unknown_revision_is_a_configuration_error(
    extra: list[str],
    reason: str,
    postgres_dsn: str,
    scratch_schema: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["migrate", "--dsn", postgres_dsn, "--schema", scratch_schema, *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"ConfigurationError: --revision: {reason}" in err
    known = ", ".join(sorted(migrations.known_revisions()))
    assert f"known revisions: base, {known}, head" in err
    assert migrations.current_revision(postgres_dsn, scratch_schema) is None  # nothing written


def test_sweep_creates_no_schema(
    postgres_dsn: str, scratch_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["sweep", "--backend", "postgres", "--dsn", postgres_dsn, "--schema", scratch_schema]
    assert main(args) == 2
    assert f"SchemaError: schema {scratch_schema!r} has never been migrated" in (
        capsys.readouterr().err
    )
    with psycopg.connect(postgres_dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname = %s", (scratch_schema,)
        ).fetchone()
    assert row == (0,)


def test_demo_shows_the_dsn_without_its_password(
    postgres_dsn: str,
    scratch_schema: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The test server trusts local logins: the password is sent and ignored.
    dsn = psycopg.conninfo.make_conninfo(postgres_dsn, password="hunter2")
    monkeypatch.setenv("ACTRONE_POSTGRES_SCHEMA", scratch_schema)
    for extra in (["--json"], []):
        args = ["demo", "--backend", "postgres", "--dsn", dsn, "--embedder", "hashing", *extra]
        assert main(args) == 0
        out = capsys.readouterr().out
        assert "hunter2" not in out and "***" in out


def test_migrate_check_says_whether_the_schema_is_at_head_and_changes_nothing(
    postgres_dsn: str, scratch_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["migrate", "--check", "--dsn", postgres_dsn, "--schema", scratch_schema]
    head = migrations.head_revision()
    assert main(args) == 1
    assert f"schema {scratch_schema}: empty, the newest is {head}" in capsys.readouterr().out
    assert migrations.current_revision(postgres_dsn, scratch_schema) is None
    migrations.migrate(postgres_dsn, scratch_schema)
    assert main(args) == 0
    assert f"schema {scratch_schema}: at {head}, the newest" in capsys.readouterr().out


def test_migrate_checks_the_text_search_config_before_creating_anything(
    postgres_dsn: str,
    scratch_schema: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ACTRONE_POSTGRES_TEXT_SEARCH_CONFIG", "klingon")
    assert main(["migrate", "--dsn", postgres_dsn, "--schema", scratch_schema]) == 2
    err = capsys.readouterr().err
    assert "ConfigurationError" in err and "klingon" in err
    with psycopg.connect(postgres_dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname = %s", (scratch_schema,)
        ).fetchone()
    assert row == (0,)
