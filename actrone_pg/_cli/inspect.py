"""``actrone-pg inspect``: show the inspection views (sessions, L1 recent turns, L2 memories)."""

from __future__ import annotations

import argparse
import math
from typing import Any

from actrone_pg._cli._pg import add_connection_arguments, connection_errors, resolve


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``actrone-pg inspect``."""
    add_connection_arguments(parser)
    parser.add_argument("--agent", help="only this agent (default: every agent)")
    parser.add_argument("--session", help="only this session (turns)")
    parser.add_argument("--limit", type=int, default=20, help="rows per table (default 20)")


def _fmt(value: Any) -> str:
    text = str(value) if value is not None else ""
    text = " ".join(text.split())
    return text if len(text) <= 80 else text[:77] + "..."


def run(args: argparse.Namespace) -> int:
    """Print the three views as tables."""
    import psycopg
    from psycopg import sql
    from rich.console import Console
    from rich.table import Table

    from actrone_pg.migrations import fetch_revision

    target = resolve(args)  # a mistyped --data-dir is an error, not a new server
    dsn, schema = target.dsn, target.schema
    console = Console()
    queries = [
        (
            "sessions",
            "session_overview",
            "agent_id, session_id, turn_count, tokens, last_active_at, idle",
            "last_active_at DESC",
        ),
        (
            "L1 · recent turns",
            "recent_turns",
            "agent_id, session_id, turns_ago, created_at, tokens, user_message, assistant_message",
            "created_at DESC",
        ),
        (
            "L2 · memories",
            "memory_overview",
            "agent_id, id, age, tokens, embedder, source, content_type, content",
            "created_at DESC",
        ),
    ]
    timeout = max(1, math.ceil(target.config.postgres_connect_timeout))
    with connection_errors(dsn):
        conn = psycopg.connect(dsn, autocommit=True, connect_timeout=timeout)
    with conn:
        if fetch_revision(conn, schema) is None:
            console.print(f"schema {schema!r} has no actrone tables; run `actrone-pg migrate`")
            return 1
        for title, view, columns, order in queries:
            conditions = [sql.SQL("TRUE")]
            params: list[Any] = []
            if args.agent:
                conditions.append(sql.SQL("agent_id = %s"))
                params.append(args.agent)
            if args.session and view != "memory_overview":
                conditions.append(sql.SQL("session_id = %s"))
                params.append(args.session)
            query = sql.SQL("SELECT {} FROM {} WHERE {} ORDER BY {} LIMIT %s").format(
                sql.SQL(columns),
                sql.Identifier(schema, view),
                sql.SQL(" AND ").join(conditions),
                sql.SQL(order),
            )
            cur = conn.execute(query, [*params, args.limit])
            names = [d.name for d in cur.description or []]
            table = Table(title=f"{title} ({schema}.{view})")
            for name in names:
                table.add_column(name)
            for row in cur.fetchall():
                table.add_row(*(_fmt(v) for v in row))
            console.print(table)
    return 0
