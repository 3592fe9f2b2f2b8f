"""The store's statements against the head schema: every one resolves against what the
migrations install (a function it calls, its arguments, the columns it reads)."""

from __future__ import annotations

import pkgutil
import re
from dataclasses import replace
from importlib import import_module
from typing import Any

import psycopg
import pytest
from psycopg import sql


def _store_statements() -> dict[str, str]:
    """Every statement the PostgreSQL store keeps as a module constant, by name."""
    package = import_module("actrone_pg.stores.postgres")
    modules = [package]
    if hasattr(package, "__path__"):  # a package of modules by concern
        modules += [
            import_module(info.name)
            for info in pkgutil.walk_packages(package.__path__, package.__name__ + ".")
        ]
    found: dict[str, str] = {}
    for module in modules:
        for name, value in vars(module).items():
            texts = value if isinstance(value, list | tuple) else [value]
            for i, text in enumerate(texts):
                if not isinstance(text, str) or "{s}." not in text:
                    continue
                first = text.split(None, 1)[0].upper()
                if first in {"SELECT", "WITH", "INSERT", "UPDATE", "DELETE"}:
                    found[f"{module.__name__}.{name}[{i}]"] = text
    return found


def _built_statements(schema: str) -> dict[str, tuple[sql.Composed, dict[str, Any]]]:
    """The statements the builders compose, in each of their shapes: a search without a filter,
    with an agent's HNSW index, and with every filter key at once (packed and not); a listing
    without and with a keyset and every filter key."""
    from datetime import UTC, datetime

    import numpy as np

    from actrone_pg.filters import FILTERS, MemoryFilter
    from actrone_pg.pipeline import SearchRequest
    from actrone_pg.ranking import RankingParams
    from actrone_pg.stores.postgres import builders
    from tests.helpers import filter_examples

    now = datetime(2026, 1, 1, tzinfo=UTC)
    values = filter_examples()
    assert set(values) == set(FILTERS), "give the new filter key a value in tests/helpers.py"
    every = MemoryFilter(**values)
    request = SearchRequest(
        agent_id="a",
        query="q",
        terms=("q",),
        vector=np.ones(4, dtype=np.float32),
        embedder="e",
        threshold=0.5,
        limit=10,
        params=RankingParams(),
        now=now,
    )
    out: dict[str, tuple[sql.Composed, dict[str, Any]]] = {}
    # Every read is retrieve(), whatever the search: filtered or not, packed or not.
    for session in (None, ("s", 50, 86400.0)):
        for flt in (None, every):
            out[f"retrieve session={session is not None} filter={flt is not None}"] = (
                builders.retrieve(
                    replace(request, budget=100, filter=flt),
                    schema=schema,
                    terms=["q"],
                    session=session,
                    ef_search=800,
                )
            )
    for after, flt in ((None, None), ((now, "m"), every)):
        out[f"list_memories after={after is not None}"] = builders.list_memories(
            schema, "a", now=now, limit=10, after=after, flt=flt
        )
    return out


@pytest.mark.postgres
def test_head_serves_every_statement_of_the_store(
    postgres_dsn: str, postgres_rls_schema: str
) -> None:
    """The server resolves each of the store's statements against the migrated head (with
    row-level security installed: its sweeps' listing functions are statements too).

    PREPARE parses and analyses a statement without running it: a function the head lacks, an
    argument list it does not take, or a column its result does not have fails here. The short
    statements are the module constants (positional parameters); the search and the listing are
    what the builders compose (named parameters, each bound once).
    """
    schema = sql.Identifier(postgres_rls_schema)
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        probes: list[tuple[str, str]] = []
        for name, text in _store_statements().items():
            if "{" in text.replace("{s}", ""):
                assert "%(" in text, name
                continue  # a fragment the builders compose, probed below
            query = sql.SQL(text).format(s=schema).as_string(conn)
            if "%(" in query:
                assert "%s" not in query, name
                numbers: dict[str, int] = {}
                numbered = re.sub(
                    r"%\((\w+)\)s",
                    lambda m, n=numbers: f"${n.setdefault(m.group(1), len(n) + 1)}",
                    query,
                )
                probes.append((name, numbered))
                continue
            pieces = query.split("%s")
            probes.append(
                (name, pieces[0] + "".join(f"${i}{p}" for i, p in enumerate(pieces[1:], 1)))
            )
        built = _built_statements(postgres_rls_schema)
        # The functions the migrations install are among what is checked.
        texts = [statement.as_string(conn) for statement, _ in built.values()]
        assert any("retrieve(" in text for text in texts)
        for (name, (_, params)), query in zip(built.items(), texts, strict=True):
            assert "%s" not in query and "{" not in query.replace("'{}'", ""), name
            numbers = {p: i for i, p in enumerate(params, 1)}
            used = set(re.findall(r"%\((\w+)\)s", query))
            # Every parameter given is used, and every one used is given.
            assert used == set(params), (name, used ^ set(params))
            numbered = re.sub(r"%\((\w+)\)s", lambda m, n=numbers: f"${n[m.group(1)]}", query)
            probes.append((name, numbered))
        for name, query in probes:
            assert "%%" not in query, name
            conn.execute(sql.SQL("PREPARE actrone_probe AS ") + sql.SQL(query))  # type: ignore[arg-type]
            conn.execute("DEALLOCATE actrone_probe")


def test_a_statement_of_more_than_three_values_names_them() -> None:
    # Positional values are read by counting; past three, a statement names them (%(name)s).
    assert _store_statements()  # the check can fail: it finds the statements
    crowded = [name for name, text in _store_statements().items() if text.count("%s") > 3]
    assert crowded == []


def test_the_store_finds_pgvectors_schema_as_the_migrations_do() -> None:
    # Two copies by necessity (statements.py is imported before psycopg is known to be there):
    # the schema the store qualifies pgvector with is the one the migrations filled in.
    from actrone_pg.migrations import _files
    from actrone_pg.stores.postgres import statements

    assert statements.VECTOR_SCHEMA == _files.VECTOR_SCHEMA
