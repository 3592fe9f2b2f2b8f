"""What a store still holds of an agent, read from the storage itself (not through the API).

Used by the erasure tests: after ``erase_agent`` every count must be 0, whatever was running.
"""

from __future__ import annotations

from typing import Any

from actrone_pg.stores import Store


async def leftovers(store: Store, agent_id: str) -> dict[str, int]:
    """Rows, keys or entries of ``agent_id`` per place the store keeps them (0 when erased)."""
    if store.backend == "postgres":
        return await _postgres(store, agent_id)
    if store.backend == "redis_qdrant":
        return await _redis_qdrant(store, agent_id)
    return _memory(store, agent_id)


async def _postgres(store: Any, agent_id: str) -> dict[str, int]:
    from psycopg import sql

    out: dict[str, int] = {}
    tables = "sessions turns memories memory_history term_stats agent_stats locks".split()
    async with store.db.conn() as conn:
        for table in tables:
            cur = await conn.execute(
                sql.SQL("SELECT count(*) FROM {} WHERE agent_id = %s").format(
                    sql.Identifier(store.schema, table)
                ),
                (agent_id,),
            )
            row = await cur.fetchone()
            out[table] = int(row[0]) if row else 0
    return out


async def _redis_qdrant(store: Any, agent_id: str) -> dict[str, int]:
    from actrone_pg.stores.redis_qdrant.layout import AgentKeys, agent_filter
    from actrone_pg.stores.redis_qdrant.registry import own_collections

    servers = store.servers
    base = AgentKeys.of(servers.prefix, agent_id).base
    # Test agents' ids are letters, digits and dashes: safe in a SCAN pattern.
    keys = [k async for k in servers.redis().scan_iter(match=base + "*", count=1000)]
    points = 0
    for coll, _ in await own_collections(servers):
        found = await servers.qdrant().count(coll, count_filter=agent_filter(agent_id), exact=True)
        points += found.count
    return {"redis_keys": len(keys), "qdrant_points": points}


def _memory(store: Any, agent_id: str) -> dict[str, int]:
    agent = store._agents.get(agent_id)
    return {
        "memories": len(agent.entries) if agent else 0,
        "sessions": sum(1 for k in store._sessions if k[0] == agent_id),
        "locks": sum(1 for k in store._locks if k[0] == agent_id),
    }
