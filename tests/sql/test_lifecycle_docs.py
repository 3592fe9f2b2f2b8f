"""The psql examples of docs/lifecycle.md run against a schema holding their example memories."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from actrone_pg import MemoryConfig, create_memory_manager, migrations

pytestmark = pytest.mark.postgres

DOC = Path(__file__).parent.parent.parent / "docs" / "lifecycle.md"


def _examples() -> list[str]:
    return re.findall(r"```sql\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


def _fill(dsn: str, schema: str) -> None:
    async def fill() -> None:
        config = MemoryConfig(
            backend="postgres",
            postgres_dsn=dsn,
            postgres_schema=schema,
            embedding_provider="hashing",
        )
        async with create_memory_manager(config) as mm:
            await mm.inject_memory("agent-1", "lives in Lisbon", tags=["home"], memory_id="home")
            await mm.update_memory(
                "agent-1", "home", content="lives in Porto", metadata={"city": "Porto"}
            )
            await mm.update_memory("agent-1", "home", importance=0.9)
            await mm.inject_memory(
                "agent-1",
                "the user planned a trip to Japan",
                source="consolidated",
                source_turn_ids=["t1", "t2", "t3"],
                memory_id="trip",
            )
            await mm.inject_memory(
                "agent-1",
                "a code valid for one second",
                expires_at=datetime.now(UTC) + timedelta(seconds=1),
                memory_id="code",
            )
            await asyncio.sleep(1.2)

    asyncio.run(fill())


def test_every_sql_example_runs_and_shows_what_the_doc_says(
    postgres_dsn: str, scratch_schema: str
) -> None:
    migrations.migrate(postgres_dsn, scratch_schema)
    _fill(postgres_dsn, scratch_schema)
    examples = _examples()
    assert len(examples) == 5
    results = []
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        for text in examples:
            query = text.replace("actrone.", f"{scratch_schema}.")
            results.append(conn.execute(query.encode()).fetchall())  # type: ignore[call-overload]
    versions, updated, lineage, expired, filtered = results
    assert [(r[1], r[2], r[5]) for r in versions] == [
        (1, False, "lives in Lisbon"),
        (2, False, "lives in Porto"),
        (3, True, "lives in Porto"),
    ]
    assert versions[0][4] == versions[1][3] and versions[2][4] is None
    assert updated == [("home", 3, 3)]
    assert lineage == [("trip", 1, "t1"), ("trip", 2, "t2"), ("trip", 3, "t3")]
    assert [(r[0], r[1]) for r in expired] == [("agent-1", "code")]
    assert [(r[0], r[3]) for r in filtered] == [("home", "lives in Porto")]
