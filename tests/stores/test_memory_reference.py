"""The in-memory store's search (the pipeline) equals the plain-Python oracle, bit for bit."""

from __future__ import annotations

import random
from datetime import timedelta

import numpy as np
import pytest

from actrone_pg.ranking import (
    CHANNELS,
    CorpusStats,
    RankingParams,
    code_point_ranks,
    date_text,
    micros,
    nearest_first,
    rank_arrays,
    term_counts,
)
from actrone_pg.stores.base import MemoryRecord
from actrone_pg.stores.memory import InMemoryStore
from tests.factories import NOW, memory, request
from tests.oracle import Candidate, admit, bm25_score, rank

WORDS = "alpha beta gamma delta epsilon zeta eta theta".split()


def _records(rng: random.Random, n: int) -> list[MemoryRecord]:
    times = [NOW - timedelta(days=rng.uniform(0, 50)) for _ in range(n // 3)]
    out = []
    for i in range(n):
        created = (
            rng.choice(times) if rng.random() < 0.3 else NOW - timedelta(days=rng.uniform(0, 50))
        )
        vec = np.zeros(8, dtype=np.float32)
        for j in rng.sample(range(8), 4):
            vec[j] = rng.choice((-0.5, 0.5))
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6)))
        mid = "".join(rng.choice("aAbB-_9") for _ in range(3)) + str(i % 7)
        out.append(MemoryRecord(memory=memory("ag", mid, text, created_at=created), vector=vec))
    # later duplicates of an id replace earlier ones, as upsert does
    return list({r.memory.id: r for r in out}.values())


@pytest.mark.parametrize("seed", range(6))
async def test_vectorised_search_equals_reference(seed: int) -> None:
    rng = random.Random(seed)
    recs = _records(rng, 300)
    store = InMemoryStore()
    await store.upsert_memories(recs)
    # the default lexical document: the content, then the memory's date (lexical_dates)
    counts = {
        r.memory.id: term_counts(f"{r.memory.content} {date_text(r.memory.created_at)}")
        for r in recs
    }
    df: dict[str, int] = {}
    for tf, _ in counts.values():
        for t in tf:
            df[t] = df.get(t, 0) + 1
    stats = CorpusStats(len(recs), sum(n for _, n in counts.values()), df)
    for _ in range(40):
        qv = np.zeros(8)
        for j in rng.sample(range(8), 4):
            qv[j] = rng.choice((-0.5, 0.5))
        params = RankingParams(
            hybrid=rng.random() < 0.7,
            rrf_k=rng.choice([1, 60]),
            rrf_weights=rng.choice(
                [(1.0, 1.0, 1.0), (1.0, 1.0, 0.3), tuple(rng.choice((0.5, 2.0)) for _ in CHANNELS)]
            ),
            bm25_k1=rng.choice([1.2, 0.9, 2.0]),
            bm25_b=rng.choice([0.75, 0.3, 0.0, 1.0]),
        )
        req = request(
            "ag",
            " ".join(rng.choice(WORDS) for _ in range(3)),
            qv.tolist(),
            threshold=rng.choice([-1.0, 0.0, 0.25]),
            limit=rng.choice([3, 30, 500]),
            params=params,
        )
        cands = [
            Candidate(
                id=r.memory.id,
                created_at=r.memory.created_at,
                cosine=float(np.float32(r.vector @ req.vector)),
                bm25=bm25_score(
                    req.terms, counts[r.memory.id][0], counts[r.memory.id][1], stats, params
                ),
                item=r.memory,
            )
            for r in recs
        ]
        want = rank(admit(cands, req.threshold, req.limit), params, req.now)
        got = (await store.search(req)).hits
        assert [h.memory.id for h in got] == [c.id for c, _ in want]
        for h, (_, e) in zip(got, want, strict=True):
            assert h.explain == e  # every field, scores bit-identical


def test_rank_arrays_matches_rank_on_ties() -> None:
    rng = random.Random(7)
    for _ in range(200):
        n = rng.randint(1, 40)
        ids = [rng.choice("abcABC") + str(rng.randint(0, 3)) for _ in range(n)]
        ids = list(dict.fromkeys(ids))
        n = len(ids)
        times = [NOW - timedelta(seconds=rng.choice([0, 1, 86400, 10**6])) for _ in range(n)]
        cos = [rng.choice([0.25, 0.5, 0.75, 1.0]) for _ in range(n)]
        bm = [rng.choice([0.0, 0.0, 1.5, 2.25]) for _ in range(n)]
        params = RankingParams(hybrid=rng.random() < 0.7, rrf_k=rng.choice([1, 60]))
        cands = [Candidate(i, t, c, b, i) for i, t, c, b in zip(ids, times, cos, bm, strict=True)]
        want = rank(cands, params, NOW)
        order = sorted(range(n), key=ids.__getitem__)
        id_order = np.empty(n, dtype=np.int64)
        id_order[order] = np.arange(n)
        got = rank_arrays(
            id_order,
            np.array([micros(t) for t in times], dtype=np.int64),
            np.array(cos),
            np.array(bm),
            params,
            NOW,
        )
        assert [ids[i] for i in got.order] == [c.id for c, _ in want]
        for pos, (_c, e) in zip(got.order, want, strict=True):
            assert float(got.score[pos]) == e.fused_score
            assert int(got.ranks["dense"][pos]) == e.dense_rank
            assert (int(got.ranks["lexical"][pos]) or None) == e.lexical_rank
            assert int(got.ranks["recency"][pos]) == e.recency_rank


def test_nearest_first_is_admits_order_on_ties() -> None:
    rng = random.Random(11)
    for _ in range(300):
        ids = list(dict.fromkeys(rng.choice("abcABC") + str(rng.randint(0, 3)) for _ in range(40)))
        n = len(ids)
        times = [NOW - timedelta(seconds=rng.choice([0, 1, 86400])) for _ in range(n)]
        cos = [rng.choice([0.25, 0.5, 0.75, 1.0]) for _ in range(n)]
        limit = rng.randint(1, n + 2)
        cands = [Candidate(i, t, c, 0.0, i) for i, t, c in zip(ids, times, cos, strict=True)]
        want = [c.id for c in admit(cands, 0.0, limit)]
        got = nearest_first(
            np.array(cos),
            np.array([micros(t) for t in times], dtype=np.int64),
            code_point_ranks(ids),
            limit,
        )
        assert [ids[i] for i in got] == want
