"""``actrone-pg mcp``: serve an agent's memory to MCP clients (needs the ``[mcp]`` extra).

Over stdio (the default) the client launches the command and talks over its stdin and stdout;
``--agent`` then limits the agents served, and without it every agent is. Over streamable HTTP
(``--transport http``) a bearer token (``ACTRONE_MCP_TOKEN`` or ``--token``) and at least one
``--agent`` are required, and a request for any other agent is refused. The store is the
configured one (``ACTRONE_*`` settings, or the options below).
"""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import Any

from actrone_pg.config import BACKENDS, EMBEDDING_PROVIDERS, MemoryConfig
from actrone_pg.errors import ConfigurationError

TOKEN_ENV = "ACTRONE_MCP_TOKEN"


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
    parser.add_argument("--backend", choices=BACKENDS, help="store (default: ACTRONE_BACKEND)")
    parser.add_argument("--dsn", help="PostgreSQL DSN (default: ACTRONE_POSTGRES_DSN)")
    parser.add_argument("--schema", help="PostgreSQL schema (default: ACTRONE_POSTGRES_SCHEMA)")
    parser.add_argument(
        "--embedder",
        choices=EMBEDDING_PROVIDERS,
        help="embedding provider (default: ACTRONE_EMBEDDING_PROVIDER or 'local')",
    )


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
    overrides: dict[str, Any] = {}
    if args.backend:
        overrides["backend"] = args.backend
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
                )
            else:
                await server.serve_stdio(manager, agents=args.agents)

    asyncio.run(serve())
    return 0
