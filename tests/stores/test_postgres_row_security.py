"""Row-level security per agent (postgres_row_security=True; docs/postgres.md, "Row-level
security"): a role without BYPASSRLS sees and writes only the agent its session serves, and the
library works whole connected as that role (the conformance suite runs it too: backends
"postgres_rls" and "citus_rls"). Each test runs on one server and on a Citus cluster, where the
policies are on every shard and the agent must reach the workers."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from actrone_pg import MemoryConfig, MemoryManager
from actrone_pg.embedders import HashingEmbedder
from actrone_pg.stores.base import MemoryRecord
from actrone_pg.stores.postgres import PostgresStore, maintenance
from tests.backends.postgres import RLS_ROLE, role_dsn
from tests.factories import record

TABLES = ("memories", "memory_history", "term_stats", "agent_stats", "sessions", "turns", "locks")


@dataclass(frozen=True)
class Setup:
    """A store with row security on, connected as ``RLS_ROLE``; the owner's DSN; the schema."""

    store: PostgresStore
    dsn: str
    schema: str

    @property
    def citus(self) -> bool:
        return self.store.distributed


pytestmark = pytest.mark.postgres


@pytest.fixture(params=["postgres", pytest.param("citus", marks=pytest.mark.citus)])
def rls(request: pytest.FixtureRequest) -> Setup:
    """Each test on one server, then on a Citus cluster."""
    if request.param == "citus":
        return Setup(
            request.getfixturevalue("store_citus_rls"),
            request.getfixturevalue("citus_dsn"),
            request.getfixturevalue("citus_rls_schema"),
        )
    return Setup(
        request.getfixturevalue("store_postgres_rls"),
        request.getfixturevalue("postgres_dsn"),
        request.getfixturevalue("postgres_rls_schema"),
    )


@contextmanager
def _serving(conn: psycopg.Connection, agent: str | None, *, citus: bool) -> Iterator[None]:
    """``conn`` (the role's, autocommit) serving ``agent``, as docs/postgres.md shows it: on one
    server for the session; on Citus in a transaction, where a SET LOCAL reaches the workers."""
    if not citus:
        if agent is not None:
            conn.execute("SELECT set_config('actrone.agent_id', %s, false)", (agent,))
        yield
        return
    with conn.transaction():
        if agent is not None:
            conn.execute("SET LOCAL citus.propagate_set_commands = 'local'")
            conn.execute(sql.SQL("SET LOCAL actrone.agent_id = {}").format(sql.Literal(agent)))
        yield


def _counts(dsn: str, schema: str, agent: str | None, *, citus: bool) -> dict[str, list[str]]:
    """The agents each per-agent table shows to the role, serving ``agent`` (or none)."""
    with (
        psycopg.connect(role_dsn(dsn, RLS_ROLE), autocommit=True) as conn,
        _serving(conn, agent, citus=citus),
    ):
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


async def test_the_role_sees_only_the_agent_its_session_serves(rls: Setup) -> None:
    mm = await _manager(rls.store)
    for agent in ("a", "b"):
        mid = await mm.inject_memory(agent, f"{agent} likes green tea")
        await mm.update_memory(agent, mid, content=f"{agent} likes black tea")
        await mm.store_turn(agent, "s", "hello", "hi")
        assert await rls.store.acquire_lock(agent, "job", "me", 60)
    dsn, schema, citus = rls.dsn, rls.schema, rls.citus
    assert _counts(dsn, schema, None, citus=citus) == {t: [] for t in TABLES}
    assert _counts(dsn, schema, "", citus=citus) == {t: [] for t in TABLES}
    assert _counts(dsn, schema, "a", citus=citus) == {t: ["a"] for t in TABLES}
    assert _counts(dsn, schema, "b", citus=citus) == {t: ["b"] for t in TABLES}
    # the tables' owner (a superuser here) is not bound: both agents
    with psycopg.connect(dsn, autocommit=True) as conn:
        (n,) = conn.execute(
            sql.SQL("SELECT count(DISTINCT agent_id) FROM {}").format(
                sql.Identifier(schema, "memories")
            )
        ).fetchone() or (0,)
    assert n == 2
    # views read under the caller's policies (security_invoker)
    view = sql.SQL("SELECT DISTINCT agent_id FROM {}").format(
        sql.Identifier(schema, "memory_overview")
    )
    with psycopg.connect(role_dsn(dsn, RLS_ROLE), autocommit=True) as conn:
        with _serving(conn, None, citus=citus):
            assert conn.execute(view).fetchall() == []
        with _serving(conn, "a", citus=citus):
            assert conn.execute(view).fetchall() == [("a",)]
    # the library's one read path, as the role (delegated to the worker on Citus)
    assert [m.content for m in await mm.search_memories("a", "tea")] == ["a likes black tea"]


def test_the_role_cannot_write_another_agents_rows(rls: Setup) -> None:
    with psycopg.connect(role_dsn(rls.dsn, RLS_ROLE), autocommit=True) as conn:
        for agent in ("a", None):
            with (
                pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"),
                _serving(conn, agent, citus=rls.citus),
            ):
                conn.execute(
                    sql.SQL("INSERT INTO {} (agent_id, session_id) VALUES ('b', 's')").format(
                        sql.Identifier(rls.schema, "sessions")
                    )
                )


async def test_a_batch_of_several_agents_and_the_sweeps_work_under_the_policies(
    rls: Setup,
) -> None:
    mm = await _manager(rls.store)
    past = timedelta(seconds=-1)
    for agent in ("a", "b"):
        await mm.inject_memories(agent, [{"content": "kept"}, {"content": "soon gone"}])
        await mm.store_turn(agent, "old", "q", "r")
    # one batch of both agents, as a consolidation or an import writes
    await rls.store.upsert_memories(
        [
            *_records("a", "also kept"),
            *_records("b", "also kept"),
        ]
    )
    # expire one memory of each agent and both sessions, as the owner
    with psycopg.connect(rls.dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("UPDATE {} SET expires_at = now() + %s WHERE content = 'soon gone'").format(
                sql.Identifier(rls.schema, "memories")
            ),
            (past,),
        )
        conn.execute(
            sql.SQL("UPDATE {} SET last_active_at = now() - interval '2 days'").format(
                sql.Identifier(rls.schema, "sessions")
            )
        )
    assert await rls.store.sweep_expired_memories(limit=100) == 2
    assert await rls.store.sweep_expired_sessions(ttl_seconds=3600, limit=100) == 2
    for agent in ("a", "b"):
        contents = sorted(m.content for m in (await mm.list_memories(agent)).items)
        assert contents == ["also kept", "kept"]
        assert await rls.store.count_memories(agent) == 2
    assert _counts(rls.dsn, rls.schema, "a", citus=rls.citus)["sessions"] == []


async def test_the_maintenance_after_writes_runs_as_the_role(rls: Setup) -> None:
    # VACUUM (ANALYZE) follows every so many writes, inside the write's call: on Citus it may
    # not run in the call's transaction (it failed the inject that triggered it). As the role it
    # skips the tables it does not own (a warning); the owner's maintenance does the rest.
    mm = await _manager(rls.store)
    await mm.inject_memories("a", [{"content": f"memory {i}"} for i in range(5)])
    await maintenance.vacuum_analyze(rls.store.db)
    assert await mm.count_memories("a") == 5


def _records(agent: str, content: str) -> list[MemoryRecord]:
    vector = [1.0] + [0.0] * 15
    return [record(agent, f"{agent}-{content}", content, vector, embedder=_EMBEDDER.name)]


_EMBEDDER = HashingEmbedder(dimensions=16)


def _doc_blocks() -> list[str]:
    """The ```postgresql blocks of docs/postgres.md, "Row-level security per agent"."""
    text = (Path(__file__).parents[2] / "docs" / "postgres.md").read_text(encoding="utf-8")
    section = text.split("## Row-level security per agent", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```postgresql\n(.*?)```", section, re.S)


def _statements(block: str, schema: str) -> list[str]:
    code = re.sub(r"--[^\n]*", "", block)
    code = re.sub(r" actrone\.(?!agent_id\b)", f" {schema}.", code)  # the schema, not the setting
    code = code.replace("SCHEMA actrone ", f"SCHEMA {schema} ")
    return [q.strip() for q in code.split(";") if q.strip()]


async def test_the_docs_setup_runs_as_written_and_shows_what_it_says(rls: Setup) -> None:
    setup, session, citus_session = _doc_blocks()
    mm = await _manager(rls.store)
    for agent in ("actrone-demo", "other"):
        await mm.inject_memory(agent, "the demo's memory")
    with psycopg.connect(rls.dsn, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = 'actrone_app'").fetchone():
            conn.execute("DROP OWNED BY actrone_app")  # a cluster kept from an earlier run
            conn.execute("DROP ROLE actrone_app")
        for statement in _statements(setup, rls.schema):
            conn.execute(statement)
    app = make_conninfo(rls.dsn, user="actrone_app", password="change-me")
    with psycopg.connect(app, autocommit=True) as conn:
        results = [
            cur.fetchall()
            for q in _statements(citus_session if rls.citus else session, rls.schema)
            if (cur := conn.execute(q)).description is not None
        ]
    assert results == [[(0,)], [("actrone-demo",)], [("actrone-demo",)]]
