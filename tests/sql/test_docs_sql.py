"""Every SQL block of README.md and docs/*.md runs as written on the demo's data.

A user runs ``./scripts/demo``, then ``psql "$(actrone-pg dsn)"`` and pastes the examples: each
statement must run, and each must return rows (a query that returns nothing on the data the docs
point at teaches nothing), except those named in ``MAY_BE_EMPTY``. The lifecycle examples also
show what docs/lifecycle.md says they show. The demo runs with the hashing embedder here;
tests/test_readme.py runs README.md's block with MiniLM too.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from actrone_pg._cli import demo
from actrone_pg.cli import main
from actrone_pg.config import MemoryConfig

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: Statements that may rightly return no rows on the demo's data (matched by a fragment).
MAY_BE_EMPTY = ("indexname LIKE 'ix\\_ann\\_%'",)  # the demo's agent is far too small for one


def sql_blocks() -> list[tuple[str, str]]:
    """``(file name, block)`` for every fenced ```sql block of README.md and docs/*.md."""
    return [
        (path.name, block)
        for path in DOCS
        for block in re.findall(r"```sql\n(.*?)```", path.read_text(encoding="utf-8"), re.S)
    ]


def statements(block: str) -> list[str]:
    """The block's statements, comments removed (no example puts ``--`` or ``;`` in a string)."""
    code = re.sub(r"--[^\n]*", "", block)
    return [q.strip() for q in code.split(";") if q.strip()]


@pytest.fixture(scope="module")
def demo_schema(postgres_dsn: str) -> Iterator[str]:
    """A schema holding what ``actrone-pg demo`` leaves, as ``./scripts/demo`` would."""
    schema = f"actrone_docs_{uuid.uuid4().hex[:8]}"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ACTRONE_POSTGRES_SCHEMA", schema)
        args = ["demo", "--backend", "postgres", "--dsn", postgres_dsn, "--embedder", "hashing"]
        assert main([*args, "--json"]) == 0
    yield schema
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def _run(dsn: str, schema: str, query: str) -> list[tuple[Any, ...]]:
    # The docs name the default schema; the test's data lives in its own.
    query = query.replace("actrone.", f"{schema}.").replace("'actrone'", f"'{schema}'")
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(query).fetchall()


def test_the_docs_hold_sql_blocks_from_every_file_that_shows_sql() -> None:
    names = {name for name, _ in sql_blocks()}
    assert {"README.md", "postgres.md", "lifecycle.md"} <= names
    assert len(sql_blocks()) >= 11


@pytest.mark.parametrize(
    ("name", "block"), sql_blocks(), ids=[f"{n}-{i}" for i, (n, _) in enumerate(sql_blocks())]
)
def test_every_sql_block_runs_as_written_and_returns_rows(
    name: str, block: str, postgres_dsn: str, demo_schema: str
) -> None:
    for query in statements(block):
        rows = _run(postgres_dsn, demo_schema, query)
        if not any(fragment in query for fragment in MAY_BE_EMPTY):
            assert rows, f"{name}: no rows from\n{query}"


def test_the_lifecycle_examples_show_what_the_doc_says(postgres_dsn: str, demo_schema: str) -> None:
    blocks = [b for n, b in sql_blocks() if n == "lifecycle.md"]
    assert len(blocks) == 5
    versions, updated, lineage, expiring, filtered = (
        _run(postgres_dsn, demo_schema, b) for b in blocks
    )
    diet = next(c for i, c, *_ in demo.MEMORIES if i == "diet")
    assert [(r[1], r[2], r[5]) for r in versions] == [
        (1, False, demo.DIET_BEFORE),
        (2, True, diet),
    ]
    assert versions[0][4] == versions[1][3] and versions[1][4] is None  # valid_to = next's from
    assert updated == [("diet", 2, 2)]
    assert lineage == [("seats", 1, "last-week-2")]
    assert [(r[0], r[1], r[3]) for r in expiring] == [("actrone-demo", "piano", False)]
    assert [(r[0], r[1], r[2]) for r in filtered] == [
        ("ana", list(demo.ANA_TAGS), demo.ANA_METADATA)
    ]


def test_the_hybrid_search_examples_pass_the_librarys_ranking_settings() -> None:
    # psql must rank as retrieve_context does: the examples pass the defaults the library
    # passes, not the SQL function's own (unweighted RRF, {1,1,1}).
    config = MemoryConfig()
    weights = "ARRAY[" + ", ".join(f"{w:g}" for w in config.rrf_weights) + "]"
    calls = [
        q
        for _, b in sql_blocks()
        for q in statements(b)
        if "hybrid_search(" in q and "p_hybrid => false" not in q
    ]
    assert len(calls) >= 3
    for query in calls:
        assert f"p_rrf_weights => {weights}" in query, query
    for query in calls:
        for option, value in (("p_bm25_k1", config.bm25_k1), ("p_bm25_b", config.bm25_b)):
            if option in query:
                assert f"{option} => {value:g}" in query
