"""The bench's data loaded into a throw-away PostgreSQL schema, for the scripts that take one
``retrieve_context`` call apart (``benchmarks/pg_call_breakdown.py``, ``pg_client_cpu.py``,
``retrieve_ab.py``): the same seed and sizes give the memories ``actrone-pg bench`` measures."""

from __future__ import annotations

import argparse
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from psycopg import sql

from actrone_pg import MemoryConfig, MemoryManager
from actrone_pg.bench.workload import (
    SESSION_ID,
    Dataset,
    DatasetSpec,
    FixedVectorEmbedder,
    build_dataset,
    ingest,
)
from actrone_pg.stores.postgres import PostgresStore, maintenance


@asynccontextmanager
async def loaded_schema(
    dsn: str, prefix: str, spec: DatasetSpec, **config: Any
) -> AsyncIterator[tuple[MemoryManager, PostgresStore, Dataset]]:
    """A manager on a new schema ``<prefix>_<random>`` holding the bench's memories and each
    agent's session turns, its indexes built and its tables analysed (as ``--analyze`` leaves
    them); the schema is dropped on the way out. ``config``: more :class:`MemoryConfig`
    fields."""
    schema = f"{prefix}_{uuid.uuid4().hex[:8]}"
    dataset = build_dataset(spec)
    embedder = FixedVectorEmbedder(spec.dimensions)
    mm = await MemoryManager.create(
        MemoryConfig(
            backend="postgres",
            postgres_dsn=dsn,
            postgres_schema=schema,
            relevance_threshold=dataset.threshold,
            embedding_batch_size=1000,
            **config,
        ),
        embedder=embedder,
    )
    store = mm.store
    assert isinstance(store, PostgresStore)
    try:
        for agent in dataset.agents:
            embedder.add(agent.texts, agent.vectors)
            embedder.add(agent.query_texts, agent.query_vectors)
        await ingest(mm, dataset)
        for agent in dataset.agents:
            for j, (user, assistant) in enumerate(agent.turns):
                await mm.store_turn(
                    agent.agent_id, SESSION_ID, user, assistant, turn_id=f"{agent.agent_id}-t{j}"
                )
        await store.wait_for_indexes()
        await maintenance.analyze(store.db)
        yield mm, store, dataset
    finally:
        async with store.db.conn() as conn:
            await conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
        await mm.close()


def data_arguments(parser: argparse.ArgumentParser, *, repeat: int) -> None:
    """The arguments of a script that loads the bench's data with :func:`loaded_schema`:
    ``--dsn`` (else a temporary embedded server), ``--agents``, ``--per-agent``, ``--queries``
    and ``--repeat`` (passes over the queries; ``repeat`` its default). A count under 1 is a
    usage error, given before any server starts."""
    parser.add_argument("--dsn", help="PostgreSQL server to use instead of a temporary one")
    parser.add_argument("--agents", type=_count, default=5)
    parser.add_argument("--per-agent", type=_count, default=1000)
    parser.add_argument("--queries", type=_count, default=300)
    parser.add_argument("--repeat", type=_count, default=repeat)


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value
