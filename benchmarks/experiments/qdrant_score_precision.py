"""How far Qdrant's dot-product scores are from the reference store's float32 cosines.

Usage: ``python benchmarks/experiments/qdrant_score_precision.py`` (qdrant-client local mode; set
``ACTRONE_QDRANT_URL`` to measure a server). The Redis + Qdrant store recomputes a cosine only
where two candidates (or a candidate and the threshold) are closer than ``_TIE_SLACK`` (1e-5);
this prints the largest difference seen, which must stay well below that.
"""

from __future__ import annotations

import asyncio
import os
import uuid

import numpy as np
from qdrant_client import AsyncQdrantClient
from qdrant_client import models as qm

from actrone_pg.ranking import cosines as _cosines


async def main() -> None:
    url = os.environ.get("ACTRONE_QDRANT_URL")
    for dim, n in ((16, 10_000), (384, 10_000), (1536, 3_000)):
        client = (
            AsyncQdrantClient(url=url, check_compatibility=False)
            if url
            else AsyncQdrantClient(location=":memory:")
        )
        name = "precision_" + uuid.uuid4().hex[:8]
        await client.create_collection(
            name, vectors_config=qm.VectorParams(size=dim, distance=qm.Distance.DOT)
        )
        rng = np.random.default_rng(dim)
        m = rng.standard_normal((n, dim))
        m = (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)
        for start in range(0, n, 500):
            points = [
                qm.PointStruct(id=i, vector=m[i].tolist())
                for i in range(start, min(n, start + 500))
            ]
            await client.upsert(name, points=points, wait=True)
        worst = 0.0
        for _ in range(20):
            raw = rng.standard_normal(dim)
            q = (raw / np.linalg.norm(raw)).astype(np.float32)
            ref = _cosines(q, np.ascontiguousarray(m.T))
            res = (await client.query_points(name, query=q.tolist(), limit=n)).points
            score = np.array([p.score for p in res], np.float32).astype(np.float64)
            ids = [int(p.id) for p in res]
            worst = max(worst, float(np.abs(score - ref[ids]).max()))
        print(f"{dim:5d} dims, {n:6d} points: max |score - reference cosine| = {worst:.3g}")
        await client.delete_collection(name)
        await client.close()


if __name__ == "__main__":
    asyncio.run(main())
