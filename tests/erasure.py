"""What a store still holds of an agent, read from the storage itself (not through the API),
and the means of the erasure tests to hold a writer where the erase must overtake it.

After ``erase_agent`` every count of :func:`leftovers` must be 0, whatever was running.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from actrone_pg.embedders import HashingEmbedder
from actrone_pg.stores import Store


class GatedEmbedder:
    """A hashing embedder that, once armed, holds its next call until released."""

    name = "hashing-gated"
    dimensions = 64
    relevance_threshold = None

    def __init__(self) -> None:
        self._inner = HashingEmbedder(dimensions=64)
        self.armed = False
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def embed_batch(self, texts: list[str]) -> Any:
        if self.armed:
            self.armed = False
            self.entered.set()
            await self.release.wait()
        else:
            # Yield, as a model server would: the erase issued "at once" runs meanwhile.
            await asyncio.sleep(0)
        return await self._inner.embed_batch(texts)


class Gate:
    """Holds the ``at``-th call of one of a store's methods (before it runs) until released."""

    def __init__(self, store: Store, method: str, at: int = 1) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        original: Callable[..., Awaitable[Any]] = getattr(store, method)
        calls = 0

        async def held(*args: Any, **kwargs: Any) -> Any:
            nonlocal calls
            calls += 1
            if calls == at:
                self.entered.set()
                await self.release.wait()
            return await original(*args, **kwargs)

        setattr(store, method, held)


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
    from actrone_pg.stores.redis_qdrant.layout import INDEXED, AgentKeys, agent_filter
    from actrone_pg.stores.redis_qdrant.registry import own_collections

    servers = store.servers
    base = AgentKeys.of(servers.prefix, agent_id).base
    # Test agents' ids are letters, digits and dashes: safe in a SCAN pattern.
    keys = [k async for k in servers.redis().scan_iter(match=base + "*", count=1000)]
    # Any read of an agent records in Redis that its index is complete (index.ensure_indexed),
    # for an agent with nothing too: a statistics hash holding only that marker is no data.
    if AgentKeys.of(servers.prefix, agent_id).stats in keys:
        stats = await servers.redis().hgetall(AgentKeys.of(servers.prefix, agent_id).stats)
        if stats == {INDEXED: "1"}:
            keys.remove(AgentKeys.of(servers.prefix, agent_id).stats)
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
