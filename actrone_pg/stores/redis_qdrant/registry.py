"""The Redis + Qdrant store's embedders: each one's dimension, and its Qdrant collection."""

from __future__ import annotations

import hashlib
import re

from actrone_pg.errors import MissingDependencyError, StoreError
from actrone_pg.stores.base import dimension_mismatch
from actrone_pg.stores.redis_qdrant.connection import Connection

try:
    from qdrant_client import models as qm
except ImportError:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("qdrant", "qdrant-client") from None

__all__ = ["Registry"]

# Collection names are "<prefix>_<slug>_<8 hex>_<dimension>" with a slug free of underscores, so
# the store can recognise exactly its own collections in a shared Qdrant (another prefix that
# merely starts with ours, such as "<prefix>_x", never matches _OwnCollections).
_SLUG = re.compile(r"[^A-Za-z0-9-]+")


class Registry(Connection):
    """Embedder -> dimension (registered in Redis, never changed) -> collection (in Qdrant)."""

    def _collection(self, embedder: str, dim: int) -> str:
        slug = _SLUG.sub("-", embedder)[:48]
        digest = hashlib.blake2b(embedder.encode("utf-8"), digest_size=4).hexdigest()
        return f"{self._prefix}_{slug}_{digest}_{dim}"

    async def _registered_dim(self, embedder: str) -> int | None:
        """The embedder's dimension: in-process cache, else Redis, else Qdrant's collections.

        The last step re-registers a dimension Redis has lost, so that neither a search nor a
        write with another dimension can miss the vectors Qdrant still holds.
        """
        dim = self._dims.get(embedder)
        if dim is not None:
            return dim
        raw = await self._hget(self._dims_key, embedder)
        if raw is not None:
            dim = int(raw)
        else:
            stem = self._collection(embedder, 0)[:-1]  # "<prefix>_<slug>_<hash>_"
            found = [d for name, d in await self._own_collections() if name.startswith(stem)]
            if not found:
                return None
            dim = found[0]
            await self._redis_call(self._client_r().hsetnx(self._dims_key, embedder, dim))
        self._dims[embedder] = dim
        return dim

    async def _own_collections(self) -> list[tuple[str, int]]:
        """(name, dimension) of every collection of this store's prefix in Qdrant."""
        own = re.compile(
            rf"^{re.escape(self._prefix)}_[A-Za-z0-9-]{{0,48}}_[0-9a-f]{{8}}_([0-9]+)$"
        )
        response = await self._qdrant_call(self._client_q().get_collections())
        out = []
        for c in response.collections:
            m = own.match(c.name)
            if m:
                out.append((c.name, int(m.group(1))))
        return sorted(out)

    async def _register_dim(self, embedder: str, dim: int) -> None:
        r = self._client_r()
        await self._redis_call(r.hsetnx(self._dims_key, embedder, dim))
        raw = await self._hget(self._dims_key, embedder)
        have = int(raw) if raw is not None else dim
        if have != dim:  # another process registered a different dimension first
            raise dimension_mismatch(embedder, have, dim)
        self._dims[embedder] = dim

    async def _ensure_collection(self, embedder: str, dim: int) -> str:
        name = self._collection(embedder, dim)
        if name in self._collections:
            return name
        q = self._client_q()
        if not await self._qdrant_call(q.collection_exists(name)):
            try:
                # Dot product on unit vectors is the cosine; unlike Distance.COSINE it stores the
                # vectors unchanged (no re-normalisation), so the vectors read back are the exact
                # float32 values the reference store multiplies. m=0 + payload_m builds per-tenant
                # graphs only (Qdrant's multitenancy recipe); searches are exact anyway.
                await self._qdrant_call(
                    q.create_collection(
                        name,
                        vectors_config=qm.VectorParams(size=dim, distance=qm.Distance.DOT),
                        hnsw_config=qm.HnswConfigDiff(m=0, payload_m=16),
                    )
                )
            except (StoreError, ValueError):
                # Lost a creation race with another writer: fine if it exists now.
                if not await self._qdrant_call(q.collection_exists(name)):
                    raise
        if not self.is_local_qdrant:
            # Idempotent on the server; asked once per process and collection so that a
            # collection whose creator died before this step still gets its tenant index.
            # Local mode has no payload indexes (and warns if asked for one).
            await self._qdrant_call(
                q.create_payload_index(
                    name,
                    field_name="agent_id",
                    field_schema=qm.KeywordIndexParams(
                        type=qm.KeywordIndexType.KEYWORD, is_tenant=True
                    ),
                    wait=True,
                )
            )
        self._collections.add(name)
        return name

    async def _existing_collection(self, embedder: str, dim: int) -> str | None:
        name = self._collection(embedder, dim)
        if name in self._collections or name in self._known:
            return name
        if await self._qdrant_call(self._client_q().collection_exists(name)):
            self._known.add(name)  # exists; _ensure_collection still checks its tenant index
            return name
        return None
