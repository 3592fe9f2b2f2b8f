"""The Redis + Qdrant store's L2 search: Qdrant's candidates, made exact, for the pipeline."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from actrone_pg import pipeline
from actrone_pg.errors import MissingDependencyError
from actrone_pg.filters import MemoryFilter, filtered_stats
from actrone_pg.models import Memory
from actrone_pg.pipeline import Candidates, PackedSearch, SearchRequest
from actrone_pg.ranking import Analyzer, CorpusStats, code_point_ranks
from actrone_pg.ranking import cosines as _reference_cosines
from actrone_pg.stores.base import check_query_dimensions
from actrone_pg.stores.redis_qdrant import index, registry
from actrone_pg.stores.redis_qdrant.connection import Servers
from actrone_pg.stores.redis_qdrant.layout import (
    SEARCH_PAYLOAD,
    AgentKeys,
    from_payload,
    live_filter,
    payload_columns,
)

try:
    from qdrant_client import models as qm
except ImportError:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("qdrant", "qdrant-client") from None

__all__ = ["list_memories", "search"]

# Qdrant's score for a point and the float32 cosine the store recomputes may differ in the last
# bits (different summation order; measured differences are ≤ 2e-7 for 384-dim unit vectors).
# Candidates are fetched with this much slack below the threshold and then admitted exactly.
_SCORE_SLACK = 1e-4
# Two cosines closer than this may be ordered differently by Qdrant's score and by the reference's
# float32 product; such candidates get their cosine recomputed (see _exact_cosines). Measured:
# local-mode scores vs the reference differ by at most 1.2e-7 (16 dims), 6e-8 (384), 5e-8 (1536)
# over 20 queries x 10,000 unit vectors (python benchmarks/experiments/qdrant_score_precision.py).
_TIE_SLACK = 1e-5


async def search(sv: Servers, request: SearchRequest) -> PackedSearch:
    """The agent's Qdrant candidates, with exact cosines, ranked by the pipeline."""
    nothing = PackedSearch(hits=[], candidates_considered=0, tokens=0)
    dim = await registry.registered_dim(sv, request.embedder)
    if dim is None:
        return nothing
    check_query_dimensions(request.embedder, dim, request.vector)
    coll = await registry.existing_collection(sv, request.embedder, dim)
    if coll is None:
        return nothing
    await index.ensure_indexed(sv, request.agent_id)
    query = np.asarray(request.vector, dtype=np.float32)
    ak = AgentKeys.of(sv.prefix, request.agent_id)
    terms = list(request.terms)
    fetch = request.limit + max(16, request.limit // 8)
    where = live_filter(request.agent_id, request.now, request.filter)
    flt = request.filter
    allowed: set[str] | None = None
    if flt is not None:
        # The filtered set, whatever its embedder, expired memories included: its BM25
        # statistics (spec §9.3). Only its live memories under this embedder are candidates.
        stats_where = live_filter(request.agent_id, request.now, flt)
        stats_where.must_not = None
        matching = [
            p
            for p in await index.current_payloads(sv, request.agent_id, stats_where)
            if flt.matches(from_payload(p))
        ]
        filtered = _filtered_stats(matching, terms, sv.analyzer)
        allowed = {str(p["memory_id"]) for p in matching}
    rebuilt = False
    while True:
        response = await sv.qdrant_call(
            sv.qdrant().query_points(
                coll,
                query=query.tolist(),
                query_filter=where,
                limit=fetch,
                score_threshold=request.threshold - _SCORE_SLACK,
                with_payload=SEARCH_PAYLOAD,
                with_vectors=False,
                **_exact(sv),
            )
        )
        points = response.points
        ids = [str((p.payload or {}).get("memory_id", "")) for p in points]
        n_docs, total_length, indexed, dfs = await index.search_stats(
            sv, ak, request.embedder, ids, terms
        )
        if n_docs == 0 and points and not rebuilt:
            # Points without any index entry: Redis lost the index (see rebuild_index).
            await index.rebuild_index(sv, request.agent_id)
            rebuilt = True
            continue
        kept = [
            p
            for p, ok in zip(points, indexed, strict=True)
            if ok
            and (p.payload or {}).get("agent_id") == request.agent_id
            and (allowed is None or (p.payload or {}).get("memory_id") in allowed)
        ]
        cos = await _exact_cosines(sv, coll, query, kept, request.threshold)
        admitted = np.flatnonzero(cos >= request.threshold)
        if len(points) < fetch:
            break  # Qdrant returned every point above threshold - slack
        if admitted.size >= request.limit:
            kth = float(np.sort(cos[admitted])[::-1][request.limit - 1])
            floor = min(float(p.score) for p in points)
            if kth > floor + _SCORE_SLACK:
                break  # nothing unfetched can reach the limit-th admitted cosine
        fetch *= 2
    payloads = [p.payload or {} for p in kept]
    columns = payload_columns(payloads)

    terms_of = sv.analyzer.document_terms

    def tf(
        idx: npt.NDArray[np.intp], terms: Sequence[str]
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        tokens = [terms_of(columns.contents[i], columns.created_at[i]) for i in idx.tolist()]
        counts = [[t.count(term) for t in tokens] for term in terms]
        lengths = np.array([len(t) for t in tokens], dtype=np.float64)
        return np.array(counts, dtype=np.float64).reshape(len(terms), idx.size), lengths

    candidates = Candidates(
        cosine=cos,
        created_us=columns.created_us,
        id_order=code_point_ranks(columns.ids),
        tokens=columns.tokens,
        term_frequencies=tf,
        memories=lambda positions: [from_payload(payloads[i]) for i in positions],
    )
    stats = CorpusStats(n_docs=n_docs, total_length=total_length, doc_freq=dfs)
    if flt is not None:
        stats = filtered
    return pipeline.search(request, candidates, stats)


async def list_memories(
    sv: Servers,
    agent_id: str,
    *,
    now: datetime,
    limit: int,
    after: tuple[datetime, str] | None = None,
    filter: MemoryFilter | None = None,
) -> list[Memory]:
    """A page of the agent's live memories, newest first.

    Qdrant cannot order by two payload keys, so every live point the filter's pushdown
    selects is read and the page cut here: a page costs a scan of the agent's points.
    """
    await index.ensure_indexed(sv, agent_id)  # the index names the current points
    payloads = await index.current_payloads(sv, agent_id, live_filter(agent_id, now, filter))
    found = [from_payload(p) for p in payloads]
    found = [
        m
        for m in found
        if (filter is None or filter.matches(m)) and (after is None or (m.created_at, m.id) < after)
    ]
    found.sort(key=lambda m: (m.created_at, m.id), reverse=True)
    return found[:limit]


async def _exact_cosines(
    sv: Servers,
    coll: str,
    query: npt.NDArray[np.float32],
    points: list[qm.ScoredPoint],
    threshold: float,
) -> npt.NDArray[np.float64]:
    """The candidates' cosines as the reference computes them, where it can matter.

    Qdrant's score is the float32 dot product summed in its own order, so it may differ from
    the reference's float32 product in the last bits (typically ~1e-7). That only matters
    where two candidates, or a candidate and the threshold, are closer than ``_TIE_SLACK``:
    for exactly those the vectors are fetched and the cosine recomputed with the reference's
    routine. Everywhere else the score is used as is (rounded to the float32 it was), which
    orders and admits identically. Fetching every candidate's vector instead would move
    500 × dims floats per search (about 2 MB of JSON at 384 dimensions).
    """
    if not points:
        return np.zeros(0, dtype=np.float64)
    # float32 first: a server's JSON carries the shortest decimal of its float32 score.
    cos = np.array([p.score for p in points], dtype=np.float32).astype(np.float64)
    order = np.argsort(cos, kind="stable")
    close = np.diff(cos[order]) < _TIE_SLACK
    risky = np.zeros(cos.size, dtype=bool)
    risky[order[:-1][close]] = True
    risky[order[1:][close]] = True
    risky |= np.abs(cos - threshold) < _TIE_SLACK
    idx = np.flatnonzero(risky)
    if idx.size == 0:
        return cos
    wanted = [points[i].id for i in idx.tolist()]
    records = await sv.qdrant_call(
        sv.qdrant().retrieve(coll, ids=wanted, with_payload=False, with_vectors=True)
    )
    vectors = {str(r.id): r.vector for r in records}
    have = [i for i in idx.tolist() if str(points[i].id) in vectors]
    if have:
        rows = np.asarray([vectors[str(points[i].id)] for i in have], dtype=np.float32)
        cos[have] = _reference_cosines(query, np.ascontiguousarray(rows.T))
    return cos


def _exact(sv: Servers) -> dict[str, Any]:
    # Exact search on a server: admission must not miss a memory above the threshold (HNSW is
    # approximate). Local mode is always exact and warns about search params.
    if sv.is_local_qdrant:
        return {}
    return {"search_params": qm.SearchParams(exact=True)}


def _filtered_stats(
    payloads: Sequence[dict[str, Any]], terms: Sequence[str], analyzer: Analyzer
) -> CorpusStats:
    """The BM25 statistics of the memories whose payloads are given (a filtered set), their
    contents analysed as the store indexes them."""
    counted = [
        analyzer.document_counts(str(p["content"]), datetime.fromisoformat(p["created_at"]))
        for p in payloads
    ]
    lengths = np.array([length for _, length in counted], dtype=np.int64)
    every = np.ones(len(counted), dtype=bool)

    def rows_of(term: str) -> npt.NDArray[np.intp]:
        return np.array([i for i, (tf, _) in enumerate(counted) if term in tf], dtype=np.intp)

    return filtered_stats(every, lengths, rows_of, terms)
