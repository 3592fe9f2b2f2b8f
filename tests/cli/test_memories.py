"""``actrone-pg memories list|history`` against the test server."""

from __future__ import annotations

import asyncio
import json

import pytest

from actrone_pg import MemoryConfig, create_memory_manager, migrations
from actrone_pg.cli import main

pytestmark = pytest.mark.postgres


def _fill(dsn: str, schema: str) -> str:
    async def fill() -> str:
        config = MemoryConfig(
            backend="postgres",
            postgres_dsn=dsn,
            postgres_schema=schema,
            embedding_provider="hashing",
        )
        async with create_memory_manager(config) as mm:
            mid = await mm.inject_memory("A", "lives in Lisbon", tags=["home"], memory_id="m1")
            await mm.inject_memory("A", "likes green tea", tags=["drink"], memory_id="m2")
            await mm.inject_memory("B", "another agent", tags=["home"], memory_id="m3")
            await mm.update_memory("A", mid, content="lives in Porto")
            return mid

    return asyncio.run(fill())


def test_list_and_history_as_json_and_tables(
    postgres_dsn: str, scratch_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    migrations.migrate(postgres_dsn, scratch_schema)
    mid = _fill(postgres_dsn, scratch_schema)
    where = ["--dsn", postgres_dsn, "--schema", scratch_schema, "--agent", "A"]
    assert main(["memories", "list", *where, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [m["id"] for m in out["items"]] == ["m2", "m1"] and out["next_cursor"] is None
    assert main(["memories", "list", *where, "--tag", "home", "--json"]) == 0
    (only,) = json.loads(capsys.readouterr().out)["items"]
    assert (only["id"], only["content"], only["version"]) == ("m1", "lives in Porto", 2)
    assert main(["memories", "list", *where, "--limit", "1", "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert [m["id"] for m in first["items"]] == ["m2"] and first["next_cursor"]
    assert main(["memories", "list", *where, "--cursor", first["next_cursor"], "--json"]) == 0
    assert [m["id"] for m in json.loads(capsys.readouterr().out)["items"]] == ["m1"]
    assert main(["memories", "history", *where, mid, "--json"]) == 0
    versions = json.loads(capsys.readouterr().out)["versions"]
    assert [(v["version"], v["content"]) for v in versions] == [
        (1, "lives in Lisbon"),
        (2, "lives in Porto"),
    ]
    assert main(["memories", "history", *where, mid]) == 0
    table = capsys.readouterr().out
    assert "Lisbon" in table and "Porto" in table and "versions of m1" in table
    assert main(["memories", "list", *where, "--metadata", "{not json"]) == 2
    assert "--metadata" in capsys.readouterr().err
    assert main(["memories", "list", *where, "--after", "2026-01-01T00:00:00"]) == 2
    assert "timezone-aware" in capsys.readouterr().err


def test_the_memory_backend_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["memories", "list", "--backend", "memory", "--agent", "A"]) == 2
    assert "--backend postgres" in capsys.readouterr().err
