"""``actrone-pg export`` and ``actrone-pg import`` on PostgreSQL, as a user runs them."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest

from actrone_pg import MemoryConfig, MemoryManager, create_memory_manager, migrations
from actrone_pg.cli import main

pytestmark = pytest.mark.postgres

AGENT = "agent-cli-export"
T = TypeVar("T")


def _with(dsn: str, schema: str, work: Callable[[MemoryManager], Awaitable[T]]) -> T:
    async def run() -> T:
        config = MemoryConfig(
            backend="postgres",
            postgres_dsn=dsn,
            postgres_schema=schema,
            embedding_provider="hashing",
        )
        async with create_memory_manager(config) as mm:
            return await work(mm)

    return asyncio.run(run())


async def _fill(mm: MemoryManager) -> None:
    await mm.inject_memory(AGENT, "lives in Lisbon", memory_id="home")
    await mm.update_memory(AGENT, "home", content="lives in Porto")
    await mm.inject_memory(AGENT, "likes green tea", source_turn_ids=["t1"])
    await mm.store_turn(AGENT, "s1", "hi", "hello", turn_id="t1")


async def _state(mm: MemoryManager) -> tuple[list[str], int, int]:
    history = [m.content for m in await mm.memory_history(AGENT, "home")]
    return history, await mm.count_memories(AGENT), len(await mm.list_sessions(AGENT))


def test_export_then_import_twice_then_a_bad_line(
    postgres_dsn: str, scratch_schema: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    migrations.migrate(postgres_dsn, scratch_schema)
    _with(postgres_dsn, scratch_schema, _fill)
    where = ["--dsn", postgres_dsn, "--schema", scratch_schema]
    path = tmp_path / "a.jsonl"
    assert main(["export", "--agent", AGENT, *where, "--out", str(path)]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"actrone-pg: exported agent {AGENT!r}: 2 memories (3 versions), 1 sessions, 1 turns "
        f"to {path}\n"
    )
    # without --out, stdout is the file itself
    assert main(["export", "--agent", AGENT, *where]) == 0
    streamed = capsys.readouterr().out.splitlines()
    assert streamed[1:] == path.read_text(encoding="utf-8").splitlines()[1:]
    assert json.loads(streamed[0])["counts"]["versions"] == 3

    _with(postgres_dsn, scratch_schema, lambda mm: mm.erase_agent(AGENT))
    target = [*where, "--embedder", "hashing"]
    assert main(["import", str(path), *target]) == 0
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"actrone-pg: imported agent {AGENT!r}: 2 memories (3 versions), 1 sessions, 1 turns; "
        "written: 2 memories (3 versions), 1 turns"
    )
    assert _with(postgres_dsn, scratch_schema, _state) == (
        ["lives in Lisbon", "lives in Porto"],
        2,
        1,
    )
    assert main(["import", str(path), *target]) == 0  # the second import writes nothing
    assert capsys.readouterr().err.endswith("written: 0 memories (0 versions), 0 turns\n")

    lines = path.read_text(encoding="utf-8").splitlines()
    number = next(i for i, x in enumerate(lines, 1) if "likes green tea" in x)
    lines[number - 1] = lines[number - 1].replace("likes green tea", "a\\u0000b")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    _with(postgres_dsn, scratch_schema, lambda mm: mm.erase_agent(AGENT))
    assert main(["import", str(bad), *target]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        f"actrone-pg import: ValidationError: {bad}, line {number}: version 1: content "
        "contains a NUL byte (\\x00), which PostgreSQL cannot store"
    )
    assert _with(postgres_dsn, scratch_schema, _state) == ([], 0, 0)  # nothing written


def test_both_refuse_the_in_process_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export", "--agent", "a", "--backend", "memory"]) == 2
    assert "ConfigurationError: backend: the memory backend lives inside one process" in (
        capsys.readouterr().err
    )
    assert main(["import", str(tmp_path / "x.jsonl"), "--backend", "memory"]) == 2
    assert "ConfigurationError: backend" in capsys.readouterr().err


def test_the_help_says_what_each_does(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("export", "import"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert "every version" in text and "docs/export.md" in text, command
