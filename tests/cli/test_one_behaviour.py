"""Every command alike: one default backend, unknown ids are errors, tables read at 80 columns."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from actrone_pg import MemoryConfig, create_memory_manager, migrations
from actrone_pg._cli._store import default_backend
from actrone_pg.cli import BROKEN_PIPE, main

LONG_ID = "6b1f0c2e-8d4a-4f3b-9e7c-1a2b3c4d5e6f"  # a default id: a UUID, 36 characters
LONG_TEXT = (
    "The user's sister Ana is lactose intolerant, so every dinner with her avoids milk, butter, "
    "cream and soft cheese; hard cheeses aged over a year are fine, and she likes oat milk in "
    "her coffee."
)


@pytest.mark.parametrize(
    ("given", "env", "embedded", "expected"),
    [
        (("redis_qdrant", None), {"ACTRONE_BACKEND": "memory"}, True, "redis_qdrant"),
        ((None, "postgresql://h/db"), {"ACTRONE_BACKEND": "memory"}, True, "postgres"),
        ((None, None), {"ACTRONE_BACKEND": "redis_qdrant"}, True, "redis_qdrant"),
        ((None, None), {"ACTRONE_POSTGRES_DSN": "postgresql://h/db"}, False, "postgres"),
        ((None, None), {}, True, "postgres"),
        ((None, None), {}, False, "memory"),
    ],
    ids=["option", "dsn", "environment", "env-dsn", "embedded", "nothing"],
)
def test_one_rule_for_the_default_backend(
    monkeypatch: pytest.MonkeyPatch,
    given: tuple[str | None, str | None],
    env: dict[str, str],
    embedded: bool,
    expected: str,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr("actrone_pg._cli._store.embedded_installed", lambda: embedded)
    assert default_backend(*given) == expected


def _env_store(monkeypatch: pytest.MonkeyPatch, dsn: str, schema: str) -> None:
    """A user who configured a server (as the embedded one is found), and nothing else."""
    monkeypatch.setenv("ACTRONE_POSTGRES_DSN", dsn)
    monkeypatch.setenv("ACTRONE_POSTGRES_SCHEMA", schema)
    monkeypatch.setenv("ACTRONE_EMBEDDING_PROVIDER", "hashing")


@pytest.mark.postgres
def test_after_the_demo_every_command_reads_its_store_with_no_option(
    postgres_dsn: str,
    scratch_schema: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _env_store(monkeypatch, postgres_dsn, scratch_schema)
    migrations.migrate(postgres_dsn, scratch_schema)
    assert main(["demo", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["backend"] == "postgres"
    assert main(["memories", "list", "--agent", "actrone-demo", "--json"]) == 0
    assert {m["id"] for m in json.loads(capsys.readouterr().out)["items"]} >= {"allergy", "ana"}
    assert main(["export", "--agent", "actrone-demo", "--out", str(tmp_path / "x.jsonl")]) == 0
    assert "8 memories (9 versions), 2 sessions, 5 turns" in capsys.readouterr().err
    assert main(["consolidate", "--agent", "actrone-demo", "--json"]) == 0
    assert {s["session"] for s in json.loads(capsys.readouterr().out)["sessions"]} == {
        "last-week",
        "today",
    }
    assert main(["sweep"]) == 0
    assert "from the postgres store" in capsys.readouterr().out


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.postgres
def test_an_unknown_agent_or_memory_is_an_error_of_one_line(
    postgres_dsn: str,
    scratch_schema: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _env_store(monkeypatch, postgres_dsn, scratch_schema)
    migrations.migrate(postgres_dsn, scratch_schema)
    assert main(["demo", "--json"]) == 0
    capsys.readouterr()
    out = tmp_path / "nobody.jsonl"
    for args, expected in [
        (["memories", "history", "--agent", "actrone-demo", "dieet"], "MemoryNotFoundError"),
        (["memories", "history", "--agent", "nobody", "diet"], "unknown agent 'nobody'"),
        (["memories", "list", "--agent", "nobody"], "unknown agent 'nobody'"),
        (["export", "--agent", "nobody", "--out", str(out)], "unknown agent 'nobody'"),
        (["consolidate", "--agent", "nobody"], "unknown agent 'nobody'"),
        (["consolidate", "--agent", "actrone-demo", "--session", "todya"], "session 'todya'"),
        (["inspect", "--dsn", postgres_dsn, "--schema", scratch_schema, "--agent", "nobody"],
         "unknown agent 'nobody'"),
        (["inspect", "--dsn", postgres_dsn, "--schema", scratch_schema, "--session", "todya"],
         "session 'todya'"),
    ]:  # fmt: skip
        assert main(args) == 2, args
        captured = capsys.readouterr()
        assert expected in _one_line(captured.err) and captured.out == "", args
    assert not out.exists()  # no empty export
    # a known agent with nothing matching a filter is no error: an empty page
    assert main(["memories", "list", "--agent", "actrone-demo", "--tag", "none", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["items"] == []


@pytest.mark.postgres
def test_tables_read_at_80_columns_with_ids_whole(
    postgres_dsn: str,
    scratch_schema: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _env_store(monkeypatch, postgres_dsn, scratch_schema)
    monkeypatch.setenv("COLUMNS", "80")
    migrations.migrate(postgres_dsn, scratch_schema)

    async def fill() -> None:
        async with create_memory_manager(MemoryConfig(backend="postgres")) as mm:
            await mm.inject_memory("a", LONG_TEXT, memory_id=LONG_ID, tags=["family"])
            await mm.store_turn("a", "s", LONG_TEXT, "Noted: " + LONG_TEXT)

    asyncio.run(fill())
    where = ["--dsn", postgres_dsn, "--schema", scratch_schema]
    # (command, how many times it shows the text: inspect has the turn's two messages too)
    for args, times in ((["memories", "list", "--agent", "a"], 1), (["inspect", *where], 3)):
        assert main(args) == 0
        lines = capsys.readouterr().out.splitlines()
        assert max(len(line.rstrip()) for line in lines) <= 80, args
        assert any(LONG_ID in line for line in lines), args  # the id on one line, whole
        words = " ".join(" ".join(lines).split())
        # every word of the text is there, none cut, and the text column is wide enough that
        # the 200 characters take a few lines, not dozens (they took 29 at 8 characters a line)
        assert all(w in words.split() for w in LONG_TEXT.split()), args
        holding = [line for line in lines if any(w in line for w in ("milk,", "coffee.", "cream"))]
        assert len(lines) < 40 and len(holding) <= 3 * times, (args, lines)


def _into_a_closed_pipe(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader left before a byte was written: deterministic
    try:
        return subprocess.run(
            [sys.executable, "-m", "actrone_pg.cli", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
            env=env,
        )
    finally:
        os.close(write_end)


@pytest.mark.postgres
def test_every_command_ends_alike_on_a_closed_pipe(
    postgres_dsn: str, scratch_schema: str, tmp_path: Path
) -> None:
    migrations.migrate(postgres_dsn, scratch_schema)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACTRONE_")}
    env.update(
        ACTRONE_POSTGRES_DSN=postgres_dsn,
        ACTRONE_POSTGRES_SCHEMA=scratch_schema,
        ACTRONE_EMBEDDING_PROVIDER="hashing",
        ACTRONE_POSTGRES_DATA_DIR=str(tmp_path / "none"),
        PYTHONPATH=str(Path(__file__).parents[2]),
    )
    for args in (
        ["demo"],  # rich's tables
        ["demo", "--json"],
        ["memories", "list", "--agent", "actrone-demo"],
        ["inspect", "--dsn", postgres_dsn, "--schema", scratch_schema],
        ["eval", "--embedder", "hashing"],
        ["server", "status"],
    ):
        done = _into_a_closed_pipe(args, env)
        assert (done.returncode, done.stderr) == (BROKEN_PIPE, ""), args
    # export talks on stderr by design (progress); it ends alike all the same
    done = _into_a_closed_pipe(["export", "--agent", "actrone-demo"], env)
    assert done.returncode == BROKEN_PIPE and "Traceback" not in done.stderr
    assert BROKEN_PIPE == 0
