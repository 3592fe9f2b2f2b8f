"""What writes and searches of the PostgreSQL store look up: lexemes, dimensions, the fence.

Text search normalisation (a configuration other than ``simple`` turns tokens into lexemes) and
the embedder registry (each embedder's dimension, fixed by its first write) are here: both
writes and search need them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from actrone_pg.models import Memory
from actrone_pg.ranking import tokenize
from actrone_pg.stores.base import Fence, dimension_mismatch, lock_lost
from actrone_pg.stores.postgres import rows
from actrone_pg.stores.postgres.connection import LEXEME_CACHE_SIZE, Database, _Conn
from actrone_pg.stores.postgres.statements import HOLDS_LOCK, NORMALISE, SELECT_EMBEDDERS

__all__ = [
    "check_fence",
    "check_known_dimensions",
    "embedder_dimensions",
    "normalise",
    "query_terms",
    "term_counts",
]


async def check_fence(db: Database, conn: _Conn, agent_id: str, fence: Fence | None) -> None:
    """In the caller's transaction: refuse the write unless ``fence``'s lock is held (and
    keep its row share-locked to the commit). The caller holds the agent's statistics row
    first, as erase_agent does, so an erase and a fenced write never interleave."""
    if fence is not None:
        cur = await conn.execute(db.compose(HOLDS_LOCK), (agent_id, fence.name, fence.holder))
        if await cur.fetchone() is None:
            raise lock_lost(agent_id, fence)


async def term_counts(db: Database, conn: _Conn, memory: Memory) -> tuple[Counter[str], int]:
    """The BM25 terms of ``memory`` and its length, as the schema indexes them."""
    if db.ts_config == "simple":
        return db.analyzer.document_counts(memory.content, memory.created_at)
    lexemes = await normalise(db, conn, tokenize(memory.content))
    kept = [lx for lx in lexemes if lx is not None]
    return Counter(kept), len(kept)


async def normalise(db: Database, conn: _Conn, tokens: Sequence[str]) -> list[str | None]:
    """Each reference token's lexeme under the configured text search configuration."""
    known = db.lexemes
    distinct = set(tokens)
    missing = sorted(t for t in distinct if t not in known)
    for t in distinct.difference(missing):
        known.move_to_end(t)  # least recently used first
    if not missing:
        return [known[t] for t in tokens]
    found = rows.lexemes(await db.fetch(conn, NORMALISE, (db.ts_config, missing)))
    out = [found[t] if t in found else known[t] for t in tokens]
    known.update(found)
    while len(known) > LEXEME_CACHE_SIZE:  # the bound: the least recently used go first
        known.popitem(last=False)
    return out


async def query_terms(db: Database, query: str, terms: Sequence[str]) -> list[str]:
    """``terms`` (the analyzer's, from the manager), or the query's plain tokens mapped
    through a non-'simple' text search configuration."""
    if db.ts_config == "simple":
        return list(terms)
    async with db.conn() as conn:
        lexemes = await normalise(db, conn, list(dict.fromkeys(tokenize(query))))
    return list(dict.fromkeys(lx for lx in lexemes if lx is not None))


def check_known_dimensions(
    db: Database, dims: dict[str, int], registry: dict[str, int] | None = None
) -> None:
    """Refuse a dimension other than the one an embedder was registered with."""
    registry = db.dimensions if registry is None else registry
    for name, size in dims.items():
        known = registry.get(name)
        if known is not None and known != size:
            raise dimension_mismatch(name, known, size)


async def embedder_dimensions(db: Database, name: str) -> int | None:
    """The embedder\'s registered dimension (cached), or ``None`` if it stored nothing."""
    known = db.dimensions.get(name)
    if known is not None:
        return known
    async with db.conn() as conn:
        found = rows.dimensions(await db.fetch(conn, db.compose(SELECT_EMBEDDERS), ([name],)))
    if name not in found:
        return None
    db.dimensions[name] = found[name]
    return found[name]
