"""``actrone-pg mcp``: serve an agent's memory to MCP clients (needs the ``[mcp]`` extra).

Over stdio (the default) the client launches the command and talks over its stdin and stdout;
``--agent`` then limits the agents served, and without it every agent is. Over streamable HTTP
(``--transport http``) a bearer token (``ACTRONE_MCP_TOKEN`` or ``--token``) and at least one
``--agent`` are required, and a request for any other agent is refused; bound to an address other
than loopback, the ``Host`` and ``Origin`` headers it accepts are required too (``--allowed-host``
and ``--allowed-origin``, or ``ACTRONE_MCP_ALLOWED_HOSTS`` and ``ACTRONE_MCP_ALLOWED_ORIGINS``).
The store is the configured one (``ACTRONE_*`` settings, or the options below).
"""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import Callable
from typing import Any, TypeVar

from actrone_pg._cli._store import default_backend
from actrone_pg.config import BACKENDS, EMBEDDING_PROVIDERS, MemoryConfig
from actrone_pg.errors import ConfigurationError

T = TypeVar("T", int, float)

TOKEN_ENV = "ACTRONE_MCP_TOKEN"
ALLOWED_HOSTS_ENV = "ACTRONE_MCP_ALLOWED_HOSTS"
ALLOWED_ORIGINS_ENV = "ACTRONE_MCP_ALLOWED_ORIGINS"
IDLE_ENV = "ACTRONE_MCP_SESSION_IDLE_SECONDS"
MAX_SESSIONS_ENV = "ACTRONE_MCP_MAX_SESSIONS"
# The integration's defaults (actrone_pg.integrations.mcp), named here without importing it:
# the option's help is built before the [mcp] extra is needed.
SESSION_IDLE_SECONDS = 300.0
MAX_SESSIONS = 1000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``actrone-pg mcp``."""
    parser.add_argument(
        "--transport",
        choices=("stdio", "http"),
        default="stdio",
        help="stdio (default) or streamable HTTP",
    )
    parser.add_argument(
        "--agent",
        action="append",
        dest="agents",
        metavar="AGENT_ID",
        help="serve this agent (repeat for several); required over HTTP",
    )
    parser.add_argument("--host", default="127.0.0.1", help="HTTP address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="HTTP port (default 8000)")
    parser.add_argument("--path", default="/mcp", help="HTTP endpoint path (default /mcp)")
    parser.add_argument(
        "--token",
        default=None,
        help=f"HTTP bearer token (default: {TOKEN_ENV}; prefer the variable, "
        "a flag is visible to other users in the process list)",
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        dest="allowed_hosts",
        metavar="HOST[:PORT]",
        help="a Host header the HTTP server accepts (repeatable; 'name:*' for any port; "
        f"default: {ALLOWED_HOSTS_ENV}, comma-separated); required off loopback",
    )
    parser.add_argument(
        "--allowed-origin",
        action="append",
        dest="allowed_origins",
        metavar="ORIGIN",
        help="an Origin header the HTTP server accepts, e.g. https://app.example.com "
        f"(repeatable; default: {ALLOWED_ORIGINS_ENV}, comma-separated); required off loopback",
    )
    parser.add_argument(
        "--session-idle-seconds",
        type=float,
        default=None,
        help="close an HTTP client's session idle this long (default: "
        f"{IDLE_ENV} or {SESSION_IDLE_SECONDS:g})",
    )
    parser.add_argument(
        "--max-sessions",
        type=int,
        default=None,
        help=f"HTTP sessions open at once, at most (default: {MAX_SESSIONS_ENV} or {MAX_SESSIONS})",
    )
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        help="store (default: ACTRONE_BACKEND, else the embedded PostgreSQL when installed)",
    )
    parser.add_argument("--dsn", help="PostgreSQL DSN (default: ACTRONE_POSTGRES_DSN)")
    parser.add_argument("--schema", help="PostgreSQL schema (default: ACTRONE_POSTGRES_SCHEMA)")
    parser.add_argument(
        "--embedder",
        choices=EMBEDDING_PROVIDERS,
        help="embedding provider (default: ACTRONE_EMBEDDING_PROVIDER or 'local')",
    )


def _listed(env: str) -> list[str]:
    """The comma-separated values of the environment variable ``env`` (none if unset)."""
    return [part.strip() for part in os.environ.get(env, "").split(",") if part.strip()]


def _number(given: T | None, env: str, default: T, kind: Callable[[str], T]) -> T:
    """An option's value, else its environment variable's, else ``default``."""
    if given is not None:
        return given
    raw = os.environ.get(env)
    if raw is None or not raw.strip():
        return default
    try:
        return kind(raw.strip())
    except ValueError:
        raise ConfigurationError(env, f"must be a number, got {raw!r}") from None


def run(args: argparse.Namespace) -> int:
    """Build the manager and serve until the client disconnects (stdio) or Ctrl-C (HTTP)."""
    from actrone_pg.integrations import mcp as server
    from actrone_pg.manager import create_memory_manager

    if args.transport == "http":
        token = server.check_token(args.token or os.environ.get(TOKEN_ENV))
        if not args.agents:
            raise ConfigurationError(
                "agent", "an HTTP server must name the agents it serves: --agent ID (repeatable)"
            )
        hosts = args.allowed_hosts or _listed(ALLOWED_HOSTS_ENV)
        origins = args.allowed_origins or _listed(ALLOWED_ORIGINS_ENV)
        # Checked before anything is built: off loopback, both lists are required.
        server.transport_security(args.host, hosts, origins)
        idle = _number(args.session_idle_seconds, IDLE_ENV, SESSION_IDLE_SECONDS, float)
        most = _number(args.max_sessions, MAX_SESSIONS_ENV, MAX_SESSIONS, int)
    # The one rule of every command (_store.default_backend): the embedded server by default.
    overrides: dict[str, Any] = {"backend": default_backend(args.backend, args.dsn)}
    if args.dsn:
        overrides["postgres_dsn"] = args.dsn
    if args.schema:
        overrides["postgres_schema"] = args.schema
    if args.embedder:
        overrides["embedding_provider"] = args.embedder
    config = MemoryConfig(**overrides)

    async def serve() -> None:
        async with create_memory_manager(config) as manager:
            if args.transport == "http":
                await server.serve_http(
                    manager,
                    token=token,
                    agents=args.agents,
                    host=args.host,
                    port=args.port,
                    path=args.path,
                    allowed_hosts=hosts,
                    allowed_origins=origins,
                    session_idle_seconds=idle,
                    max_sessions=most,
                )
            else:
                await server.serve_stdio(manager, agents=args.agents)

    asyncio.run(serve())
    return 0
