"""The Redis + Qdrant store's embedders: each one's dimension, and its Qdrant collection."""

from __future__ import annotations

import hashlib
import re

from actrone_pg.errors import MissingDependencyError, StoreError
from actrone_pg.stores.base import dimension_mismatch
from actrone_pg.stores.redis_qdrant.connection import Servers

try:
    from qdrant_client import models as qm
except ImportError:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("qdrant", "qdrant-client") from None

__all__ = [
    "collection",
    "ensure_collection",
    "existing_collection",
    "own_collections",
    "register_dim",
    "registered_dim",
]

# Collection names are "<prefix>_<slug>_<8 hex>_<dimension>" with a slug free of underscores, so
# the store can recognise exactly its own collections in a shared Qdrant (another prefix that
# merely starts with ours, such as "<prefix>_x", never matches own_collections).
_SLUG = re.compile(r"[^A-Za-z0-9-]+")


def collection(sv: Servers, embedder: str, dim: int) -> str:
    """The name of the collection of ``embedder``'s vectors of ``dim`` dimensions."""
    slug = _SLUG.sub("-", embedder)[:48]
    digest = hashlib.blake2b(embedder.encode("utf-8"), digest_size=4).hexdigest()
    return f"{sv.prefix}_{slug}_{digest}_{dim}"


async def registered_dim(sv: Servers, embedder: str) -> int | None:
    """The embedder's dimension: in-process cache, else Redis, else Qdrant's collections.

    The last step re-registers a dimension Redis has lost, so that neither a search nor a
    write with another dimension can miss the vectors Qdrant still holds.
    """
    dim = sv.dims.get(embedder)
    if dim is not None:
        return dim
    raw = await sv.hget(sv.dims_key, embedder)
    if raw is not None:
        dim = int(raw)
    else:
        stem = collection(sv, embedder, 0)[:-1]  # "<prefix>_<slug>_<hash>_"
        found = [d for name, d in await own_collections(sv) if name.startswith(stem)]
        if not found:
            return None
        dim = found[0]
        await sv.redis_call(sv.redis().hsetnx(sv.dims_key, embedder, dim))
    sv.dims[embedder] = dim
    return dim


async def own_collections(sv: Servers) -> list[tuple[str, int]]:
    """(name, dimension) of every collection of this store's prefix in Qdrant."""
    own = re.compile(rf"^{re.escape(sv.prefix)}_[A-Za-z0-9-]{{0,48}}_[0-9a-f]{{8}}_([0-9]+)$")
    response = await sv.qdrant_call(sv.qdrant().get_collections())
    out = []
    for c in response.collections:
        m = own.match(c.name)
        if m:
            out.append((c.name, int(m.group(1))))
    return sorted(out)


async def register_dim(sv: Servers, embedder: str, dim: int) -> None:
    """Register ``embedder``'s dimension (:class:`DimensionMismatchError` if another was first)."""
    r = sv.redis()
    await sv.redis_call(r.hsetnx(sv.dims_key, embedder, dim))
    raw = await sv.hget(sv.dims_key, embedder)
    have = int(raw) if raw is not None else dim
    if have != dim:  # another process registered a different dimension first
        raise dimension_mismatch(embedder, have, dim)
    sv.dims[embedder] = dim


async def ensure_collection(sv: Servers, embedder: str, dim: int) -> str:
    """The collection of ``embedder`` and ``dim``, created with its tenant index if need be."""
    name = collection(sv, embedder, dim)
    if name in sv.collections:
        return name
    q = sv.qdrant()
    if not await sv.qdrant_call(q.collection_exists(name)):
        try:
            # Dot product on unit vectors is the cosine; unlike Distance.COSINE it stores the
            # vectors unchanged (no re-normalisation), so the vectors read back are the exact
            # float32 values the reference store multiplies. m=0 + payload_m builds per-tenant
            # graphs only (Qdrant's multitenancy recipe); searches are exact anyway.
            await sv.qdrant_call(
                q.create_collection(
                    name,
                    vectors_config=qm.VectorParams(size=dim, distance=qm.Distance.DOT),
                    hnsw_config=qm.HnswConfigDiff(m=0, payload_m=16),
                )
            )
        except (StoreError, ValueError):
            # Lost a creation race with another writer: fine if it exists now.
            if not await sv.qdrant_call(q.collection_exists(name)):
                raise
    if not sv.is_local_qdrant:
        # Idempotent on the server; asked once per process and collection so that a
        # collection whose creator died before this step still gets its tenant index.
        # Local mode has no payload indexes (and warns if asked for one).
        await sv.qdrant_call(
            q.create_payload_index(
                name,
                field_name="agent_id",
                field_schema=qm.KeywordIndexParams(
                    type=qm.KeywordIndexType.KEYWORD, is_tenant=True
                ),
                wait=True,
            )
        )
    sv.collections.add(name)
    return name


async def existing_collection(sv: Servers, embedder: str, dim: int) -> str | None:
    """The collection of ``embedder`` and ``dim`` if it exists (reads never create one)."""
    name = collection(sv, embedder, dim)
    if name in sv.collections or name in sv.known:
        return name
    if await sv.qdrant_call(sv.qdrant().collection_exists(name)):
        sv.known.add(name)  # exists; ensure_collection still checks its tenant index
        return name
    return None
