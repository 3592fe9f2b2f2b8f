"""The PostgreSQL store on a Citus cluster: what only a distributed schema has (docs/scale-out.md).

The conformance, parity and lifecycle suites run on the cluster as the "citus" backend; these
tests check what they cannot see: where the tables and the search run, and the migrations'
choices.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import psycopg
import pytest
from pgvector.psycopg import register_vector
from psycopg import sql

from actrone_pg import migrations
from actrone_pg.errors import ConfigurationError, StoreError
from actrone_pg.pipeline import MemoryFilter
from actrone_pg.stores.postgres import PostgresSettings, PostgresStore, builders
from actrone_pg.stores.postgres.statements import UPDATE_TERM_STATS
from tests.factories import record, request

pytestmark = [pytest.mark.postgres, pytest.mark.citus]

PER_AGENT = (
    "agent_stats",
    "locks",
    "memories",
    "memory_history",
    "sessions",
    "term_stats",
    "turns",
)


def _partitions(dsn: str, schema: str) -> dict[str, tuple[str, int]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT c.relname, p.partmethod::text, p.colocationid FROM pg_dist_partition AS p"
            " JOIN pg_class AS c ON c.oid = p.logicalrelid"
            " JOIN pg_namespace AS n ON n.oid = c.relnamespace WHERE n.nspname = %s",
            (schema,),
        ).fetchall()
    return {str(r[0]): (str(r[1]), int(r[2])) for r in rows}


def test_every_per_agent_table_is_distributed_by_agent_and_colocated(
    citus_dsn: str, citus_schema: str
) -> None:
    found = _partitions(citus_dsn, citus_schema)
    assert sorted(t for t, (method, _) in found.items() if method == "h") == list(PER_AGENT)
    assert len({found[t][1] for t in PER_AGENT}) == 1  # one colocation group
    assert sorted(t for t, (method, _) in found.items() if method == "n") == [
        "embedders",
        "settings",
    ]
    with psycopg.connect(citus_dsn, autocommit=True) as conn:
        columns = conn.execute(
            "SELECT DISTINCT column_to_column_name(logicalrelid, partkey) FROM pg_dist_partition"
            " WHERE partmethod = 'h' AND logicalrelid::text LIKE %s",
            (citus_schema + ".%",),
        ).fetchall()
    assert columns == [("agent_id",)]


async def _seed(store: PostgresStore) -> None:
    await store.upsert_memories(
        [
            record("a", "m1", "coffee in the morning", [1, 0, 0, 0]),
            record("a", "m2", "tea in the evening", [0.8, 0.6, 0, 0]),
            record("a", "m3", "coffee beans from Kenya", [0.6, 0.8, 0, 0], tags=("food",)),
            record("b", "m1", "coffee for agent b", [1, 0, 0, 0]),
        ]
    )


def _captured(store: PostgresStore, calls: list[tuple[Any, Any]]) -> None:
    """Record every statement the store fetches with (rows as dicts or as tuples, the read
    path's), and its parameters."""
    fetch, fetch_tuples = store.db.fetch, store.db.fetch_tuples

    async def spy(conn: Any, statement: Any, params: Any, **kw: Any) -> Any:
        calls.append((statement, params))
        return await fetch(conn, statement, params, **kw)

    async def spy_tuples(conn: Any, statement: Any, params: Any, **kw: Any) -> Any:
        calls.append((statement, params))
        return await fetch_tuples(conn, statement, params, **kw)

    store.db.fetch = spy  # type: ignore[method-assign]
    store.db.fetch_tuples = spy_tuples  # type: ignore[method-assign]


def _explain(dsn: str, statement: Any, params: Any) -> str:
    """EXPLAIN of the statement with its values inlined: with server-side bound parameters the
    worker cannot plan it ("Could not get remote plan"), whatever the call does."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        register_vector(conn)
        inlined = psycopg.ClientCursor(conn).mogrify(statement, params)
        rows = conn.execute("EXPLAIN (VERBOSE) " + inlined).fetchall()
    return "\n".join(str(r[0]) for r in rows)


def _worker_ports(dsn: str) -> set[int]:
    """The ports of the nodes holding shards: the workers, or a single-node cluster's
    coordinator (a container's), marked by 0 in the set."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT nodeport, groupid = 0 FROM pg_dist_node WHERE shouldhaveshards"
        ).fetchall()
    return {int(r[0]) for r in rows} | ({0} if any(r[1] for r in rows) else set())


def _assert_delegated(plan: str, schema: str, workers: set[int]) -> None:
    """The call runs whole where the agent's shards are: delegated to its worker (one task,
    the function scan on that node), or on a single-node cluster the coordinator itself
    (the function scan alone, its statements executed on the local shards)."""
    if 0 in workers and plan.startswith(f"Function Scan on {schema}.retrieve"):
        return  # the coordinator holds the agent's shards: run there
    assert "Task Count: 1" in plan, plan
    assert f"Function Scan on {schema}.retrieve" in plan, plan
    (node,) = [line for line in plan.splitlines() if "Node: host=" in line]
    assert int(node.split("port=")[1].split()[0]) in workers, plan


#: At head: the functions Citus delegates, and whether inside a transaction block too.
DELEGATED = [("agent_write", True), ("retrieve", False)]


def _distributed_by_agent(dsn: str, schema: str) -> list[tuple[str, bool]]:
    """The schema's functions Citus distributes by an argument (delegated calls), each with
    its force_delegation."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT p.proname, coalesce(o.force_delegation, false) FROM pg_dist_object AS o"
            " JOIN pg_proc AS p ON p.oid = o.objid"
            " JOIN pg_namespace AS n ON n.oid = p.pronamespace WHERE n.nspname = %s"
            " AND o.classid = 'pg_proc'::regclass AND o.distribution_argument_index IS NOT NULL"
            " ORDER BY 1",
            (schema,),
        ).fetchall()
    return [(str(r[0]), bool(r[1])) for r in rows]


def test_every_node_holds_the_files_and_the_distribution_leaves_nothing_to_convert(
    citus_dsn: str, citus_scratch_schema: str
) -> None:
    # A fresh schema is distributed by 0024_distribute.sql; the conversion of a schema migrated
    # on one server (migrate --distribute, read from the catalog) finds nothing left to do. The
    # coordinator's CREATE reaches the workers, where delegated calls run: every node holds
    # each function as its file writes it, down to base and up again.
    from actrone_pg.migrations import _citus
    from tests.sql.test_installed import installed_differences

    schema = citus_scratch_schema
    migrations.migrate(citus_dsn, schema)
    assert installed_differences(citus_dsn, schema, every_node=True) == []
    assert _distributed_by_agent(citus_dsn, schema) == DELEGATED
    with psycopg.connect(citus_dsn) as conn:
        assert _citus.distribute_schema(_citus.runner(conn), schema) == []
    migrations.downgrade(citus_dsn, schema)
    assert migrations.current_revision(citus_dsn, schema) is None
    assert _partitions(citus_dsn, schema) == {}
    migrations.migrate(citus_dsn, schema)
    assert installed_differences(citus_dsn, schema, every_node=True) == []
    assert _distributed_by_agent(citus_dsn, schema) == DELEGATED


def test_a_distributed_schema_built_by_0023_becomes_the_baseline_with_its_rows(
    citus_dsn: str, citus_scratch_schema: str
) -> None:
    # 0023's schema (tests/migrations/data), distributed as its revisions distributed it (the
    # catalog's rule, which 0014 applied), with a row in every table.
    from actrone_pg.migrations import _citus
    from tests.migrations.test_baseline import contents, load_0023, seed
    from tests.sql.test_installed import installed_differences

    schema = citus_scratch_schema
    load_0023(citus_dsn, schema)
    with psycopg.connect(citus_dsn) as conn:
        assert _citus.distribute_schema(_citus.runner(conn), schema)
    seed(citus_dsn, schema)
    before = contents(citus_dsn, schema)
    assert installed_differences(citus_dsn, schema, every_node=True) != []  # 0023's text
    migrations.migrate(citus_dsn, schema)
    assert migrations.current_revision(citus_dsn, schema) == migrations.head_revision()
    assert contents(citus_dsn, schema) == before
    assert installed_differences(citus_dsn, schema, every_node=True) == []
    assert _distributed_by_agent(citus_dsn, schema) == DELEGATED
    assert sorted(t for t, (m, _) in _partitions(citus_dsn, schema).items() if m == "h") == (
        list(PER_AGENT)
    )


async def test_migrate_at_head_installs_an_older_retrieve_again_on_every_node(
    citus_dsn: str, citus_scratch_schema: str
) -> None:
    # A distributed schema stamped 0024 by an earlier build, whose retrieve had another argument
    # list: migrate drops and installs the functions again and distributes them as the baseline
    # does, so every node holds the files and the calls are delegated again.
    from tests.migrations.test_refresh import replace_retrieve_with_an_older_signature
    from tests.sql.test_installed import installed_differences

    schema = citus_scratch_schema
    migrations.migrate(citus_dsn, schema)
    replace_retrieve_with_an_older_signature(citus_dsn, schema)
    assert installed_differences(citus_dsn, schema, every_node=True) != []
    assert migrations.migrate(citus_dsn, schema) == ["function retrieve is not the head file's"]
    assert installed_differences(citus_dsn, schema, every_node=True) == []
    assert _distributed_by_agent(citus_dsn, schema) == DELEGATED
    assert migrations.migrate(citus_dsn, schema) == []  # and then nothing to do
    store = PostgresStore(PostgresSettings(citus_dsn, schema=schema, distribute="citus"))
    await store.setup()
    try:
        await store.upsert_memories([record("a", "m1", "green tea", [1, 0, 0, 0])])
        found = await store.search(request("a", "tea", [1, 0, 0, 0]))
        assert [hit.memory.id for hit in found.hits] == ["m1"]
    finally:
        await store.close()


@pytest.mark.parametrize("budget", [None, 40])
async def test_the_search_is_one_call_run_whole_by_the_agents_worker(
    store_citus: PostgresStore, citus_dsn: str, citus_schema: str, budget: int | None
) -> None:
    await _seed(store_citus)
    calls: list[tuple[Any, Any]] = []
    _captured(store_citus, calls)
    got = await store_citus.search(replace(request("a", "coffee", [1, 0, 0, 0]), budget=budget))
    assert [h.memory.id for h in got.hits][:1] == ["m1"] and got.candidates_considered == 3
    assert {h.memory.agent_id for h in got.hits} == {"a"}
    # The search is one statement, the delegated call: nothing else reached the server.
    assert len(calls) == 1
    (statement, params) = calls[0]
    assert statement == builders._retrieve_text(citus_schema)
    _assert_delegated(
        _explain(citus_dsn, statement, params), citus_schema, _worker_ports(citus_dsn)
    )


async def _context_of_a(store: PostgresStore) -> tuple[Any, Any, list[tuple[Any, Any]]]:
    """Agent a's context (two of its three turns in session s1, memories within 1,000 tokens)
    after :func:`_seed`, and the statements that fetched it."""
    from tests.factories import turn

    await _seed(store)
    for i in range(3):
        await store.append_turn(turn("a", "s1", f"t{i}"), max_turns=50, ttl_seconds=3600)
    calls: list[tuple[Any, Any]] = []
    _captured(store, calls)
    query = replace(request("a", "coffee", [1, 0, 0, 0]), budget=1000)
    turns, packed = await store.fetch_context("a", "s1", limit=2, ttl_seconds=3600, request=query)
    return turns, packed, calls


async def test_retrieve_context_is_one_call_run_whole_by_the_agents_worker(
    store_citus: PostgresStore, citus_dsn: str, citus_schema: str
) -> None:
    # L1 and L2 of retrieve_context in one delegated call (retrieve): the turns and the
    # packed memories come back from the worker holding the agent's shards.
    turns, packed, calls = await _context_of_a(store_citus)
    assert [t.user_message for t in turns] == ["user: t1", "user: t2"]
    assert packed.hits[0].memory.id == "m1" and packed.candidates_considered == 3
    assert len(calls) == 1  # one statement reached the server
    (statement, params) = calls[0]
    assert statement == builders._retrieve_text(citus_schema)
    assert params["session"] == "s1"
    _assert_delegated(
        _explain(citus_dsn, statement, params), citus_schema, _worker_ports(citus_dsn)
    )


def _placement(dsn: str, schema: str, agent: str) -> tuple[str, int]:
    """A DSN of the node holding ``agent``'s memories shard, and that shard's id."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        (shard, host, port, group) = conn.execute(
            "SELECT s.shardid, n.nodename, n.nodeport, n.groupid FROM pg_dist_placement AS s"
            " JOIN pg_dist_node AS n ON n.groupid = s.groupid WHERE s.shardid ="
            " get_shard_id_for_distribution_column(%s::regclass, %s::text)",
            (f"{schema}.memories", agent),
        ).fetchall()[0]
    if group == 0:
        return dsn, int(shard)  # a single-node cluster: the coordinator holds it
    return psycopg.conninfo.make_conninfo(dsn, host=host, port=port), int(shard)


def _noticed(
    dsn: str,
    statement: Any,
    params: Any,
    settings: tuple[str, ...],
    *,
    block: bool = False,
    warm: bool = False,
) -> tuple[list[Any], list[str], list[str]]:
    """The call's rows on the node at ``dsn`` in a session with ``settings``, the notices it
    raised there, and the node's prepared statements after it (``block``: inside a transaction
    block, where the coordinator does not delegate the call; ``warm``: called once before the
    settings, so that the call measured reuses what the first one prepared)."""
    with psycopg.connect(dsn, autocommit=True, cursor_factory=psycopg.ClientCursor) as conn:
        register_vector(conn)
        if warm:
            conn.execute(statement, params).fetchall()
        notices: list[str] = []
        conn.add_notice_handler(lambda d: notices.append(str(d.message_primary)))
        for setting in settings:
            conn.execute(setting)
        with conn.transaction() if block else contextlib.nullcontext():
            rows = conn.execute(statement, params).fetchall()
        prepared = conn.execute("SELECT name FROM pg_prepared_statements").fetchall()
    return rows, notices, [str(r[0]) for r in prepared]


def _called(
    dsn: str, statement: Any, params: Any, *, block: bool = False
) -> tuple[list[Any], list[str], list[str]]:
    """The call's rows on the node at ``dsn``, the commands Citus ran on that node's shards for
    it, and the node's prepared statements after it (``block`` as :func:`_noticed`'s)."""
    settings = ("SET citus.log_local_commands = on", "SET client_min_messages = log")
    rows, notices, prepared = _noticed(dsn, statement, params, settings, block=block)
    local = [m for m in notices if "executing the command locally" in m]
    return rows, local, prepared


async def test_the_agents_worker_runs_the_call_on_its_shard_tables_with_one_prepared_plan(
    store_citus: PostgresStore, citus_dsn: str, citus_schema: str
) -> None:
    # 0020: on the node holding the agent's shards the call reads them as plain tables in one
    # statement prepared once per session (docs/notes/scale-out.md, "Where the difference goes"); on
    # a node without them (the coordinator inside a transaction block) it runs the distributed
    # statements. Both give the same rows, the turns included.
    (statement, params) = (await _context_of_a(store_citus))[2][-1]
    worker, shard = _placement(citus_dsn, citus_schema, "a")

    with psycopg.connect(worker, autocommit=True, cursor_factory=psycopg.ClientCursor) as conn:
        register_vector(conn)
        first = conn.execute(statement, params).fetchall()
        again = conn.execute(statement, params).fetchall()
        prepared = conn.execute("SELECT name, generic_plans FROM pg_prepared_statements").fetchall()
    assert first == again
    (name, plans) = prepared[0]
    assert len(prepared) == 1 and re.fullmatch(rf"actrone_[0-9a-f]{{12}}_{shard}", name)
    assert plans == 2  # prepared once, its generic plan used twice

    rows, local, _ = _called(worker, statement, params)
    assert rows == first and local == []  # no statement of Citus's: the shard tables alone
    count = sql.SQL("SELECT count(*) FROM {} WHERE agent_id = 'a'").format(
        sql.Identifier(citus_schema, "memories")
    )
    assert _called(worker, count, None)[1]  # what a statement Citus runs there shows
    if worker != citus_dsn:
        # the coordinator holds no placement: the distributed statements, nothing prepared
        rows, _, prepared_there = _called(citus_dsn, statement, params, block=True)
        assert rows == first and prepared_there == []
    kinds = [r[0] for r in first]
    assert kinds.count("turn") == 2 and "memory" in kinds
    ids = [r[6] for r in first if r[0] == "memory"]
    assert ids[0] == "m1" and set(ids) <= {"m1", "m2", "m3"}


def _executed_plans(
    dsn: str, statement: Any, params: Any
) -> tuple[list[Any], list[dict[str, Any]]]:
    """The call's rows on the node at ``dsn``, and the plans, as EXPLAIN (ANALYZE, FORMAT
    JSON) gives them, of the statements it ran there, the function's own included
    (auto_explain; the call is made once before, so the plan explained is the one reused)."""
    settings = (
        "LOAD 'auto_explain'",
        "SET auto_explain.log_min_duration = 0",
        "SET auto_explain.log_nested_statements = on",
        "SET auto_explain.log_analyze = on",
        "SET auto_explain.log_format = json",
        "SET client_min_messages = log",
    )
    rows, notices, _ = _noticed(dsn, statement, params, settings, warm=True)
    return rows, [json.loads(m.split("plan:", 1)[1]) for m in notices if "plan:" in m]


def _nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    """A plan node and every node under it."""
    return [node, *(n for child in node.get("Plans", []) for n in _nodes(child))]


async def test_the_agents_worker_reads_the_chosen_memories_by_their_ids(
    store_citus: PostgresStore, citus_dsn: str, citus_schema: str
) -> None:
    # As retrieve() does, every read of the agent's shard after the candidate scan is by id: the
    # candidates' rows and the chosen memories' rows, each one scan restricted to their ids (0021
    # read each chosen memory by one probe). 0020 joined the chosen memories to the shard, a hash
    # join that read every memory of the agent (enable_nestloop is off for the ranking's joins).
    # On a shard this small the planner may scan the table rather than its index: the ids are
    # then a filter of that scan, which still reads no memory the call does not need by id.
    (statement, params) = (await _context_of_a(store_citus))[2][-1]
    worker, shard = _placement(citus_dsn, citus_schema, "a")
    rows, plans = _executed_plans(worker, statement, params)
    chosen = sum(1 for r in rows if r[0] == "memory")
    assert chosen > 1
    (call,) = [p for p in plans if "PREPARE" in p["Query Text"]]
    on_shard = [n for n in _nodes(call["Plan"]) if n.get("Relation Name") == f"memories_{shard}"]

    def condition(n: dict[str, Any]) -> str:
        return f"{n.get('Index Cond', '')} {n.get('Filter', '')}"

    # every executed read but the candidate scan (the one comparing vectors)
    read = [n for n in on_shard if n["Actual Loops"] > 0 and "<#>" not in condition(n)]
    summary = [(n["Node Type"], n["Actual Loops"], n["Actual Rows"], condition(n)) for n in read]
    assert read and all("(id = " in condition(n) for n in read), summary
    assert any(
        n["Actual Loops"] == 1 and n["Actual Rows"] == chosen and "id = ANY" in condition(n)
        for n in read
    ), summary


async def test_a_filtered_search_is_one_call_run_whole_by_the_agents_worker(
    store_citus: PostgresStore, citus_dsn: str, citus_schema: str
) -> None:
    # 0024: the filtered set is found inside the delegated call (over the agent's shard), not
    # by a router query before it.
    await _seed(store_citus)
    calls: list[tuple[Any, Any]] = []
    _captured(store_citus, calls)
    flt = MemoryFilter(tags_any=("food",))
    got = await store_citus.search(replace(request("a", "coffee", [1, 0, 0, 0]), filter=flt))
    assert [h.memory.id for h in got.hits] == ["m3"]
    assert len(calls) == 1
    _assert_delegated(_explain(citus_dsn, *calls[0]), citus_schema, _worker_ports(citus_dsn))


async def test_the_term_statistics_are_written_by_the_agents_worker(
    store_citus: PostgresStore, citus_dsn: str, citus_schema: str
) -> None:
    """Every writer's df update is a router query: one task on the agent's shard, not rows
    pulled to the coordinator and copied back (its SELECT reads the agent's statistics row)."""
    await store_citus.upsert_memories([record("a", "m1", "coffee", [1, 0, 0, 0])])
    statement = sql.SQL(UPDATE_TERM_STATS).format(s=sql.Identifier(citus_schema))
    plan = _explain(citus_dsn, statement, ("a", ["coffee", "tea"], [1, -1]))
    assert "Task Count: 1" in plan, plan
    assert "coordinator" not in plan, plan


@pytest.fixture
async def store_one(
    citus_dsn: str, citus_schema: str, store_citus: PostgresStore
) -> AsyncIterator[PostgresStore]:
    """A store on the emptied distributed schema with one pooled connection, so that a test
    can set that connection up (or break it) and the store's next call uses it."""
    store = PostgresStore(
        PostgresSettings(citus_dsn, schema=citus_schema, pool_min_size=1, pool_max_size=1)
    )
    await store.setup()
    try:
        yield store
    finally:
        await store.close()


def _refused_while_planning(schema: str) -> sql.Composed:
    """A statement Citus refuses while planning a subquery: after it, a session delegates no
    function again (Citus 13-14)."""
    sessions = sql.Identifier(schema, "sessions")
    return sql.SQL(
        "SELECT * FROM {} WHERE agent_id IN (SELECT agent_id FROM {} LIMIT 1"
        " FOR UPDATE SKIP LOCKED)"
    ).format(sessions, sessions)


async def test_a_pooled_connection_keeps_delegating_after_an_error(
    citus_dsn: str, citus_schema: str, store_one: PostgresStore
) -> None:
    # Citus 13-14: after an error raised while planning a subquery, a session never delegates
    # again. The store closes a connection that raised, so the pool's next one delegates.
    await _seed(store_one)
    with pytest.raises(StoreError):
        async with store_one.db.conn() as conn:
            await conn.execute(_refused_while_planning(citus_schema))
    calls: list[tuple[Any, Any]] = []
    _captured(store_one, calls)
    await store_one.search(request("a", "coffee", [1, 0, 0, 0]))
    statement, params = calls[-1]
    async with store_one.db.conn() as conn:  # the pool's only connection: the one searches use
        inlined = psycopg.ClientCursor(conn).mogrify(statement, params)
        cur = await conn.execute("EXPLAIN (VERBOSE) " + inlined)
        plan = "\n".join(str(r[0]) for r in await cur.fetchall())
    _assert_delegated(plan, citus_schema, _worker_ports(citus_dsn))


async def test_the_session_sweeper_goes_agent_by_agent(store_citus: PostgresStore) -> None:
    from tests.factories import turn

    for agent in ("a", "b", "c"):
        await store_citus.append_turn(turn(agent, "old", "t"), max_turns=5, ttl_seconds=3600)
    with psycopg.connect(store_citus.dsn or "", autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "UPDATE {} SET last_active_at = now() - interval '2 hours' WHERE agent_id <> 'c'"
            ).format(sql.Identifier(store_citus.schema, "sessions"))
        )
    assert await store_citus.sweep_expired_sessions(ttl_seconds=3600, limit=10) == 2
    assert await store_citus.expired_sessions(ttl_seconds=3600, limit=10) == []
    assert len(await store_citus.recent_turns("c", "old", limit=5, ttl_seconds=3600)) == 1


async def test_the_lock_admits_one_holder_on_the_cluster(store_citus: PostgresStore) -> None:
    assert await store_citus.acquire_lock("a", "consolidate", "one", 30)
    assert not await store_citus.acquire_lock("a", "consolidate", "two", 30)
    assert await store_citus.acquire_lock("b", "consolidate", "two", 30)
    assert not await store_citus.release_lock("a", "consolidate", "two")
    assert await store_citus.release_lock("a", "consolidate", "one")
    assert await store_citus.acquire_lock("a", "consolidate", "two", 30)


def test_off_keeps_plain_tables_and_distribute_converts_them_with_their_rows(
    citus_dsn: str, citus_scratch_schema: str
) -> None:
    import asyncio

    schema = citus_scratch_schema
    migrations.migrate(citus_dsn, schema, distribute="off")
    assert _partitions(citus_dsn, schema) == {}

    async def write_then_search() -> list[str]:
        store = PostgresStore(PostgresSettings(citus_dsn, schema=schema, distribute="off"))
        await store.setup()
        try:
            assert not store.distributed
            await _seed(store)
            got = await store.search(request("a", "coffee", [1, 0, 0, 0]))
            return [h.memory.id for h in got.hits]
        finally:
            await store.close()

    before = asyncio.run(write_then_search())
    steps = migrations.distribute(citus_dsn, schema)
    assert "distributed memories by agent_id" in steps
    assert migrations.distribute(citus_dsn, schema) == []  # a second run changes nothing
    # as a fresh migrate leaves them
    assert _distributed_by_agent(citus_dsn, schema) == DELEGATED
    assert sorted(t for t, (m, _) in _partitions(citus_dsn, schema).items() if m == "h") == (
        list(PER_AGENT)
    )

    async def search_distributed() -> list[str]:
        store = PostgresStore(PostgresSettings(citus_dsn, schema=schema, distribute="citus"))
        await store.setup()
        try:
            assert store.distributed and await store.count_memories("a") == 3
            got = await store.search(request("a", "coffee", [1, 0, 0, 0]))
            return [h.memory.id for h in got.hits]
        finally:
            await store.close()

    assert asyncio.run(search_distributed()) == before


async def test_citus_is_required_on_a_plain_server(postgres_dsn: str, postgres_schema: str) -> None:
    store = PostgresStore(
        PostgresSettings(postgres_dsn, schema=postgres_schema, distribute="citus")
    )
    with pytest.raises(ConfigurationError, match="postgres_distribute.*no citus extension"):
        await store.setup()


def test_the_migrations_refuse_citus_on_a_plain_server(
    postgres_dsn: str, scratch_schema: str
) -> None:
    from actrone_pg.errors import SchemaError

    with pytest.raises(SchemaError, match="no citus extension"):
        migrations.migrate(postgres_dsn, scratch_schema, distribute="citus")
    assert migrations.current_revision(postgres_dsn, scratch_schema) is None  # nothing created


async def test_a_large_agent_is_searched_through_its_own_index_on_the_cluster(
    citus_dsn: str, citus_schema: str, store_citus: PostgresStore
) -> None:
    # The HNSW path on a distributed schema: the index is built on the shards (CREATE INDEX
    # CONCURRENTLY through the coordinator), its candidates come from a router query whose scan
    # settings reach the worker (SET LOCAL), and the delegated search ranks them.
    from tests.stores.test_postgres_ann import DIM, _query, _records

    store = PostgresStore(
        PostgresSettings(citus_dsn, schema=citus_schema, pool_max_size=4, ann_min_memories=2_000)
    )
    await store.setup()
    try:
        await store.upsert_memories(_records("big", 2_500, seed=3))
        await store.wait_for_indexes()
        assert store.db.maintenance.ann_known.get(("big", "test-embedder"), (False, 0.0))[0]
        query = request("big", "tea", _query(5), limit=50)
        exact = await store_citus.search(query)  # ann_min_memories 50,000: an exact scan
        found = await store.search(query)
        overlap = {h.memory.id for h in found.hits} & {h.memory.id for h in exact.hits}
        assert len(exact.hits) == 50 and len(overlap) >= 45  # recall of the HNSW candidates
        assert DIM == len(query.vector)
    finally:
        await store.close()


def test_a_callers_own_alembic_setup_distributes_too(
    citus_dsn: str, citus_scratch_schema: str
) -> None:
    # alembic -n actrone upgrade head from an application's alembic.ini, on its connection and
    # in its transaction: "auto" finds Citus there as well.
    import sys

    import sqlalchemy as sa
    from alembic import command
    from alembic.config import Config

    schema = citus_scratch_schema
    engine = sa.create_engine(
        "postgresql+psycopg://",
        creator=lambda: psycopg.connect(citus_dsn),
        poolclass=sa.NullPool,
    )
    cfg = Config(stdout=sys.stdout)
    cfg.set_main_option("script_location", "actrone_pg:migrations")
    cfg.attributes["actrone_schema"] = schema
    with engine.begin() as connection:
        cfg.attributes["connection"] = connection
        command.upgrade(cfg, "head")
    engine.dispose()
    found = _partitions(citus_dsn, schema)
    assert sorted(t for t, (m, _) in found.items() if m == "h") == list(PER_AGENT)


async def test_reindex_rewrites_the_terms_of_a_distributed_schema(
    citus_dsn: str, citus_schema: str, store_citus: PostgresStore
) -> None:
    # `actrone-pg reindex` on the cluster: one transaction that locks the tables, reads every
    # memory across shards, rewrites each on its shard and rebuilds the statistics with
    # multi-shard INSERT ... SELECT; then a store with the new analyzer ranks as the reference.
    # The session's schema gets its own analyzer back at the end.
    from actrone_pg.stores.postgres.reindex import reindex
    from tests.test_analyzer import TEXTS, _ranked, _records, _reference

    mine = store_citus.analyzer.name
    other = "simple" if mine != "simple" else "english"
    await store_citus.upsert_memories(_records())
    await store_citus.upsert_memories([record("b", "m1", "cats running for b", [1, 0, 0, 0])])
    assert await _ranked(store_citus) == await _reference(mine)
    try:
        assert reindex(citus_dsn, citus_schema, other) == len(TEXTS) + 1
        new = PostgresStore(PostgresSettings(citus_dsn, schema=citus_schema, text_analyzer=other))
        await new.setup()
        try:
            assert await _ranked(new) == await _reference(other) != await _reference(mine)
        finally:
            await new.close()
    finally:
        assert reindex(citus_dsn, citus_schema, mine) == len(TEXTS) + 1
    assert await _ranked(store_citus) == await _reference(mine)


async def _remote_commands(store: PostgresStore, write: Any) -> list[str]:
    """The commands the coordinator sent to the workers while ``write(store)`` ran, on the
    store's only connection (``citus.log_remote_commands``)."""
    assert store.db.pool is not None and store.db.pool.max_size == 1
    notices: list[str] = []
    async with store.db.conn() as conn:
        await conn.execute("SET citus.log_remote_commands = on")
        await conn.execute("SET client_min_messages = log")
        conn.add_notice_handler(lambda d: notices.append(str(d.message_primary)))
    try:
        await write(store)
    finally:
        async with store.db.conn() as conn:
            await conn.execute("RESET citus.log_remote_commands")
            await conn.execute("RESET client_min_messages")
    return [m for m in notices if m.startswith("issuing ")]


def _writes(commands: list[str]) -> list[str]:
    """Of the commands sent to the workers, the statements (no transaction control)."""
    control = (
        "BEGIN",
        "SELECT assign_distributed_transaction_id",
        "PREPARE TRANSACTION",
        "COMMIT",
        "ROLLBACK",
        "SET ",
    )
    out = []
    for command in commands:
        text = command.removeprefix("issuing ").split(";DETAIL")[0].strip()
        for part in (p.strip() for p in text.split(";") if p.strip()):
            if not part.startswith(control):
                out.append(part)
    return out


async def _replacing(store: PostgresStore) -> None:
    """A batch that replaces agent a's m1 ("coffee beans") and adds m2."""
    await store.upsert_memories(
        [record("a", "m1", "green tea", [0, 1, 0, 0]), record("a", "m2", "tea", [0, 1, 1, 0])]
    )


def _assert_replaced(dsn: str, schema: str) -> None:
    """Agent a's statistics after :func:`_replacing`: the replaced memory's terms are gone."""
    from tests.stores.test_postgres import agent_statistics

    stats, df = agent_statistics(dsn, schema, "a")
    assert "coffee" not in df and df["tea"] == 2 and df["green"] == 1
    assert stats is not None and stats[0] == 2


async def test_a_batch_is_one_delegated_call_and_its_copy(
    citus_dsn: str, citus_schema: str, store_one: PostgresStore
) -> None:
    # Migration 0022: the batch's statements but the COPY are one call on the agent's worker,
    # over its shard tables; the replaced memory leaves the statistics with it.
    await store_one.upsert_memories([record("a", "m1", "coffee beans", [1, 0, 0, 0])])

    sent = _writes(await _remote_commands(store_one, _replacing))
    assert len(sent) == 2, sent
    assert "agent_write(" in sent[0] and sent[1].startswith("COPY "), sent
    _assert_replaced(citus_dsn, citus_schema)


async def test_random_writes_on_the_cluster_match_a_recount(
    citus_dsn: str, citus_schema: str, store_citus: PostgresStore
) -> None:
    from tests.stores.test_postgres import random_writes_match_a_recount

    await random_writes_match_a_recount(store_citus, citus_dsn, citus_schema)


def test_agent_write_elsewhere_than_the_agents_worker_writes_through_the_distributed_tables(
    citus_dsn: str, citus_schema: str, store_citus: PostgresStore
) -> None:
    # A call Citus does not delegate (a session that no longer delegates, a client of another
    # node) runs where no placement of the agent's shards may be: the same statements, over the
    # distributed tables, routed to each agent's shards. An argument that is not a constant
    # keeps Citus from delegating it (on the coordinator, and on a worker, which with the
    # metadata would delegate it too). Seven agents a session: its prepared statements run past
    # PostgreSQL's five custom plans, for agents on every worker.
    agents = [f"agent{i}" for i in range(7)]
    nodes = [
        citus_dsn,
        *(re.sub(r":\d+/", f":{p}/", citus_dsn) for p in _worker_ports(citus_dsn) - {0}),
    ]
    call = sql.SQL(
        "SELECT held, n_docs FROM {}.agent_write((SELECT %s::text), ARRAY['m1'], ARRAY['tea'],"
        " ARRAY[1], 1, 3, true, NULL, NULL)"
    ).format(sql.Identifier(citus_schema))
    for n, node in enumerate(nodes, 1):
        with psycopg.connect(node, autocommit=True) as conn:
            for agent in agents:
                assert conn.execute(call, (agent,)).fetchall() == [(True, n)], (node, agent)
    from tests.stores.test_postgres import agent_statistics

    for agent in agents:
        stats, df = agent_statistics(citus_dsn, citus_schema, agent)
        assert stats == (len(nodes), 3 * len(nodes)) and df == {"tea": len(nodes)}, agent


async def test_a_session_that_no_longer_delegates_writes_through_the_coordinator(
    citus_dsn: str, citus_schema: str, store_one: PostgresStore
) -> None:
    # Citus 13-14: after an error raised while planning a subquery, a session delegates no
    # function again (the store closes such a connection; this one is made so past the store).
    # Its agent_write then runs on the coordinator, over the distributed tables: the same
    # statements, each routed to the agent's worker, and the statistics as exact.
    await store_one.upsert_memories([record("a", "m1", "coffee beans", [1, 0, 0, 0])])
    assert store_one.db.pool is not None
    async with store_one.db.pool.connection() as raw:
        with pytest.raises(psycopg.Error):
            await raw.execute(_refused_while_planning(citus_schema))

    sent = _writes(await _remote_commands(store_one, _replacing))
    assert not any("agent_write(" in c for c in sent), sent
    # the lock, the replaced memory, its versions, the frequencies (an INSERT ... SELECT of no
    # distributed table: Citus COPYs the computed rows, then inserts them), the pruning of the
    # replaced memory's terms, the totals (agent_write's statements, in its order), the rows
    kinds = ["INSERT", "WITH", "DELETE", "COPY", "INSERT", "DELETE", "UPDATE", "COPY"]
    assert [c.split()[0] for c in sent] == kinds, sent
    _assert_replaced(citus_dsn, citus_schema)


async def test_a_store_running_while_the_cluster_is_reindexed_refuses_its_old_terms(
    citus_dsn: str, citus_scratch_schema: str
) -> None:
    # A batch's agent_write runs on the workers, where the reindex's table locks on the
    # coordinator do not reach: it waits on the shard locks the reindex takes first.
    from tests.test_analyzer import reindexed_while_running

    schema = citus_scratch_schema
    migrations.migrate(citus_dsn, schema, distribute="citus")
    await reindexed_while_running(citus_dsn, schema, distribute="citus")


async def test_a_batch_across_workers_with_a_new_embedder_is_one_transaction(
    citus_dsn: str, citus_schema: str, store_citus: PostgresStore
) -> None:
    # Agents on both workers and an embedder registered in the same transaction (a reference
    # table written on every node before the delegated calls): all of it goes in; and a batch
    # refused for one agent (its fence not held) writes nothing for the others.
    import uuid

    from actrone_pg.errors import LockLostError
    from actrone_pg.stores.base import Fence

    with psycopg.connect(citus_dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT a, n.nodeport FROM unnest(%s::text[]) AS a, pg_dist_placement AS p"
            " JOIN pg_dist_node AS n USING (groupid)"
            " WHERE p.shardid = get_shard_id_for_distribution_column(%s::regclass, a)",
            ([f"agent{i}" for i in range(12)], f"{citus_schema}.memories"),
        ).fetchall()
    by_node: dict[int, str] = {}
    for agent, port in rows:
        by_node.setdefault(int(port), str(agent))
    agents = sorted(by_node.values())
    if len(agents) < 2:
        pytest.skip("the agents' shards are on one node")
    embedder = f"e-{uuid.uuid4().hex[:6]}"
    batch = [
        record(a, f"m{i}", f"tea number {i}", [1, i, 0, 0], embedder=embedder)
        for i, a in enumerate(agents)
    ]
    await store_citus.upsert_memories(batch)
    assert [await store_citus.count_memories(a) for a in agents] == [1] * len(agents)
    # fenced by a lock held for every agent but the last: the first agents' writes (call and
    # COPY on their workers) are made, then the last is refused, and the whole batch rolls back
    for agent in agents[:-1]:
        assert await store_citus.acquire_lock(agent, "maintenance", "h", 30.0)
    again = [record(a, "n1", "coffee", [0, 1, 0, 0]) for a in agents]
    with pytest.raises(LockLostError):
        await store_citus.upsert_memories(again, fence=Fence("maintenance", "h"))
    assert [await store_citus.count_memories(a) for a in agents] == [1] * len(agents)
    with psycopg.connect(citus_dsn, autocommit=True) as conn:
        totals = conn.execute(
            sql.SQL("SELECT agent_id, n_docs FROM {} WHERE agent_id = ANY(%s) ORDER BY 1").format(
                sql.Identifier(citus_schema, "agent_stats")
            ),
            (agents,),
        ).fetchall()
    assert totals == [(a, 1) for a in agents]


async def test_the_shards_keep_a_memory_of_a_few_sentences_as_written(
    citus_dsn: str, citus_schema: str, store_citus: PostgresStore
) -> None:
    # Migration 0023's toast_tuple_target, set on the distributed table, reaches its shards.
    from tests.stores.test_postgres import record_sizes_as_written

    await record_sizes_as_written(store_citus, citus_dsn, citus_schema)
    with psycopg.connect(citus_dsn, autocommit=True) as conn:
        options = conn.execute(
            "SELECT DISTINCT result FROM run_command_on_shards(%s,"
            " $$SELECT reloptions::text FROM pg_class WHERE oid = '%%s'::regclass$$)",
            (f"{citus_schema}.memories",),
        ).fetchall()
    assert options == [("{toast_tuple_target=8160}",)], options
