"""A Model Context Protocol server over a :class:`~actrone_pg.MemoryManager` (``[mcp]`` extra).

``actrone-pg mcp`` runs it (stdio for a local client, streamable HTTP for a shared one);
:func:`build_server` gives the :class:`mcp.server.MCPServer` to embed in your own process.

Tools: ``retrieve_context``, ``search_memories``, ``store_turn``, ``inject_memory``,
``update_memory``, ``list_memories``, ``delete_memory``, ``get_memory``, ``get_recent_turns``.
Every tool takes the ``agent_id`` it acts for; a server built with ``agents=`` refuses any other
agent. A library error (bad input, a store that is down) comes back as a tool error result
carrying its type and message, never as a crash of the server. Over HTTP every request needs
``Authorization: Bearer <token>`` (:func:`streamable_http_app`).
"""

# No ``from __future__ import annotations``: the tools' parameter annotations are evaluated when
# build_server() defines them, so that their descriptions can name the agents it serves.

import hmac
import ipaddress
import logging
import math
import re
from collections.abc import Awaitable, Callable, Collection, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from actrone_pg.errors import (
    ActroneError,
    ConfigurationError,
    MissingDependencyError,
    StoreError,
    StoreUnavailableError,
)
from actrone_pg.filters import FILTERS
from actrone_pg.manager import MemoryManager
from actrone_pg.models import memory_to_dict, turn_to_dict

try:
    from mcp.server import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.server.transport_security import TransportSecuritySettings
    from mcp_types import ToolAnnotations
    from pydantic import BaseModel, ConfigDict, Field, create_model
    from starlette.types import ASGIApp, Receive, Scope, Send
except ImportError:  # pragma: no cover - exercised by installs without the extra
    raise MissingDependencyError("mcp", "mcp") from None

__all__ = [
    "ALLOWED_HOSTS_ENV",
    "ALLOWED_ORIGINS_ENV",
    "MAX_SESSIONS",
    "MIN_TOKEN_LENGTH",
    "SESSION_IDLE_SECONDS",
    "MemoryFilters",
    "build_server",
    "check_token",
    "serve_http",
    "serve_stdio",
    "streamable_http_app",
    "transport_security",
]

logger = logging.getLogger("actrone_pg.mcp")

T = TypeVar("T")

#: A bearer token shorter than this is refused: it would be guessable.
MIN_TOKEN_LENGTH = 16
#: Seconds an HTTP client's session may stay idle before the server closes it (the SDK's own
#: default is 30 minutes: 4,000 abandoned sessions held 135 MB that long).
SESSION_IDLE_SECONDS = 300.0
#: HTTP sessions open at once, at most; a new one beyond is refused until one closes.
MAX_SESSIONS = 1000
#: The environment variables of ``actrone-pg mcp``'s allowed Host and Origin headers.
ALLOWED_HOSTS_ENV = "ACTRONE_MCP_ALLOWED_HOSTS"
ALLOWED_ORIGINS_ENV = "ACTRONE_MCP_ALLOWED_ORIGINS"

_INSTRUCTIONS = (
    "Long-term memory and recent conversation for agents. Before answering, call "
    "retrieve_context with the user's message to get the session's recent turns and the "
    "relevant memories within a token budget; after answering, call store_turn with the "
    "exchange. Use inject_memory to remember a durable fact, search_memories to look one up."
)

_READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
_WRITE = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
_DELETE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)


# The tools' filters: one optional field per filter key, as actrone_pg.filters defines them.
if TYPE_CHECKING:
    MemoryFilters = BaseModel
else:
    MemoryFilters = create_model(
        "MemoryFilters",
        __config__=ConfigDict(extra="forbid"),
        __doc__="Which memories a listing or a search considers (spec §9.3); every condition"
        " must hold.",
        __module__=__name__,
        **{
            key.name: (key.annotation | None, Field(None, description=key.description))
            for key in FILTERS.values()
        },
    )


def _filters(filters: MemoryFilters | None) -> dict[str, Any] | None:
    # The conditions given, as the manager takes them (datetimes stay datetimes).
    return None if filters is None else filters.model_dump(exclude_none=True) or None


def build_server(
    manager: MemoryManager,
    *,
    agents: Collection[str] | None = None,
    name: str = "actrone-pg",
) -> MCPServer:
    """An MCP server whose tools call ``manager``.

    With ``agents`` the server acts only for those agent ids: a call naming another agent is a
    tool error and touches nothing. ``None`` serves every agent (for a local stdio server).
    """
    served = None if agents is None else frozenset(agents)
    if served is not None and not served:
        raise ConfigurationError("agents", "name at least one agent, or None for every agent")
    server: MCPServer = MCPServer(name, instructions=_INSTRUCTIONS, log_level="WARNING")

    session_share = round(manager.config.budget_fraction_session * 100)
    memory_share = round(manager.config.budget_fraction_episodic * 100)
    budget_help = (
        f"Tokens the agent can spend on its context: {session_share}% go to recent turns, "
        f"{memory_share}% to memories, the rest is left for the system prompt and the reply."
    )
    agent_help = "Id of the agent whose memory to use."
    if served is not None:
        agent_help += " This server serves: " + ", ".join(sorted(served)) + "."
    AgentId = Annotated[str, Field(description=agent_help)]
    SessionId = Annotated[
        str, Field(description="Id of the conversation (session) whose recent turns to use.")
    ]
    MemoryId = Annotated[str, Field(description="Id of a memory, as returned by inject_memory.")]
    Explain = Annotated[
        bool,
        Field(description="Add each memory's ranking details (cosine, ranks, fused score)."),
    ]
    Filters = Annotated[
        MemoryFilters | None,
        Field(description="Only memories matching all of these conditions; omit for all."),
    ]

    async def call(agent_id: str, work: Callable[[], Awaitable[T]]) -> T:
        if served is not None and agent_id not in served:
            raise ToolError(f"this server does not serve agent {agent_id!r}")
        try:
            return await work()
        except ActroneError as exc:
            # What the model can correct (a bad argument) or report (a store that is down).
            raise ToolError(public_message(exc)) from None
        except Exception as exc:  # not reached: public methods raise ActroneError only
            logger.exception("a tool call failed unexpectedly")
            raise ToolError(
                f"{type(exc).__name__}: the call failed (see the server's log)"
            ) from None

    async def retrieve_context(
        agent_id: AgentId,
        session_id: SessionId,
        query: Annotated[
            str, Field(description="What the agent is about to answer: usually the user's message.")
        ],
        token_budget: Annotated[int, Field(description=budget_help)],
        explain: Explain = False,
        filters: Filters = None,
    ) -> dict[str, Any]:
        """Recent turns of the session (oldest first) and the long-term memories most relevant to
        the query (best first), each inside its share of the token budget."""

        async def work() -> dict[str, Any]:
            ctx = await manager.retrieve_context(
                agent_id,
                session_id,
                query,
                token_budget,
                explain=explain,
                filters=_filters(filters),
            )
            return ctx.to_dict()

        return await call(agent_id, work)

    async def search_memories(
        agent_id: AgentId,
        query: Annotated[str, Field(description="What to look for, in natural language.")],
        limit: Annotated[int, Field(description="Most memories to return.")] = 10,
        explain: Explain = False,
        filters: Filters = None,
    ) -> dict[str, Any]:
        """The agent's long-term memories most relevant to the query, best first, without a
        token budget. Returns {"memories": [...]}; an empty list when nothing is relevant."""

        async def work() -> dict[str, Any]:
            hits = await manager.search_memories(
                agent_id, query, limit, explain=explain, filters=_filters(filters)
            )
            return {"memories": [memory_to_dict(m) for m in hits]}

        return await call(agent_id, work)

    async def store_turn(
        agent_id: AgentId,
        session_id: SessionId,
        user_message: Annotated[str, Field(description="What the user said.")],
        assistant_message: Annotated[str, Field(description="What the assistant answered.")],
        tool_results: Annotated[
            list[Any] | None,
            Field(description="Results of tools called during the turn (JSON values)."),
        ] = None,
        turn_id: Annotated[
            str | None,
            Field(description="Your id for the turn; retrying with the same id stores it once."),
        ] = None,
    ) -> dict[str, Any]:
        """Append one exchange (user message and assistant answer) to the session's recent
        turns. Returns the stored turn with its id and token count."""

        async def work() -> dict[str, Any]:
            turn = await manager.store_turn(
                agent_id,
                session_id,
                user_message,
                assistant_message,
                tool_results=tool_results,
                turn_id=turn_id,
            )
            return turn_to_dict(turn)

        return await call(agent_id, work)

    async def inject_memory(
        agent_id: AgentId,
        content: Annotated[
            str, Field(description="The fact to remember, as a self-contained sentence.")
        ],
        session_id: Annotated[
            str | None, Field(description="The session it came from, if any.")
        ] = None,
        content_type: Annotated[
            str, Field(description="A label such as fact, preference, event.")
        ] = "injected",
        importance: Annotated[float, Field(description="From 0 (trivia) to 1 (critical).")] = 0.5,
        tags: Annotated[
            list[str] | None, Field(description="Short labels to file it under.")
        ] = None,
        metadata: Annotated[
            dict[str, Any] | None, Field(description="Any JSON object to keep with it.")
        ] = None,
        memory_id: Annotated[
            str | None,
            Field(description="Replace the memory with this id instead of adding a new one."),
        ] = None,
    ) -> dict[str, Any]:
        """Store a long-term memory for the agent. The same content injected twice is stored
        once. Returns {"id": ...}, the id to get or delete it by."""

        async def work() -> dict[str, Any]:
            mid = await manager.inject_memory(
                agent_id,
                content,
                session_id=session_id,
                content_type=content_type,
                importance=importance,
                tags=tags or (),
                source="mcp",
                metadata=metadata,
                memory_id=memory_id,
            )
            return {"id": mid}

        return await call(agent_id, work)

    async def update_memory(
        agent_id: AgentId,
        memory_id: MemoryId,
        content: Annotated[
            str | None, Field(description="The memory's new text; omit to keep the text.")
        ] = None,
        tags: Annotated[
            list[str] | None, Field(description="New tags, replacing the old; omit to keep them.")
        ] = None,
        importance: Annotated[
            float | None, Field(description="New importance, 0 to 1; omit to keep it.")
        ] = None,
        metadata: Annotated[
            dict[str, Any] | None,
            Field(description="A new metadata object, replacing the old; omit to keep it."),
        ] = None,
        content_type: Annotated[
            str | None, Field(description="A new label (fact, preference, ...); omit to keep it.")
        ] = None,
        expires_at: Annotated[
            datetime | None,
            Field(
                description="When to forget the memory: a future ISO 8601 time with a time zone "
                "(2030-01-31T12:00:00Z); omit to keep the current expiry."
            ),
        ] = None,
        clear_expiry: Annotated[
            bool,
            Field(
                description="True to remove the memory's expiry (it is then kept until "
                "deleted); not together with expires_at."
            ),
        ] = False,
    ) -> dict[str, Any]:
        """Correct or change one of the agent's memories. Writes a new version under the same id
        and keeps the old one in the memory's history; fields not given keep their values.
        Returns {"memory": {...}}, the new version; an error if the agent has no such memory."""

        async def work() -> dict[str, Any]:
            m = await manager.update_memory(
                agent_id,
                memory_id,
                content=content,
                tags=tags,
                importance=importance,
                metadata=metadata,
                content_type=content_type,
                expires_at=expires_at,
                clear_expiry=clear_expiry,
            )
            return {"memory": memory_to_dict(m)}

        return await call(agent_id, work)

    async def list_memories(
        agent_id: AgentId,
        filters: Filters = None,
        limit: Annotated[int, Field(description="Most memories in one page.")] = 100,
        cursor: Annotated[
            str | None,
            Field(description="The next_cursor of the previous page; omit for the first page."),
        ] = None,
    ) -> dict[str, Any]:
        """Page through the agent's current memories, newest first, without a query. Returns
        {"memories": [...], "next_cursor": ...}: pass next_cursor back for the next page; it is
        null after the last one."""

        async def work() -> dict[str, Any]:
            page = await manager.list_memories(
                agent_id, filters=_filters(filters), limit=limit, cursor=cursor
            )
            return {
                "memories": [memory_to_dict(m) for m in page.items],
                "next_cursor": page.next_cursor,
            }

        return await call(agent_id, work)

    async def delete_memory(agent_id: AgentId, memory_id: MemoryId) -> dict[str, Any]:
        """Delete one of the agent's long-term memories. Returns {"deleted": true} if it
        existed, {"deleted": false} if the agent had no such memory."""

        async def work() -> dict[str, Any]:
            return {"deleted": await manager.delete_memory(agent_id, memory_id)}

        return await call(agent_id, work)

    async def get_memory(agent_id: AgentId, memory_id: MemoryId) -> dict[str, Any]:
        """One of the agent's long-term memories by id. Returns {"memory": {...}}, or
        {"memory": null} if the agent has no such memory."""

        async def work() -> dict[str, Any]:
            m = await manager.get_memory(agent_id, memory_id)
            return {"memory": None if m is None else memory_to_dict(m)}

        return await call(agent_id, work)

    async def get_recent_turns(
        agent_id: AgentId,
        session_id: SessionId,
        limit: Annotated[
            int | None, Field(description="Most turns to return (default: the session cap).")
        ] = None,
    ) -> dict[str, Any]:
        """The session's most recent turns, oldest first, without a token budget. Returns
        {"turns": [...]}; an empty list for a new or expired session."""

        async def work() -> dict[str, Any]:
            turns = await manager.get_recent_turns(agent_id, session_id, limit)
            return {"turns": [turn_to_dict(t) for t in turns]}

        return await call(agent_id, work)

    server.add_tool(retrieve_context, annotations=_READ)
    server.add_tool(search_memories, annotations=_READ)
    server.add_tool(store_turn, annotations=_WRITE)
    server.add_tool(inject_memory, annotations=_WRITE)
    server.add_tool(update_memory, annotations=_WRITE)
    server.add_tool(list_memories, annotations=_READ)
    server.add_tool(delete_memory, annotations=_DELETE)
    server.add_tool(get_memory, annotations=_READ)
    server.add_tool(get_recent_turns, annotations=_READ)
    return server


# Where a server lives, as drivers and this library write it into error messages: libpq's
# 'connection to server on socket "/run/.s.PGSQL.5432"' and 'at "db.internal" (10.0.0.5),
# port 5432', URLs (redis://host:6379, http://qdrant:6333), key=value connection strings,
# addresses with ports, and absolute paths.
_LOCATIONS = [
    (re.compile(r'\s*on socket "[^"]*"'), ""),
    (re.compile(r'\s*at "[^"]*"(?: \([^)]*\))?(?:, port \d+)?'), ""),
    (re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"]+"), "<server>"),
    (re.compile(r"\b(host|hostaddr|port|dbname|user|password|sslrootcert)=\S+"), r"\1=…"),
    (re.compile(r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?(?![\w.])"), "<address>"),
    (re.compile(r"\[[0-9A-Fa-f:]+\](?::\d+)?"), "<address>"),
    (re.compile(r"(?<![\w.:/<])/(?:[^\s\"',;:()]+/)*[^\s\"',;:()]*"), "<path>"),
]


# What a server's error adds after its first line: the statement it ran (PostgreSQL's "LINE 1:
# DELETE FROM ..." and the caret under it) and its DETAIL, HINT, CONTEXT, QUERY or WHERE lines.
_SERVER_TEXT = re.compile(
    r"\n(?:LINE \d+:[^\n]*|[ \t]*\^[ \t]*|(?:DETAIL|HINT|CONTEXT|QUERY|STATEMENT|WHERE):[^\n]*)"
)


def public_message(exc: ActroneError) -> str:
    """What a client of the server reads about ``exc``: its type and what failed, without the
    SQL the database ran nor where it lives (no socket path, host, address, port or URL).

    The full message goes to this process's log (``actrone_pg.mcp``) for its operator.
    """
    if not isinstance(exc, StoreError):
        return f"{type(exc).__name__}: {_SERVER_TEXT.sub('', str(exc))}"
    logger.warning("a tool call failed: %s: %s", type(exc).__name__, exc)
    if isinstance(exc, StoreUnavailableError):
        return (
            f"{type(exc).__name__}: the memory store's server cannot be reached or did not "
            "answer in time; try again later (the MCP server's log has the details)"
        )
    text = " ".join(_SERVER_TEXT.sub("", str(exc)).split())
    for pattern, replacement in _LOCATIONS:
        text = pattern.sub(replacement, text)
    return f"{type(exc).__name__}: {text}"


class _BearerToken:
    """ASGI middleware: an HTTP request without ``Authorization: Bearer <token>`` gets a 401."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
            # The scheme is case-insensitive (RFC 9110 §11.1): "bearer <token>" is as good.
            scheme, _, credentials = given.strip().partition(b" ")
            # Compared whatever the scheme, so the time taken says nothing about the token.
            matches = hmac.compare_digest(credentials.strip(), self.expected)
            if not (matches and scheme.lower() == b"bearer"):
                body = b'{"error": "missing or wrong bearer token"}'
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b'Bearer realm="actrone-pg"'),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def check_token(token: str | None) -> str:
    """The bearer token, or a :class:`ConfigurationError` if it is missing or too short."""
    if not token:
        raise ConfigurationError(
            "token", "serving over HTTP needs a bearer token (--token or ACTRONE_MCP_TOKEN)"
        )
    if len(token) < MIN_TOKEN_LENGTH or token != token.strip():
        raise ConfigurationError(
            "token",
            f"use at least {MIN_TOKEN_LENGTH} characters without surrounding spaces "
            '(python -c "import secrets; print(secrets.token_urlsafe(32))")',
        )
    return token


def transport_security(
    host: str, allowed_hosts: Sequence[str] = (), allowed_origins: Sequence[str] = ()
) -> TransportSecuritySettings:
    """The SDK's DNS rebinding protection for a server bound to ``host``: the ``Host`` and
    ``Origin`` headers a request may carry (``name:*`` allows any port).

    On a loopback address, the given values or else the loopback names themselves. On any other
    address both lists are required (a :class:`ConfigurationError` otherwise): a browser page
    on another site could reach the server through a name that resolves to it.
    """
    hosts, origins = list(allowed_hosts), list(allowed_origins)
    if not _is_loopback(host):
        if not hosts or not origins:
            raise ConfigurationError(
                "allowed_hosts",
                f"a server bound to {host!r} (not a loopback address) must name the Host and "
                "Origin headers it accepts: --allowed-host and --allowed-origin, or "
                f"{ALLOWED_HOSTS_ENV} and {ALLOWED_ORIGINS_ENV} (comma-separated)",
            )
    else:
        names = sorted({"127.0.0.1", "localhost", "[::1]", _bracketed(host)})
        hosts = hosts or [f"{name}:*" for name in names]
        origins = origins or [f"http://{name}:*" for name in names]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _bracketed(host: str) -> str:
    """``host`` as a Host header writes it (an IPv6 address in brackets)."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def streamable_http_app(
    manager: MemoryManager,
    *,
    token: str,
    agents: Collection[str],
    path: str = "/mcp",
    host: str = "127.0.0.1",
    allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
    session_idle_seconds: float = SESSION_IDLE_SECONDS,
    max_sessions: int = MAX_SESSIONS,
) -> ASGIApp:
    """The streamable HTTP app: only the given ``agents``, only with the bearer ``token``, only
    for the ``Host`` and ``Origin`` headers allowed (:func:`transport_security`).

    A client's session that stays idle ``session_idle_seconds`` is closed, and at most
    ``max_sessions`` are open at once (a new one is then refused): abandoned sessions hold
    memory until then.
    """
    if not agents:
        raise ConfigurationError("agents", "an HTTP server must name the agents it serves")
    if not (math.isfinite(session_idle_seconds) and session_idle_seconds > 0):
        raise ConfigurationError("session_idle_seconds", "must be a number of seconds above 0")
    if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1:
        raise ConfigurationError("max_sessions", "must be a whole number of 1 or more")
    security = transport_security(host, allowed_hosts, allowed_origins)
    server = build_server(manager, agents=agents)
    app = server.streamable_http_app(
        streamable_http_path=path,
        host=host,
        transport_security=security,
        session_idle_timeout=session_idle_seconds,
        max_sessions=max_sessions,
    )
    return _BearerToken(app, check_token(token))


async def serve_stdio(manager: MemoryManager, *, agents: Collection[str] | None = None) -> None:
    """Serve MCP over stdin/stdout until the client closes the connection."""
    await build_server(manager, agents=agents).run_stdio_async()


async def serve_http(
    manager: MemoryManager,
    *,
    token: str,
    agents: Collection[str],
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
    allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
    session_idle_seconds: float = SESSION_IDLE_SECONDS,
    max_sessions: int = MAX_SESSIONS,
) -> None:
    """Serve MCP over streamable HTTP on ``host:port`` until interrupted
    (:func:`streamable_http_app`)."""
    import uvicorn

    app = streamable_http_app(
        manager,
        token=token,
        agents=agents,
        path=path,
        host=host,
        allowed_hosts=allowed_hosts,
        allowed_origins=allowed_origins,
        session_idle_seconds=session_idle_seconds,
        max_sessions=max_sessions,
    )
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    logger.info("serving MCP on http://%s:%d%s for %d agent(s)", host, port, path, len(agents))
    await uvicorn.Server(config).serve()
