"""Export and import of an agent through actrone_pg.export, on every backend."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import actrone_pg.export
from actrone_pg.config import MemoryConfig
from actrone_pg.errors import ValidationError
from actrone_pg.export import FORMAT, FORMAT_VERSION, export_agent, import_agent
from actrone_pg.manager import MemoryManager
from actrone_pg.stores.base import Store

AGENT = "agent-export"


async def _manager(store: Store) -> MemoryManager:
    cfg = MemoryConfig(backend=store.backend, embedding_provider="hashing")  # type: ignore[arg-type]
    return await MemoryManager.create(cfg, store=store)


async def _fill(mm: MemoryManager, agent: str = AGENT) -> None:
    """Memories with versions, lineage, expiry, metadata; two sessions with turns."""
    soon = datetime.now(UTC) + timedelta(days=30)
    await mm.inject_memory(agent, "lives in Lisbon", tags=["home"], memory_id="home")
    await mm.update_memory(agent, "home", content="lives in Porto", metadata={"city": "Porto"})
    await mm.update_memory(agent, "home", importance=0.9, expires_at=soon)
    await mm.inject_memory(
        agent,
        "planned a trip to Japan",
        source="consolidated",
        content_type="summary",
        session_id="s1",
        source_turn_ids=["t1", "t2"],
        created_at=datetime(2026, 5, 1, 12, 0, 0, 123456, tzinfo=UTC),
        metadata={"score": 0.25, "nested": {"list": [1, "two", None, True]}},
    )
    await mm.inject_memories(agent, [f"fact number {i} ünïcødé" for i in range(5)])
    await mm.store_turn(agent, "s1", "Let's go to Japan", "Great idea!", turn_id="t1")
    await mm.store_turn(
        agent, "s1", "In April", "Noted.", turn_id="t2", tool_results=[{"tool": "cal", "ok": 1}]
    )
    await mm.store_turn(agent, "s2", "hi", "hello", turn_id="t3")
    await mm.set_session_metadata(agent, "s2", {"channel": "web"})


def _records(text: str) -> tuple[dict[str, Any], list[str]]:
    header, *rest = text.splitlines()
    return json.loads(header), rest


async def _export_text(mm: MemoryManager, agent: str, tmp_path: Path, name: str) -> str:
    path = tmp_path / name
    await export_agent(mm, agent, path)
    return path.read_text(encoding="utf-8")


@pytest.fixture
async def source() -> AsyncIterator[MemoryManager]:
    """An in-memory manager holding :func:`_fill`'s agent: what the import tests export."""
    mm = await MemoryManager.create(MemoryConfig(backend="memory", embedding_provider="hashing"))
    await _fill(mm)
    yield mm
    await mm.close()


@pytest.fixture
async def exported(source: MemoryManager, tmp_path: Path) -> Path:
    """The export of ``source``'s agent."""
    path = tmp_path / "a.jsonl"
    await export_agent(source, AGENT, path)
    return path


@pytest.fixture
async def target(store: Store) -> AsyncIterator[MemoryManager]:
    """An empty manager over each backend's store: where the import tests import."""
    mm = await _manager(store)
    yield mm
    await mm.close()


async def test_the_file_holds_a_versioned_header_every_version_lineage_and_turns(
    store: Store, tmp_path: Path
) -> None:
    mm = await _manager(store)
    await _fill(mm)
    text = await _export_text(mm, AGENT, tmp_path, "a.jsonl")
    header, lines = _records(text)
    assert header["format"] == FORMAT and header["version"] == FORMAT_VERSION == 1
    assert header["agent_id"] == AGENT
    assert header["counts"] == {"memories": 7, "versions": 9, "sessions": 2, "turns": 3}
    records = [json.loads(line) for line in lines]
    assert [r["kind"] for r in records] == ["memory"] * 7 + ["session", "turn", "turn"] + [
        "session",
        "turn",
    ]
    home = next(r for r in records if r["kind"] == "memory" and r["versions"][0]["id"] == "home")
    contents = [(x["version"], x["content"], x["importance"]) for x in home["versions"]]
    assert contents == [
        (1, "lives in Lisbon", 0.5),
        (2, "lives in Porto", 0.5),
        (3, "lives in Porto", 0.9),
    ]
    first, second, third = home["versions"]
    assert first["valid_to"] == second["valid_from"] and third["valid_to"] is None
    assert third["expires_at"] is not None and first["expires_at"] is None
    trip = next(
        r for r in records if r["kind"] == "memory" and r["versions"][0]["source"] == "consolidated"
    )
    (only,) = trip["versions"]
    assert only["source_turn_ids"] == ["t1", "t2"]
    assert only["created_at"] == "2026-05-01T12:00:00.123456+00:00"
    assert "agent_id" not in only and "embedder" not in only  # the importer's own
    sessions = [r for r in records if r["kind"] == "session"]
    assert [(s["session_id"], s["metadata"].get("channel")) for s in sessions] == [
        ("s1", None),
        ("s2", "web"),
    ]
    turns = [r for r in records if r["kind"] == "turn"]
    assert [(t["session_id"], t["id"]) for t in turns] == [("s1", "t1"), ("s1", "t2"), ("s2", "t3")]
    assert turns[1]["tool_results"] == [{"tool": "cal", "ok": 1}]
    assert "ünïcødé" in text  # UTF-8, not escaped
    await mm.close()


@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.qdrant
async def test_round_trip_memory_postgres_redis_qdrant_gives_identical_records(
    store_memory: Store,
    store_postgres: Store,
    store_redis_qdrant: Store,
    tmp_path: Path,
) -> None:
    source = await _manager(store_memory)
    await _fill(source)
    texts = [await _export_text(source, AGENT, tmp_path, "memory.jsonl")]
    for name, store in (("postgres", store_postgres), ("redis_qdrant", store_redis_qdrant)):
        mm = await _manager(store)
        previous = tmp_path / f"{len(texts) - 1}.jsonl"
        previous.write_text(texts[-1], encoding="utf-8")
        report = await import_agent(mm, previous)
        assert (report.written_memories, report.written_versions, report.written_turns) == (7, 9, 3)
        texts.append(await _export_text(mm, AGENT, tmp_path, f"{name}.jsonl"))
        # what a search sees came along too: the current version, under the importer's embedder
        (hit,) = await mm.search_memories(AGENT, "where does the user live? Porto", limit=1)
        assert (hit.id, hit.content, hit.version) == ("home", "lives in Porto", 3)
        await mm.close()
    headers, bodies = zip(*(_records(t) for t in texts), strict=True)
    assert bodies[0] == bodies[1] == bodies[2]
    for h in headers:
        del h["exported_at"]
    assert headers[0] == headers[1] == headers[2]
    await source.close()


async def test_a_second_import_writes_nothing(
    source: MemoryManager, exported: Path, target: MemoryManager, tmp_path: Path
) -> None:
    mm, path = target, exported
    first = await import_agent(mm, path, agent_id="agent-b")
    assert (first.written_memories, first.written_versions, first.written_turns) == (7, 9, 3)
    before = await _export_text(mm, "agent-b", tmp_path, "b1.jsonl")
    sessions = await mm.list_sessions("agent-b")
    again = await import_agent(mm, path, agent_id="agent-b")
    # not even a session's last activity moved: nothing was written
    assert await mm.list_sessions("agent-b") == sessions
    assert (again.written_memories, again.written_versions, again.written_turns) == (0, 0, 0)
    assert (again.memories, again.versions, again.turns) == (7, 9, 3)
    after = await _export_text(mm, "agent-b", tmp_path, "b2.jsonl")
    assert _records(after)[1] == _records(before)[1]
    # --agent: the same records under another agent (ids kept); the exported agent untouched
    assert (
        _records(before)[1] == _records(await _export_text(source, AGENT, tmp_path, "s.jsonl"))[1]
    )
    assert await mm.count_memories(AGENT) == 0


def _bad_files(good: list[str]) -> list[tuple[str, list[str], int]]:
    """(what, lines, the line number the error must name)."""
    memory_line = next(i for i, x in enumerate(good) if '"kind":"memory"' in x)
    turn_line = next(i for i, x in enumerate(good) if '"kind":"turn"' in x)
    session_line = next(i for i, x in enumerate(good) if '"kind":"session"' in x)
    first_turn = json.loads(good[turn_line])

    def edit(index: int, change: Any) -> list[str]:
        lines = list(good)
        record = json.loads(lines[index])
        change(record)
        lines[index] = json.dumps(record)
        return lines

    def nul(r: dict[str, Any]) -> None:
        r["versions"][0]["content"] = "a\x00b"

    def gap(r: dict[str, Any]) -> None:
        r["versions"][0]["version"] = 2

    def orphan(r: dict[str, Any]) -> None:
        r["session_id"] = "never-declared"

    def future(r: dict[str, Any]) -> None:
        r["version"] = 2

    def expired(r: dict[str, Any]) -> None:
        # The live API refuses a past expiry; an import must too (issue 38).
        r["versions"][-1]["expires_at"] = "2020-01-01T00:00:00+00:00"

    def marker(**fields: str) -> Callable[[dict[str, Any]], None]:
        # A forged consolidation marker made later consolidation write nothing (issue 38).
        def forge(r: dict[str, Any]) -> None:
            r["metadata"]["actrone_consolidated"] = {
                "turn_id": "never-was",
                "created_at": "2020-01-01T00:00:00+00:00",
                "ran_at": "2020-01-01T00:00:00+00:00",
                **fields,
            }

        return forge

    last = len(good)
    return [
        ("an expired memory", edit(memory_line, expired), memory_line + 1),
        (
            "a marker of a run to come",
            edit(session_line, marker(ran_at="2999-01-01T00:00:00+00:00")),
            session_line + 1,
        ),
        (
            "a marker after the turns",
            edit(
                session_line,
                marker(created_at="2998-01-01T00:00:00+00:00", ran_at="2999-01-01T00:00:00+00:00"),
            ),
            session_line + 1,
        ),
        (
            "a marker of a missing turn",
            edit(
                session_line,
                marker(created_at=first_turn["created_at"], ran_at=first_turn["created_at"]),
            ),
            session_line + 1,
        ),
        (
            "a marker of a turn at another time",
            edit(session_line, marker(turn_id=first_turn["id"])),
            session_line + 1,
        ),
        ("not JSON", [*good[:-1], good[-1][:-3]], last),
        ("a NUL in content", edit(memory_line, nul), memory_line + 1),
        ("versions not from 1", edit(memory_line, gap), memory_line + 1),
        ("a turn of no session", edit(turn_line, orphan), turn_line + 1),
        ("a newer format", edit(0, future), 1),
        ("an unknown kind", [*good, '{"kind": "vector"}'], last + 1),
        ("a truncated file", good[:-1], 0),
    ]


@pytest.mark.parametrize("case", range(12))
async def test_a_bad_line_is_refused_with_its_number_and_nothing_is_written(
    exported: Path, target: MemoryManager, tmp_path: Path, case: int
) -> None:
    good = exported.read_text(encoding="utf-8").splitlines()
    what, lines, line = _bad_files(good)[case]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    mm = target
    with pytest.raises(ValidationError) as info:
        await import_agent(mm, path)
    message = str(info.value)
    assert message.startswith(f"{path}, line {line}: ") if line else "truncated" in message, (
        what,
        message,
    )
    assert await mm.count_memories(AGENT) == 0
    assert await mm.list_sessions(AGENT) == []


async def test_a_memory_with_other_content_under_the_same_id_is_a_conflict_writing_nothing(
    exported: Path, target: MemoryManager
) -> None:
    mm, path = target, exported
    await mm.inject_memory(AGENT, "lives in Faro", memory_id="home")
    with pytest.raises(ValidationError, match="already has memory 'home' with other content"):
        await import_agent(mm, path)
    assert await mm.count_memories(AGENT) == 1
    assert await mm.list_sessions(AGENT) == []


async def test_an_import_stopped_half_way_is_finished_by_running_it_again(
    source: MemoryManager, exported: Path, target: MemoryManager
) -> None:
    mm, path = target, exported
    # The first version of "home" landed, then the connection was lost: replay that much.
    await import_agent(mm, _only_home_v1(path))
    assert [m.version for m in await mm.memory_history(AGENT, "home")] == [1]
    report = await import_agent(mm, path)
    # home's versions 2 and 3, and the six other memories with their one version each
    assert (report.written_memories, report.written_versions) == (6, 8)
    assert await mm.memory_history(AGENT, "home") == await source.memory_history(AGENT, "home")


def _only_home_v1(path: Path) -> list[str]:
    """The file as if only the first version of "home" had been written."""
    header, lines = _records(path.read_text(encoding="utf-8"))
    home = next(json.loads(x) for x in lines if '"id":"home"' in x)
    first = {**home["versions"][0], "valid_to": None}
    header["counts"] = {"memories": 1, "versions": 1, "sessions": 0, "turns": 0}
    return [json.dumps(header), json.dumps({"kind": "memory", "versions": [first]})]


def test_the_public_names_are_documented() -> None:
    assert actrone_pg.export.__all__ == sorted(actrone_pg.export.__all__)
    for name in actrone_pg.export.__all__:
        obj = getattr(actrone_pg.export, name)
        assert isinstance(obj, (int, str)) or obj.__doc__, name
    doc = (Path(__file__).parents[1] / "docs" / "export.md").read_text(encoding="utf-8")
    for name in ("export_agent", "import_agent", "TransferReport", "FORMAT_VERSION"):
        assert name in doc
