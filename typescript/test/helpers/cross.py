"""Python's side of the TypeScript package's PostgreSQL tests: ``python cross.py COMMAND`` reads
one JSON object on stdin and prints its answer as JSON.

Every command works through the public API of ``actrone_pg`` (or its migrations), on the server
and schema it is given, with the hashing embedder and the relevance threshold it is given, so
that TypeScript and Python see one memory under the same settings.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from actrone_pg import MemoryConfig, MemoryManager  # noqa: E402


def _config(a: dict[str, Any]) -> MemoryConfig:
    return MemoryConfig(
        backend="postgres",
        postgres_dsn=a["dsn"],
        postgres_schema=a["schema"],
        embedding_provider="hashing",
        relevance_threshold=a.get("threshold"),
    )


def _date(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text.replace("Z", "+00:00"))


def _iso(d: datetime | None) -> str | None:
    return None if d is None else d.astimezone(UTC).isoformat()


def _memory(m: Any) -> dict[str, Any]:
    return {
        "id": m.id,
        "sessionId": m.session_id,
        "content": m.content,
        "contentType": m.content_type,
        "importance": m.importance,
        "tags": list(m.tags),
        "source": m.source,
        "sensitivity": m.sensitivity,
        "createdAt": _iso(m.created_at),
        "metadata": m.metadata,
        "embedder": m.embedder,
        "tokenCount": m.token_count,
        "expiresAt": _iso(m.expires_at),
        "version": m.version,
    }


def _explain(m: Any) -> dict[str, Any] | None:
    e = m.explain
    if e is None:
        return None
    return {
        "cosine": e.cosine,
        "denseRank": e.dense_rank,
        "lexicalRank": e.lexical_rank,
        "recencyRank": e.recency_rank,
        "fusedScore": e.fused_score,
    }


async def locomo(a: dict[str, Any]) -> dict[str, Any]:
    """A LoCoMo conversation's dialog turns as memories to inject, and its questions."""
    from actrone_pg.evaluation.loader import load_conversations

    (conv, *_) = load_conversations([a["file"]])
    items = [
        {
            "content": f"{t.speaker}: {t.text}",
            "sessionId": t.session,
            "createdAt": _iso(t.created_at),
            "metadata": {"dia_id": t.id},
        }
        for t in conv.turns
    ]
    return {"id": conv.id, "items": items, "questions": [q.text for q in conv.questions]}


async def write(a: dict[str, Any]) -> dict[str, Any]:
    """Inject ``items`` for ``agent`` (the ids are returned)."""
    async with await MemoryManager.create(_config(a)) as mm:
        ids = []
        if a["items"]:
            ids = await mm.inject_memories(
                a["agent"],
                [
                    {
                        "content": it["content"],
                        "session_id": it.get("sessionId"),
                        "created_at": _date(it.get("createdAt")),
                        "metadata": it.get("metadata"),
                        "tags": tuple(it.get("tags") or ()),
                        "importance": it.get("importance", 0.5),
                        "content_type": it.get("contentType", "injected"),
                        "expires_at": _date(it.get("expiresAt")),
                    }
                    for it in a["items"]
                ],
            )
        for turn in a.get("turns") or []:
            await mm.store_turn(
                a["agent"],
                turn["sessionId"],
                turn["user"],
                turn["assistant"],
                tool_results=turn.get("toolResults"),
            )
    return {"ids": ids}


async def read(a: dict[str, Any]) -> dict[str, Any]:
    """For every query: retrieve_context's memories and turns, and search_memories' hits."""
    out = []
    async with await MemoryManager.create(_config(a)) as mm:
        filters = a.get("filters")
        if filters:
            filters = {
                k: (_date(v) if k in ("created_after", "created_before") else v)
                for k, v in filters.items()
            }
        for query in a["queries"]:
            ctx = await mm.retrieve_context(
                a["agent"], a["session"], query, a["budget"], explain=True, filters=filters
            )
            hits = await mm.search_memories(
                a["agent"], query, a.get("limit", 10), explain=True, filters=filters
            )
            out.append(
                {
                    "context": [m.id for m in ctx.episodic_memories],
                    "contextScores": [_explain(m) for m in ctx.episodic_memories],
                    "turns": [t.id for t in ctx.recent_turns],
                    "episodicTokens": ctx.episodic_tokens,
                    "sessionTokens": ctx.session_tokens,
                    "search": [m.id for m in hits],
                    "searchScores": [_explain(m) for m in hits],
                }
            )
    return {"results": out}


async def lifecycle(a: dict[str, Any]) -> dict[str, Any]:
    """What Python sees of one memory and the agent: current version, history, listing."""
    async with await MemoryManager.create(_config(a)) as mm:
        agent = a["agent"]
        got = await mm.get_memory(agent, a["memoryId"])
        history = await mm.memory_history(agent, a["memoryId"])
        listed = []
        cursor = None
        while True:
            page = await mm.list_memories(agent, limit=a.get("pageSize", 3), cursor=cursor)
            listed.extend(m.id for m in page.items)
            cursor = page.next_cursor
            if cursor is None:
                break
        count = await mm.count_memories(agent) if hasattr(mm, "count_memories") else None
        turns = await mm.get_recent_turns(agent, a["session"]) if a.get("session") else []
    return {
        "memory": None if got is None else _memory(got),
        "history": [_memory(m) for m in history],
        "listed": listed,
        "count": count,
        "turns": [
            {
                "id": t.id,
                "user": t.user_message,
                "tokenCount": t.token_count,
                "tools": t.tool_results,
            }
            for t in turns
        ],
    }


async def update(a: dict[str, Any]) -> dict[str, Any]:
    """update_memory from Python."""
    async with await MemoryManager.create(_config(a)) as mm:
        m = await mm.update_memory(
            a["agent"], a["memoryId"], content=a.get("content"), tags=a.get("tags")
        )
    return {"memory": _memory(m)}


async def erase(a: dict[str, Any]) -> dict[str, Any]:
    async with await MemoryManager.create(_config(a)) as mm:
        await mm.erase_agent(a["agent"])
    return {}


async def migrate(a: dict[str, Any]) -> dict[str, Any]:
    """The Python migrations on ``schema`` (to ``revision``, default head)."""
    from actrone_pg import migrations

    await asyncio.to_thread(
        migrations.migrate, a["dsn"], a["schema"], revision=a.get("revision", "head")
    )
    return {"revision": migrations.current_revision(a["dsn"], a["schema"])}


async def catalogue(a: dict[str, Any]) -> dict[str, Any]:
    """``schema``'s catalogue, its own name replaced by ``{schema}``: tables and their
    columns, constraints, indexes, functions, views, triggers, and the recorded revision."""
    import psycopg

    schema = a["schema"]
    queries = {
        "columns": """SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod),
                        a.attnotnull, pg_get_expr(d.adbin, d.adrelid), co.collname,
                        a.attidentity, a.attgenerated
                      FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
                      JOIN pg_namespace n ON n.oid = c.relnamespace
                      LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
                      LEFT JOIN pg_collation co ON co.oid = a.attcollation AND a.attcollation <> 100
                      WHERE n.nspname = %(s)s AND a.attnum > 0 AND NOT a.attisdropped
                      ORDER BY 1, a.attnum""",
        "relations": """SELECT c.relname, c.relkind, c.relpersistence, c.relrowsecurity,
                          array_to_string(c.reloptions, ',')
                        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                        WHERE n.nspname = %(s)s ORDER BY 1""",
        "constraints": """SELECT c.relname, k.conname, pg_get_constraintdef(k.oid)
                          FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
                          JOIN pg_namespace n ON n.oid = c.relnamespace
                          WHERE n.nspname = %(s)s ORDER BY 1, 2""",
        "indexes": """SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %(s)s
                      ORDER BY 1""",
        "triggers": """SELECT c.relname, t.tgname, pg_get_triggerdef(t.oid)
                       FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
                       JOIN pg_namespace n ON n.oid = c.relnamespace
                       WHERE n.nspname = %(s)s AND NOT t.tgisinternal ORDER BY 1, 2""",
        "policies": """SELECT tablename, policyname, qual FROM pg_policies WHERE schemaname = %(s)s
                       ORDER BY 1, 2""",
    }
    out: dict[str, Any] = {}
    with psycopg.connect(a["dsn"], autocommit=True) as conn:
        for name, text in queries.items():
            rows = conn.execute(text, {"s": schema}).fetchall()
            out[name] = [[_normal(v, schema) for v in row] for row in rows]
        # Function bodies name the schema: compared with it replaced, not by their md5 alone.
        defs = conn.execute(
            """SELECT p.proname, pg_get_function_identity_arguments(p.oid),
                 pg_get_functiondef(p.oid)
               FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
               WHERE n.nspname = %(s)s ORDER BY 1, 2""",
            {"s": schema},
        ).fetchall()
        out["functions"] = [[_normal(v, schema) for v in row] for row in defs]
        views = conn.execute(
            "SELECT viewname, definition FROM pg_views WHERE schemaname = %(s)s ORDER BY 1",
            {"s": schema},
        ).fetchall()
        out["views"] = [[_normal(v, schema) for v in row] for row in views]
        out["revision"] = conn.execute(
            f'SELECT version_num FROM "{schema}".actrone_alembic_version'
        ).fetchall()
    return out


async def ann_names(a: dict[str, Any]) -> dict[str, Any]:
    """The names of agents' own HNSW indexes, by which the store decides its search's route."""
    from actrone_pg.stores.postgres.maintenance import ann_index_name

    return {"names": [ann_index_name(agent, embedder) for agent, embedder in a["pairs"]]}


async def item_ids(a: dict[str, Any]) -> dict[str, Any]:
    """The memory ids Python's LangGraph store gives items at (namespace, key)."""
    from actrone_pg.integrations.langgraph import item_id

    return {"ids": [item_id(tuple(ns), key) for ns, key in a["pairs"]]}


def _normal(value: Any, schema: str) -> Any:
    if isinstance(value, str):
        # relation oids differ between the two schemas (agent_write's prepared names use one)
        return re.sub(rf"\b{re.escape(schema)}\b", "{schema}", value)
    return value


COMMANDS = {
    "locomo": locomo,
    "write": write,
    "read": read,
    "lifecycle": lifecycle,
    "update": update,
    "erase": erase,
    "migrate": migrate,
    "catalogue": catalogue,
    "ann_names": ann_names,
    "item_ids": item_ids,
}


def main() -> None:
    args = json.loads(sys.stdin.read() or "{}")
    result = asyncio.run(COMMANDS[sys.argv[1]](args))
    sys.stdout.write(json.dumps(result, default=str))


if __name__ == "__main__":
    main()
