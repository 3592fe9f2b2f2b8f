"""``actrone-pg consolidate`` and the consolidating ``actrone-pg sweep``, against PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from actrone_pg.cli import main
from actrone_pg.stores.postgres import PostgresSettings, PostgresStore
from tests.factories import turn

pytestmark = pytest.mark.postgres

LINES = [
    "I moved to Oslo last March with my wife Anna.",
    "Thanks!",
    "My dog Rex turns 3 on Friday.",
]


def seed(
    dsn: str, schema: str, session: str, ttl_seconds: float = 3600.0, *, agent: str = "A"
) -> None:
    async def run() -> None:
        store = PostgresStore(PostgresSettings(dsn, schema=schema))
        await store.setup()
        try:
            for i, text in enumerate(LINES):
                t = turn(agent, session, text, turn_id=f"{session}-{i}")
                await store.append_turn(t, max_turns=50, ttl_seconds=ttl_seconds)
        finally:
            await store.close()

    asyncio.run(run())


@pytest.fixture(autouse=True)
def hashing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACTRONE_EMBEDDING_PROVIDER", "hashing")


def test_consolidate_writes_each_memory_once_with_its_lineage(
    postgres_dsn: str, scratch_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(postgres_dsn, scratch_schema, "s")
    args = ["consolidate", "--agent", "A", "--session", "s", "--backend", "postgres"]
    args += ["--dsn", postgres_dsn, "--schema", scratch_schema]
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    got = [(m["source_turn_ids"], m["source"], m["session"]) for m in out["memories"]]
    assert got == [(["s-0"], "consolidated", "s"), (["s-2"], "consolidated", "s")]
    assert out["memories"][0]["content"].endswith("I moved to Oslo last March with my wife Anna.")
    assert main(args) == 0  # again: nothing new
    assert "0 memories written" in capsys.readouterr().out


def test_consolidate_without_session_does_every_live_session_with_pending_turns(
    postgres_dsn: str,
    scratch_schema: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seed(postgres_dsn, scratch_schema, "gone")
    seed(postgres_dsn, scratch_schema, "B-s", agent="B")
    time.sleep(3.5)
    # "gone" has been idle past the 3 s TTL: the sweeper's to consolidate, not this command's
    monkeypatch.setenv("ACTRONE_SESSION_TTL_HOURS", str(3 / 3600))
    for session in ("s2", "s1", "done"):
        seed(postgres_dsn, scratch_schema, session)
    base = ["consolidate", "--agent", "A", "--backend", "postgres"]
    base += ["--dsn", postgres_dsn, "--schema", scratch_schema]
    assert main([*base, "--session", "done"]) == 0
    capsys.readouterr()
    assert main([*base, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # only the live sessions with pending turns, in id order, each with what it wrote
    assert out["sessions"] == [
        {"session": "s1", "memories": 2, "error": None},
        {"session": "s2", "memories": 2, "error": None},
    ]
    assert [(m["session"], m["source_turn_ids"]) for m in out["memories"]] == [
        ("s1", ["s1-0"]),
        ("s1", ["s1-2"]),
        ("s2", ["s2-0"]),
        ("s2", ["s2-2"]),
    ]
    assert main(base) == 0  # nothing is pending any more
    captured = capsys.readouterr()
    assert "0 session(s) of agent 'A' to consolidate" in captured.err
    assert "0 session(s) consolidated, 0 memories written" in captured.out


def test_consolidate_reports_a_session_it_could_not_do_and_goes_on(
    postgres_dsn: str, scratch_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(postgres_dsn, scratch_schema, "s1")

    async def hold_lock() -> None:
        store = PostgresStore(PostgresSettings(postgres_dsn, schema=scratch_schema))
        await store.setup()
        try:
            assert await store.acquire_lock("A", "maintenance", "someone-else", 60.0)
        finally:
            await store.close()

    asyncio.run(hold_lock())
    args = ["consolidate", "--agent", "A", "--backend", "postgres"]
    args += ["--dsn", postgres_dsn, "--schema", scratch_schema]
    assert main(args) == 1
    captured = capsys.readouterr()
    assert "maintenance lock is held" in captured.out
    assert "0 session(s) consolidated, 0 memories written, 1 session(s) failed" in captured.out


def test_sweep_consolidates_an_expired_session_before_deleting_it(
    postgres_dsn: str, scratch_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(postgres_dsn, scratch_schema, "old", ttl_seconds=1.0)
    time.sleep(1.5)
    args = ["sweep", "--backend", "postgres", "--dsn", postgres_dsn, "--schema", scratch_schema]
    assert main([*args, "--ttl-hours", str(1 / 3600)]) == 0
    assert "removed 1 expired session(s)" in capsys.readouterr().out

    async def memories() -> list[tuple[str, ...]]:
        store = PostgresStore(PostgresSettings(postgres_dsn, schema=scratch_schema))
        await store.setup()
        try:
            assert await store.count_memories("A") == 2
            import psycopg
            from psycopg import sql

            async with await psycopg.AsyncConnection.connect(postgres_dsn) as conn:
                cur = await conn.execute(
                    sql.SQL("SELECT source_turn_ids FROM {} ORDER BY created_at").format(
                        sql.Identifier(scratch_schema, "memories")
                    )
                )
                return [tuple(r[0]) for r in await cur.fetchall()]
        finally:
            await store.close()

    assert asyncio.run(memories()) == [("old-0",), ("old-2",)]


def test_consolidate_refuses_the_in_process_store(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["consolidate", "--agent", "A", "--session", "s", "--backend", "memory"]) == 2
    assert "memory backend" in capsys.readouterr().err
