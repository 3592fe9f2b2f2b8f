"""A plain-Python oracle of the ranking contract (docs/retrieval.md), for tests only.

It restates the rules of :mod:`actrone_pg.ranking` one candidate at a time, with sorts and dicts
instead of arrays, so that a test can hold the pipeline (and the SQL) to an independent reading
of the rules, bit for bit. The library never imports it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, TypeVar

from actrone_pg.models import Explain
from actrone_pg.ranking import (
    RECENCY_HORIZON_SECONDS,
    CorpusStats,
    RankingParams,
    idf,
    micros,
)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Candidate(Generic[T]):
    """A memory being ranked: its cosine to the query and its BM25 score (0.0 = no shared term)."""

    id: str
    created_at: datetime
    cosine: float
    bm25: float
    item: T


def bm25_score(
    terms: Sequence[str],
    tf: Mapping[str, int],
    length: int,
    stats: CorpusStats,
    params: RankingParams | None = None,
) -> float:
    """BM25 of one document for the distinct query ``terms``; 0.0 if it shares none."""
    p = params or RankingParams()
    k1, b = p.bm25_k1, p.bm25_b
    score = 0.0
    for term in terms:
        f = tf.get(term, 0)
        if f == 0:
            continue
        norm = k1 * (1.0 - b + b * length / stats.avgdl)
        score += idf(stats.n_docs, stats.doc_freq.get(term, 0)) * (f * (k1 + 1.0)) / (f + norm)
    return score


def recency(created_at: datetime, now: datetime) -> float:
    """1.0 for a memory written now, falling linearly to 0.0 at 30 days or older."""
    age = (now - created_at).total_seconds()
    if age <= 0:
        return 1.0
    return max(0.0, 1.0 - age / RECENCY_HORIZON_SECONDS)


def admit(candidates: Iterable[Candidate[T]], threshold: float, limit: int) -> list[Candidate[T]]:
    """Candidates with ``cosine >= threshold``, nearest first, at most ``limit`` of them."""
    kept = [c for c in candidates if c.cosine >= threshold]
    kept.sort(key=lambda c: (-c.cosine, -micros(c.created_at), c.id))
    return kept[:limit]


def rank(
    candidates: Sequence[Candidate[T]], params: RankingParams, now: datetime
) -> list[tuple[Candidate[T], Explain]]:
    """Rank admitted candidates; returns them best first, each with its explanation."""
    tie = {c.id: (-micros(c.created_at), c.id) for c in candidates}
    dense = sorted(candidates, key=lambda c: (-c.cosine, *tie[c.id]))
    dense_rank = {c.id: i for i, c in enumerate(dense, 1)}
    recent = sorted(candidates, key=lambda c: tie[c.id])
    recency_rank = {c.id: i for i, c in enumerate(recent, 1)}
    lexical = sorted((c for c in candidates if c.bm25 > 0.0), key=lambda c: (-c.bm25, *tie[c.id]))
    lexical_rank = {c.id: i for i, c in enumerate(lexical, 1)}

    scored: list[tuple[float, Candidate[T], Explain]] = []
    k = params.rrf_k
    w_dense, w_lex, w_rec = params.rrf_weights
    for c in candidates:
        d = dense_rank[c.id]
        lx = lexical_rank.get(c.id)
        r = recency_rank[c.id]
        if params.hybrid:
            score = w_dense / (k + d)
            if lx is not None:
                score += w_lex / (k + lx)
            score += w_rec / (k + r)
        else:
            score = params.relevance_weight * c.cosine + params.recency_weight * recency(
                c.created_at, now
            )
            lx = None
        explain = Explain(
            cosine=c.cosine,
            dense_rank=d,
            lexical_rank=lx,
            recency_rank=r,
            fused_score=score,
            bm25=c.bm25 if c.bm25 > 0.0 else None,
        )
        scored.append((score, c, explain))
    scored.sort(key=lambda t: (-t[0], *tie[t[1].id]))
    return [(c, e) for _, c, e in scored]
