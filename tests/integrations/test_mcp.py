"""``actrone-pg mcp``: the tools, their errors and the agent allow-list, through the SDK's client.

In process (``Client(server)``), over stdio (the command spawned as a client would) and over
streamable HTTP (the command on a free loopback port, with and without its bearer token).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from actrone_pg import MemoryConfig, MemoryManager, StoreUnavailableError
from actrone_pg.cli import main
from actrone_pg.integrations.mcp import build_server
from actrone_pg.stores.memory import InMemoryStore
from tests.helpers import SlowStore

ROOT = Path(__file__).resolve().parents[2]
TOOLS = {
    "retrieve_context",
    "search_memories",
    "store_turn",
    "inject_memory",
    "update_memory",
    "list_memories",
    "delete_memory",
    "get_memory",
    "get_recent_turns",
}
TOKEN = "test-token-0123456789abcdef"
SERVER_ENV = {"ACTRONE_BACKEND": "memory", "ACTRONE_EMBEDDING_PROVIDER": "hashing"}


@pytest.fixture
async def manager() -> AsyncIterator[MemoryManager]:
    mm = await MemoryManager.create(
        MemoryConfig(backend="memory", embedding_provider="hashing"), store=InMemoryStore()
    )
    yield mm
    await mm.close()


def text(result: Any) -> str:
    return "".join(c.text for c in result.content)


async def exercise(client: Client, agent: str = "a1") -> None:
    """The tools one after another, as an agent would use them; checks every answer."""
    tools = await client.list_tools()
    assert {t.name for t in tools.tools} == TOOLS
    turn = await client.call_tool(
        "store_turn",
        {
            "agent_id": agent,
            "session_id": "s1",
            "user_message": "Plan dinner?",
            "assistant_message": "Sure, for how many?",
        },
    )
    assert not turn.is_error, text(turn)
    assert turn.structured_content["token_count"] == 8  # ceil(12 / 4) + ceil(19 / 4)
    injected = await client.call_tool(
        "inject_memory",
        {"agent_id": agent, "content": "The user is allergic to peanuts", "tags": ["health"]},
    )
    mid = injected.structured_content["id"]
    ctx = await client.call_tool(
        "retrieve_context",
        {"agent_id": agent, "session_id": "s1", "query": "peanuts allergic", "token_budget": 2000},
    )
    body = ctx.structured_content
    assert [t["user_message"] for t in body["recent_turns"]] == ["Plan dinner?"]
    assert [m["id"] for m in body["episodic_memories"]] == [mid]
    assert (body["session_budget"], body["episodic_budget"]) == (700, 500)  # 35 % and 25 %
    # the text content is the same JSON, for clients that only read text
    assert json.loads(text(ctx))["episodic_memories"][0]["tags"] == ["health"]
    found = await client.call_tool(
        "search_memories", {"agent_id": agent, "query": "allergic", "explain": True}
    )
    [hit] = found.structured_content["memories"]
    assert hit["id"] == mid and hit["explain"]["lexical_rank"] == 1
    got = await client.call_tool("get_memory", {"agent_id": agent, "memory_id": mid})
    assert got.structured_content["memory"]["content"] == "The user is allergic to peanuts"
    turns = await client.call_tool("get_recent_turns", {"agent_id": agent, "session_id": "s1"})
    assert [t["id"] for t in turns.structured_content["turns"]] == [turn.structured_content["id"]]
    deleted = await client.call_tool("delete_memory", {"agent_id": agent, "memory_id": mid})
    assert deleted.structured_content == {"deleted": True}
    gone = await client.call_tool("get_memory", {"agent_id": agent, "memory_id": mid})
    assert gone.structured_content == {"memory": None}


async def test_tools_work_in_process(manager: MemoryManager) -> None:
    async with Client(build_server(manager)) as client:
        await exercise(client)


async def test_every_tool_and_parameter_is_described_for_a_model(manager: MemoryManager) -> None:
    async with Client(build_server(manager, agents=["a1", "a2"])) as client:
        tools = (await client.list_tools()).tools
    for tool in tools:
        assert tool.description and len(tool.description) > 40, tool.name
        schema = tool.input_schema
        assert schema["type"] == "object"
        assert "agent_id" in schema["required"], tool.name
        for name, prop in schema["properties"].items():
            assert prop.get("description"), f"{tool.name}.{name}"
        assert "a1, a2" in schema["properties"]["agent_id"]["description"]
    by_name = {t.name: t for t in tools}
    assert by_name["retrieve_context"].input_schema["required"] == [
        "agent_id",
        "session_id",
        "query",
        "token_budget",
    ]
    budget = by_name["retrieve_context"].input_schema["properties"]["token_budget"]
    assert "35% go to recent turns, 25% to memories" in budget["description"]
    assert by_name["delete_memory"].annotations.destructive_hint is True
    assert by_name["search_memories"].annotations.read_only_hint is True


async def test_library_errors_are_tool_errors_and_the_server_goes_on(
    manager: MemoryManager,
) -> None:
    async with Client(build_server(manager)) as client:
        bad_budget = await client.call_tool(
            "retrieve_context",
            {"agent_id": "a1", "session_id": "s1", "query": "q", "token_budget": 0},
        )
        assert bad_budget.is_error
        assert "ValidationError: token_budget" in text(bad_budget)
        nul = await client.call_tool("inject_memory", {"agent_id": "a1", "content": "a\x00b"})
        assert nul.is_error and "ValidationError" in text(nul)
        blank = await client.call_tool(
            "store_turn",
            {"agent_id": " ", "session_id": "s", "user_message": "hi", "assistant_message": ""},
        )
        assert blank.is_error and "agent_id" in text(blank)
        wrong_type = await client.call_tool(
            "search_memories", {"agent_id": "a1", "query": "q", "limit": "many"}
        )
        assert wrong_type.is_error and "limit" in text(wrong_type)
        # nothing was written, and the server still answers
        assert await manager.count_memories("a1") == 0
        await exercise(client)


async def test_update_and_list_memories(manager: MemoryManager) -> None:
    async with Client(build_server(manager)) as client:
        ids = []
        for importance, (content, tags) in [
            (0.2, ("The user likes tea", ["drink"])),
            (0.5, ("The user lives in Oslo", ["place"])),
            (0.8, ("The user likes coffee", ["drink"])),
        ]:
            result = await client.call_tool(
                "inject_memory",
                {"agent_id": "a1", "content": content, "tags": tags, "importance": importance},
            )
            ids.append(result.structured_content["id"])
        updated = await client.call_tool(
            "update_memory",
            {
                "agent_id": "a1",
                "memory_id": ids[0],
                "content": "The user likes green tea",
                "expires_at": "2100-01-01T00:00:00Z",
            },
        )
        assert not updated.is_error, text(updated)
        memory = updated.structured_content["memory"]
        assert (memory["id"], memory["content"], memory["version"]) == (
            ids[0],
            "The user likes green tea",
            2,
        )
        assert memory["tags"] == ["drink"] and memory["importance"] == 0.2  # kept
        assert memory["expires_at"].startswith("2100-01-01T00:00:00")
        history = await manager.memory_history("a1", ids[0])
        assert [m.content for m in history] == ["The user likes tea", "The user likes green tea"]
        cleared = await client.call_tool(
            "update_memory", {"agent_id": "a1", "memory_id": ids[0], "clear_expiry": True}
        )
        assert not cleared.is_error, text(cleared)
        memory = cleared.structured_content["memory"]
        assert (memory["version"], memory["expires_at"]) == (3, None)
        history = await manager.memory_history("a1", ids[0])
        assert [m.expires_at is None for m in history] == [True, False, True]

        async def listed(**args: Any) -> tuple[list[str], str | None]:
            result = await client.call_tool("list_memories", {"agent_id": "a1", **args})
            assert not result.is_error, text(result)
            body = result.structured_content
            return [m["id"] for m in body["memories"]], body["next_cursor"]

        first, cursor = await listed(limit=2)
        assert first == [ids[2], ids[1]] and cursor is not None  # newest first
        assert await listed(limit=2, cursor=cursor) == ([ids[0]], None)
        assert (await listed(filters={"tags_any": ["drink"]}))[0] == [ids[2], ids[0]]
        assert (await listed(filters={"min_importance": 0.5}))[0] == [ids[2], ids[1]]
        after = {"created_after": "2000-01-01T00:00:00Z", "metadata": {}}
        assert (await listed(filters=after))[0] == [ids[2], ids[1], ids[0]]
        assert (await listed(filters={"content_types": ["fact"]}))[0] == []

        # the searches take the same filters, applied before ranking
        query = {"agent_id": "a1", "query": "the user lives in Oslo"}
        found = await client.call_tool("search_memories", query)
        assert ids[1] in [m["id"] for m in found.structured_content["memories"]]
        found = await client.call_tool(
            "search_memories", {**query, "filters": {"tags_all": ["drink"]}}
        )
        assert ids[1] not in [m["id"] for m in found.structured_content["memories"]]
        ctx = await client.call_tool(
            "retrieve_context",
            {**query, "session_id": "s1", "token_budget": 2000, "filters": {"tags_any": ["place"]}},
        )
        assert [m["id"] for m in ctx.structured_content["episodic_memories"]] == [ids[1]]

        for tool, args, says in [
            ("update_memory", {"memory_id": "nope", "content": "x"}, "MemoryNotFoundError"),
            ("update_memory", {"memory_id": ids[1], "importance": 2}, "importance"),
            ("update_memory", {"memory_id": ids[1], "expires_at": "2001-01-01T00:00:00Z"}, ""),
            (
                "update_memory",
                {"memory_id": ids[1], "expires_at": "2100-01-01T00:00:00Z", "clear_expiry": True},
                "clear_expiry",
            ),
            ("list_memories", {"filters": {"colour": "red"}}, "colour"),
            ("list_memories", {"filters": {"created_after": "2000-01-01T00:00:00"}}, ""),
            ("list_memories", {"limit": 0}, "limit"),
            ("list_memories", {"cursor": "not-a-cursor"}, "cursor"),
            ("search_memories", {"query": "tea", "filters": {"min_importance": 7}}, "importance"),
        ]:
            result = await client.call_tool(tool, {"agent_id": "a1", **args})
            assert result.is_error, (tool, args)
            assert says in text(result)
        # nothing changed: the rejected update wrote no version
        assert [len(await manager.memory_history("a1", i)) for i in ids] == [3, 1, 1]


class DownForReads(SlowStore):
    """A store whose L1 reads fail as a lost server's would (a fault a test cannot cause)."""

    async def recent_turns(self, *args: Any, **kwargs: Any) -> Any:
        raise StoreUnavailableError("cannot reach the server: connection refused")


async def test_a_store_that_is_down_is_a_tool_error_too() -> None:
    store = DownForReads(InMemoryStore(), delay=0)
    mm = await MemoryManager.create(
        MemoryConfig(backend="memory", embedding_provider="hashing"), store=store
    )
    try:
        async with Client(build_server(mm)) as client:
            result = await client.call_tool(
                "get_recent_turns", {"agent_id": "a1", "session_id": "s1"}
            )
            assert result.is_error
            assert "StoreUnavailableError: the memory store's server cannot be reached" in text(
                result
            )
            # the writes and L2 still work on the same server
            ok = await client.call_tool("inject_memory", {"agent_id": "a1", "content": "x y"})
            assert not ok.is_error
    finally:
        await mm.close()


async def test_an_agent_not_served_is_refused_and_nothing_is_written(
    manager: MemoryManager,
) -> None:
    async with Client(build_server(manager, agents=["a1"])) as client:
        for tool, args in [
            ("inject_memory", {"content": "secret"}),
            ("store_turn", {"session_id": "s", "user_message": "hi", "assistant_message": "yo"}),
            ("search_memories", {"query": "secret"}),
            ("get_recent_turns", {"session_id": "s"}),
            ("update_memory", {"memory_id": "m1", "content": "overwritten"}),
            ("list_memories", {}),
        ]:
            result = await client.call_tool(tool, {"agent_id": "a2", **args})
            assert result.is_error, tool
            assert "does not serve agent 'a2'" in text(result)
        assert await manager.count_memories("a2") == 0
        assert await manager.get_recent_turns("a2", "s") == []
        await exercise(client, "a1")


def test_build_server_refuses_an_empty_allow_list(manager: MemoryManager) -> None:
    from actrone_pg import ConfigurationError

    with pytest.raises(ConfigurationError, match="agents"):
        build_server(manager, agents=[])


async def test_over_stdio_with_the_sdk_client() -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "actrone_pg.cli", "mcp", "--agent", "a1"],
        env=SERVER_ENV,
        cwd=ROOT,
    )
    async with Client(params) as client:
        await exercise(client)
        refused = await client.call_tool(
            "get_recent_turns", {"agent_id": "other", "session_id": "s"}
        )
        assert refused.is_error and "does not serve agent 'other'" in text(refused)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[str]:
    """``actrone-pg mcp --transport http`` on a free loopback port; yields its URL."""
    yield from _http_server(tmp_path, "--agent", "a2")


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER"])
async def test_over_http_with_the_token(http_server: str, scheme: str) -> None:
    headers = {"Authorization": f"{scheme} {TOKEN}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(http_server, http_client=http)) as client,
    ):
        await exercise(client, "a2")
        for tool, args in [
            ("inject_memory", {"content": "not for this server"}),
            ("update_memory", {"memory_id": "m1", "content": "not for this server"}),
            ("list_memories", {}),
        ]:
            refused = await client.call_tool(tool, {"agent_id": "a3", **args})
            assert refused.is_error and "does not serve agent 'a3'" in text(refused), tool
        listed = await client.call_tool("list_memories", {"agent_id": "a2"})
        assert listed.structured_content == {"memories": [], "next_cursor": None}


@pytest.mark.parametrize(
    "header",
    [None, "Bearer wrong-token-0123456789abcdef", f"Bearer {TOKEN}x", f"Basic {TOKEN}", TOKEN],
)
async def test_over_http_without_the_right_token_is_401(
    http_server: str, header: str | None
) -> None:
    headers = {"Authorization": header} if header else {}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    async with httpx2.AsyncClient(headers=headers) as http:
        response = await http.post(
            http_server,
            json=body,
            headers={"Accept": "application/json, text/event-stream"},
        )
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (["--agent", "a1"], {}, "needs a bearer token"),
        (["--agent", "a1"], {"ACTRONE_MCP_TOKEN": "short"}, "at least 16 characters"),
        ([], {"ACTRONE_MCP_TOKEN": TOKEN}, "must name the agents"),
    ],
)
def test_http_refuses_to_start_without_token_or_agents(
    argv: list[str],
    env: dict[str, str],
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("ACTRONE_MCP_TOKEN", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert main(["mcp", "--transport", "http", "--port", str(free_port()), *argv]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.postgres
@pytest.mark.slow
async def test_with_the_database_down_errors_do_not_say_where_it_lives(tmp_path: Path) -> None:
    from actrone_pg._embedded import stop_embedded

    data_dir = tmp_path / "pg-data"
    config = MemoryConfig(
        backend="postgres",
        embedding_provider="hashing",
        postgres_data_dir=str(data_dir),
        postgres_connect_timeout=1.0,
        postgres_statement_timeout=1.0,
    )
    mm = await MemoryManager.create(config)
    try:
        async with Client(build_server(mm)) as client:
            ok = await client.call_tool("inject_memory", {"agent_id": "a1", "content": "x y"})
            assert not ok.is_error
            assert stop_embedded(data_dir)
            said = []
            for tool, args in [
                ("inject_memory", {"content": "after the server went"}),
                ("search_memories", {"query": "x"}),
                ("get_recent_turns", {"session_id": "s1"}),
                ("list_memories", {}),
            ]:
                result = await client.call_tool(tool, {"agent_id": "a1", **args})
                assert result.is_error, tool
                said.append(text(result))
    finally:
        await mm.close()
    for message in said:
        assert "StoreUnavailableError" in message, message
        for where in (str(tmp_path), ".s.PGSQL", "port", "127.0.0.1", "localhost", "socket"):
            assert where not in message, message


# -- beyond loopback (spec §8): Host and Origin allowed by name; errors say no SQL; idle sessions


def _http_server(tmp_path: Path, *options: str) -> Iterator[str]:
    """``actrone-pg mcp --transport http`` with ``options`` on a free loopback port."""
    port = free_port()
    log = (tmp_path / "server.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "actrone_pg.cli", "mcp", "--transport", "http"]
        + ["--port", str(port), "--agent", "a1", *options],
        env={**os.environ, **SERVER_ENV, "ACTRONE_MCP_TOKEN": TOKEN},
        cwd=ROOT,
        stderr=log,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise AssertionError((tmp_path / "server.log").read_text())
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


@pytest.fixture
def named_server(tmp_path: Path) -> Iterator[str]:
    yield from _http_server(
        tmp_path,
        "--allowed-host",
        "memory.example:*",
        "--allowed-origin",
        "https://app.example",
        "--session-idle-seconds",
        "1",
    )


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}


async def _post(url: str, headers: dict[str, str], body: dict[str, Any]) -> httpx2.Response:
    async with httpx2.AsyncClient(timeout=30) as http:
        return await http.post(
            url,
            json=body,
            headers={
                "Authorization": f"Bearer {TOKEN}",
                "Accept": "application/json, text/event-stream",
                **headers,
            },
        )


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Host": "evil.example"}, 421),
        ({"Host": "memory.example:8000", "Origin": "http://evil.example"}, 403),
        ({"Host": "127.0.0.1"}, 421),  # only the names given, once any are
        ({"Host": "memory.example:8000", "Origin": "https://app.example"}, 200),
        ({"Host": "memory.example:8000"}, 200),  # no Origin: not a browser's cross-site call
    ],
)
async def test_only_the_allowed_host_and_origin_are_served(
    named_server: str, headers: dict[str, str], status: int
) -> None:
    response = await _post(named_server, headers, INITIALIZE)
    assert response.status_code == status, response.text


@pytest.mark.parametrize("header", [{"Host": "evil.example"}, {"Origin": "http://evil.example"}])
async def test_on_loopback_a_foreign_host_or_origin_is_refused(
    http_server: str, header: dict[str, str]
) -> None:
    assert (await _post(http_server, header, INITIALIZE)).status_code in (403, 421)


async def test_an_idle_session_is_closed_after_the_setting(named_server: str) -> None:
    host = {"Host": "memory.example:8000"}
    opened = await _post(named_server, host, INITIALIZE)
    session = opened.headers["mcp-session-id"]
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    await asyncio.sleep(2.5)
    gone = await _post(named_server, {**host, "mcp-session-id": session}, listing)
    assert gone.status_code == 404, gone.text


@pytest.mark.parametrize(
    ("argv", "env"),
    [
        (["--host", "0.0.0.0"], {}),
        (["--host", "0.0.0.0", "--allowed-host", "memory.example"], {}),
        (["--host", "0.0.0.0"], {"ACTRONE_MCP_ALLOWED_ORIGINS": "https://app.example"}),
    ],
)
def test_off_loopback_http_refuses_to_start_without_allowed_hosts_and_origins(
    argv: list[str],
    env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("ACTRONE_MCP_TOKEN", TOKEN)
    for key in ("ACTRONE_MCP_ALLOWED_HOSTS", "ACTRONE_MCP_ALLOWED_ORIGINS"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert main(["mcp", "--transport", "http", "--agent", "a1", *argv]) == 2
    assert "must name the Host and Origin headers it accepts" in capsys.readouterr().err


def test_the_allowed_values_come_from_the_environment_too(monkeypatch: pytest.MonkeyPatch) -> None:
    from actrone_pg.integrations.mcp import transport_security

    settings = transport_security("0.0.0.0", ["memory.example:*"], ["https://app.example"])
    assert settings.enable_dns_rebinding_protection
    assert (settings.allowed_hosts, settings.allowed_origins) == (
        ["memory.example:*"],
        ["https://app.example"],
    )
    loopback = transport_security("::1")
    assert "[::1]:*" in loopback.allowed_hosts and "http://[::1]:*" in loopback.allowed_origins


def test_a_server_error_reaches_clients_without_its_sql() -> None:
    from actrone_pg.errors import SchemaError, StoreError
    from actrone_pg.integrations.mcp import public_message

    # What a schema fault said before (issue 38).
    psycopg_text = (
        'relation "mcp1.memories" does not exist\n'
        'LINE 1: DELETE FROM "mcp1".memories WHERE agent_id = $1 AND id = ANY($2::text[])\n'
        "                    ^"
    )
    said = public_message(
        SchemaError(
            f"the schema 'mcp1' is missing a table ({psycopg_text}); run `actrone-pg migrate`"
        )
    )
    assert said == (
        "SchemaError: the schema 'mcp1' is missing a table (relation \"mcp1.memories\" does not"
        " exist); run `actrone-pg migrate`"
    )
    detail = public_message(
        StoreError(
            "PostgreSQL error: duplicate key\nDETAIL: Key (agent_id)=(a1) already exists.\n"
            'CONTEXT: SQL statement "INSERT INTO x.locks VALUES (1)"'
        )
    )
    assert detail == "StoreError: PostgreSQL error: duplicate key"


@pytest.mark.postgres
async def test_a_schema_fault_reaches_clients_without_sql(
    postgres_dsn: str, scratch_schema: str
) -> None:
    import psycopg
    from psycopg import sql

    config = MemoryConfig(
        backend="postgres",
        embedding_provider="hashing",
        postgres_dsn=postgres_dsn,
        postgres_schema=scratch_schema,
    )
    mm = await MemoryManager.create(config)
    try:
        async with Client(build_server(mm)) as client:
            ok = await client.call_tool("inject_memory", {"agent_id": "a1", "content": "x y"})
            assert not ok.is_error
            with psycopg.connect(postgres_dsn, autocommit=True) as conn:
                conn.execute(
                    sql.SQL("DROP TABLE {} CASCADE").format(
                        sql.Identifier(scratch_schema, "memory_history")
                    )
                )
            mid = ok.structured_content["id"]
            result = await client.call_tool("delete_memory", {"agent_id": "a1", "memory_id": mid})
            said = text(result)
    finally:
        await mm.close()
    assert result.is_error and "SchemaError: the schema" in said, said
    for sql_text in ("LINE", "DELETE", "SELECT", "^", "memory_history WHERE"):
        assert sql_text not in said, said
