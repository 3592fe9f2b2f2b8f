"""Row-level security per agent (postgres_row_security=True; docs/postgres.md, "Row-level
security"): a role without BYPASSRLS sees and writes only the agent its session serves, and the
library works whole connected as that role (the conformance suite runs it too: backend
"postgres_rls")."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from actrone_pg import MemoryConfig, MemoryManager
from actrone_pg.embedders import HashingEmbedder
from actrone_pg.stores.postgres import PostgresStore
from tests.backends.postgres import RLS_ROLE, role_dsn

TABLES = ("memories", "memory_history", "term_stats", "agent_stats", "sessions", "turns", "locks")


def _counts(dsn: str, schema: str, agent: str | None) -> dict[str, list[str]]:
    """The agents each per-agent table shows to the role, serving ``agent`` (or none)."""
    with psycopg.connect(role_dsn(dsn, RLS_ROLE), autocommit=True) as conn:
        if agent is not None:
            conn.execute("SELECT set_config('actrone.agent_id', %s, false)", (agent,))
        return {
            table: [
                r[0]
                for r in conn.execute(
                    sql.SQL("SELECT DISTINCT agent_id FROM {} ORDER BY 1").format(
                        sql.Identifier(schema, table)
                    )
                ).fetchall()
            ]
            for table in TABLES
        }


async def _manager(store: PostgresStore) -> MemoryManager:
    return await MemoryManager.create(
        MemoryConfig(backend="postgres", relevance_threshold=0.05),
        store=store,
        embedder=HashingEmbedder(dimensions=16),
    )


async def test_the_role_sees_only_the_agent_its_session_serves(
    store_postgres_rls: PostgresStore, postgres_dsn: str, postgres_rls_schema: str
) -> None:
    mm = await _manager(store_postgres_rls)
    for agent in ("a", "b"):
        mid = await mm.inject_memory(agent, f"{agent} likes green tea")
        await mm.update_memory(agent, mid, content=f"{agent} likes black tea")
        await mm.store_turn(agent, "s", "hello", "hi")
        assert await store_postgres_rls.acquire_lock(agent, "job", "me", 60)
    schema = postgres_rls_schema
    assert _counts(postgres_dsn, schema, None) == {t: [] for t in TABLES}
    assert _counts(postgres_dsn, schema, "") == {t: [] for t in TABLES}
    assert _counts(postgres_dsn, schema, "a") == {t: ["a"] for t in TABLES}
    assert _counts(postgres_dsn, schema, "b") == {t: ["b"] for t in TABLES}
    # the tables' owner (a superuser here) is not bound: both agents
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        (n,) = conn.execute(
            sql.SQL("SELECT count(DISTINCT agent_id) FROM {}").format(
                sql.Identifier(schema, "memories")
            )
        ).fetchone() or (0,)
    assert n == 2
    # views read under the caller's policies (security_invoker)
    with psycopg.connect(role_dsn(postgres_dsn, RLS_ROLE), autocommit=True) as conn:
        view = sql.Identifier(schema, "memory_overview")
        assert conn.execute(sql.SQL("SELECT agent_id FROM {}").format(view)).fetchall() == []
        conn.execute("SELECT set_config('actrone.agent_id', 'a', false)")
        rows = conn.execute(sql.SQL("SELECT DISTINCT agent_id FROM {}").format(view)).fetchall()
    assert rows == [("a",)]


def test_the_role_cannot_write_another_agents_rows(
    store_postgres_rls: PostgresStore, postgres_dsn: str, postgres_rls_schema: str
) -> None:
    with psycopg.connect(role_dsn(postgres_dsn, RLS_ROLE)) as conn:
        conn.execute("SELECT set_config('actrone.agent_id', 'a', false)")
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            conn.execute(
                sql.SQL("INSERT INTO {} (agent_id, session_id) VALUES ('b', 's')").format(
                    sql.Identifier(postgres_rls_schema, "sessions")
                )
            )


async def test_a_batch_of_several_agents_and_the_sweeps_work_under_the_policies(
    store_postgres_rls: PostgresStore, postgres_dsn: str, postgres_rls_schema: str
) -> None:
    mm = await _manager(store_postgres_rls)
    past = timedelta(seconds=-1)
    for agent in ("a", "b"):
        await mm.inject_memories(agent, [{"content": "kept"}, {"content": "soon gone"}])
        await mm.store_turn(agent, "old", "q", "r")
    # expire one memory of each agent and both sessions, as the owner
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("UPDATE {} SET expires_at = now() + %s WHERE content = 'soon gone'").format(
                sql.Identifier(postgres_rls_schema, "memories")
            ),
            (past,),
        )
        conn.execute(
            sql.SQL("UPDATE {} SET last_active_at = now() - interval '2 days'").format(
                sql.Identifier(postgres_rls_schema, "sessions")
            )
        )
    assert await store_postgres_rls.sweep_expired_memories(limit=100) == 2
    assert await store_postgres_rls.sweep_expired_sessions(ttl_seconds=3600, limit=100) == 2
    for agent in ("a", "b"):
        assert [m.content for m in (await mm.list_memories(agent)).items] == ["kept"]
        assert await store_postgres_rls.count_memories(agent) == 1
    assert _counts(postgres_dsn, postgres_rls_schema, "a")["sessions"] == []


def _doc_blocks() -> list[str]:
    """The ```postgresql blocks of docs/postgres.md, "Row-level security per agent"."""
    text = (Path(__file__).parents[2] / "docs" / "postgres.md").read_text(encoding="utf-8")
    section = text.split("## Row-level security per agent", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```postgresql\n(.*?)```", section, re.S)


def _statements(block: str, schema: str) -> list[str]:
    code = re.sub(r"--[^\n]*", "", block).replace(" actrone.", f" {schema}.")
    code = code.replace("SCHEMA actrone ", f"SCHEMA {schema} ")
    return [q.strip() for q in code.split(";") if q.strip()]


async def test_the_docs_setup_runs_as_written_and_shows_what_it_says(
    store_postgres_rls: PostgresStore, postgres_dsn: str, postgres_rls_schema: str
) -> None:
    setup, session = _doc_blocks()
    mm = await _manager(store_postgres_rls)
    for agent in ("actrone-demo", "other"):
        await mm.inject_memory(agent, "the demo's memory")
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        for statement in _statements(setup, postgres_rls_schema):
            conn.execute(statement)
    app = make_conninfo(postgres_dsn, user="actrone_app", password="change-me")
    with psycopg.connect(app, autocommit=True) as conn:
        results = [conn.execute(q).fetchall() for q in _statements(session, postgres_rls_schema)]
    assert results == [[(0,)], [("actrone-demo",)], [("actrone-demo",)]]
