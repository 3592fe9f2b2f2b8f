"""``actrone-pg inspect``: show the inspection views (sessions, L1 recent turns, L2 memories)."""

from __future__ import annotations

import argparse
import math
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from actrone_pg._cli._output import console, key_column, short_time, table, text_column
from actrone_pg._cli._pg import add_connection_arguments, connection_errors, resolve
from actrone_pg.errors import ValidationError

if TYPE_CHECKING:
    from rich.table import Table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``actrone-pg inspect``."""
    add_connection_arguments(parser)
    parser.add_argument("--agent", help="only this agent (default: every agent)")
    parser.add_argument("--session", help="only this session (turns)")
    parser.add_argument("--limit", type=int, default=20, help="rows per table (default 20)")


#: Columns that hold ids: whole, on one line.
KEYS = ("agent_id", "session_id", "id")
#: Columns of free text. A view with any is drawn as two columns, so that the text keeps most of
#: 80 columns: the row's ids (whole) and other fields, packed into short lines, then its text.
TEXTS = ("user_message", "assistant_message", "content")
#: The width of a packed line of fields.
FIELDS_WIDTH = 30


def _fmt(value: Any) -> str:
    if isinstance(value, datetime):
        return short_time(value.astimezone(UTC))
    if isinstance(value, timedelta):
        return str(value - timedelta(microseconds=value.microseconds))  # whole seconds
    text = str(value) if value is not None else ""
    text = " ".join(text.split())
    return text if len(text) <= 200 else text[:199] + "…"


def run(args: argparse.Namespace) -> int:
    """Print the three views as tables."""
    import psycopg
    from psycopg import sql

    from actrone_pg.migrations import fetch_revision

    target = resolve(args)  # a mistyped --data-dir is an error, not a new server
    dsn, schema = target.dsn, target.schema
    out = console(highlight=False)
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
            out.print(f"schema {schema!r} has no actrone tables; run `actrone-pg migrate`")
            return 1
        results: list[tuple[str, list[str], list[tuple[Any, ...]]]] = []
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
            results.append((f"{title} ({schema}.{view})", names, cur.fetchall()))
    if args.agent and not any(rows for _, _, rows in results):
        raise ValidationError(
            f"unknown agent {args.agent!r}: schema {schema!r} holds no session, turn or memory "
            "of it; `actrone-pg inspect` without --agent lists the agents"
        )
    if args.session and not any(rows for _, _, rows in results[:2]):
        raise ValidationError(
            f"no live session {args.session!r}"
            + (f" of agent {args.agent!r}" if args.agent else "")
            + f" in schema {schema!r}; `actrone-pg inspect` lists the sessions"
        )
    for title, names, rows in results:
        out.print(_draw(title, names, rows))
    return 0


def _draw(title: str, names: list[str], rows: list[tuple[Any, ...]]) -> Table:
    texts = [n for n in names if n in TEXTS]
    t = table(title, leading=1 if texts else 0)
    if not texts:
        for name in names:
            key_column(t, name)
        for row in rows:
            t.add_row(*(_fmt(v) for v in row))
        return t
    keys = [n for n in names if n in KEYS]
    key_column(t, " / ".join(keys))
    text_column(t, texts[0] if len(texts) == 1 else " / ".join(n.split("_")[0] for n in texts))
    for row in rows:
        value = dict(zip(names, row, strict=True))
        fields = [f"{n} {_fmt(value[n])}" for n in names if n not in KEYS and n not in TEXTS]
        head = " / ".join(_fmt(value[n]) for n in keys)
        text = "\n".join(
            (f"{n.split('_')[0]}: " if len(texts) > 1 else "") + _fmt(value[n]) for n in texts
        )
        t.add_row("\n".join([head, *_pack(fields)]), text)
    return t


def _pack(fields: list[str]) -> list[str]:
    """``fields`` joined by `` · `` into lines of about ``FIELDS_WIDTH`` characters."""
    lines: list[str] = []
    for field in fields:
        if lines and len(lines[-1]) + 3 + len(field) <= FIELDS_WIDTH:
            lines[-1] += " · " + field
        else:
            lines.append(field)
    return lines
