"""Cross-backend parity: same data, same vectors, same request -> the reference's ranking.

The in-memory store is the reference (it ranks with ``actrone_pg.ranking`` directly). Two
families of data:

* **exact**: vectors whose components are 0 or ±0.5 (four non-zero in 16 dimensions), so every
  norm is exactly 1 and every cosine is a multiple of 0.25 in any float arithmetic. Ties are
  everywhere, so tie-breaking is exercised hard; rankings must match exactly.
* **float**: random unit vectors; rankings must match wherever two cosines are not within 1e-5
  of each other (float32 vs float64 summation may order nearer pairs either way).

Ids mix case and punctuation (``"B-2"`` vs ``"a_1"``) so a backend that compares ids with a
locale collation instead of code points fails here.
"""

from __future__ import annotations

import random
import string
from collections.abc import Awaitable
from dataclasses import replace
from datetime import timedelta

import numpy as np
import pytest

from actrone_pg.config import MemoryConfig
from actrone_pg.manager import MemoryManager
from actrone_pg.models import Memory, ScoredMemory
from actrone_pg.ranking import CHANNELS, RankingParams
from actrone_pg.stores.base import MemoryRecord, Store, pack_hits, stored_tokens
from actrone_pg.stores.memory import InMemoryStore
from tests.conftest import BACKENDS
from tests.factories import NOW, memory, request
from tests.helpers import FixedEmbedder

# "memory" against a second reference instance checks that the reference is deterministic.
OTHERS = list(BACKENDS)

VOCAB = (
    "coffee tea morning evening meeting project deadline python postgres travel paris london "
    "allergy peanut doctor running garden music piano budget invoice family birthday cat dog"
).split()


def _id(rng: random.Random) -> str:
    alphabet = string.ascii_letters + string.digits + "-_"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 6)))


def _exact_vector(rng: random.Random, dims: int = 16) -> np.ndarray:
    v = np.zeros(dims, dtype=np.float32)
    for i in rng.sample(range(dims), 4):
        v[i] = rng.choice((-0.5, 0.5))
    return v


def _float_vector(rng: random.Random, dims: int = 16) -> np.ndarray:
    v = np.array([rng.gauss(0, 1) for _ in range(dims)])
    return (v / np.linalg.norm(v)).astype(np.float32)


def _text(rng: random.Random) -> str:
    words = [rng.choice(VOCAB) for _ in range(rng.randint(1, 9))]
    return " ".join(words).capitalize() + rng.choice([".", "!", "?", ""])


def _dataset(
    rng: random.Random, make_vector: object, agents: list[str], n: int
) -> list[MemoryRecord]:
    records: list[MemoryRecord] = []
    seen: set[tuple[str, str]] = set()
    base_times = [NOW - timedelta(days=rng.uniform(0, 40)) for _ in range(n // 4 + 1)]
    while len(records) < n:
        agent = rng.choice(agents)
        mid = _id(rng)
        if (agent, mid) in seen:
            continue
        seen.add((agent, mid))
        # a quarter of the memories share a timestamp with another, forcing the id tie-break
        created = (
            rng.choice(base_times)
            if rng.random() < 0.25
            else NOW - timedelta(seconds=rng.uniform(0, 40 * 86400))
        )
        created = created.replace(microsecond=created.microsecond)  # keep microseconds
        vec = make_vector(rng)  # type: ignore[operator]
        records.append(
            MemoryRecord(memory=memory(agent, mid, _text(rng), created_at=created), vector=vec)
        )
    return records


def _ranked(hits: list[ScoredMemory]) -> list[tuple[object, ...]]:
    """Each hit's id and its rank in every channel (a channel added later included)."""
    return [(h.memory.id, *(getattr(h.explain, c.field) for c in CHANNELS)) for h in hits]


def _every_channel_weighted(rng: random.Random) -> tuple[float, ...]:
    return tuple(rng.choice((0.5, 1.0, 2.0)) for _ in CHANNELS)


def _near_ties(hits: list[ScoredMemory], threshold: float) -> bool:
    cos = sorted(h.explain.cosine for h in hits)
    if any(abs(c - threshold) < 1e-5 for c in cos):
        return True
    return any(b - a < 1e-5 for a, b in zip(cos, cos[1:], strict=False))


def _same_fields(got: ScoredMemory, want: ScoredMemory) -> bool:
    """Every field of the two memories is equal (the explanation aside)."""
    w = want.memory
    fields = {f: getattr(w, f) for f in w.__slots__}
    return got.memory == type(w)(**{**fields, "explain": got.memory.explain})


async def _load(store: Store, records: list[MemoryRecord]) -> None:
    for start in range(0, len(records), 50):
        await store.upsert_memories(records[start : start + 50])


@pytest.fixture(params=OTHERS)
def other(request: pytest.FixtureRequest) -> Store:
    """A fresh store of each backend compared with the reference."""
    s: Store = request.getfixturevalue(f"store_{request.param}")
    return s


@pytest.mark.parametrize("family", ["exact", "float"])
async def test_parity_with_the_reference(other: Store, family: str) -> None:
    reference = InMemoryStore()
    rng = random.Random(f"parity-{family}")
    make = _exact_vector if family == "exact" else _float_vector
    agents = ["A", "b", "C:1"]
    records = _dataset(rng, make, agents, 240)
    # a second embedder in the same agents: never compared, but part of each agent's BM25 corpus
    for rec in _dataset(rng, lambda r: _exact_vector(r, 8), agents, 30):
        m = rec.memory
        records.append(
            MemoryRecord(
                memory=type(m)(
                    **{
                        **{f: getattr(m, f) for f in m.__slots__},
                        "embedder": "other",
                        "id": "o" + m.id,
                    }
                ),
                vector=rec.vector,
            )
        )
    for store in (reference, other):
        await _load(store, records)
    # a few deletions and replacements, so statistics must follow writes
    for rec in records[:10]:
        for store in (reference, other):
            await store.delete_memory(rec.memory.agent_id, rec.memory.id)

    compared = 0
    total_hits = 0
    packed_any = 0
    for q in range(150):
        agent = rng.choice(agents)
        hybrid = rng.random() < 0.75
        params = RankingParams(
            hybrid=hybrid,
            rrf_k=rng.choice([1, 10, 60]),
            # the last: a weight for every channel, a channel added later included
            rrf_weights=rng.choice(
                [(1.0, 1.0, 1.0), (1.0, 1.0, 0.3), (0.5, 2.0, 0.0), _every_channel_weighted(rng)]
            ),
            relevance_weight=0.7,
            recency_weight=0.3,
            bm25_k1=rng.choice([1.2, 0.9, 2.0]),
            bm25_b=rng.choice([0.75, 0.3, 0.0, 1.0]),
        )
        threshold = (
            rng.choice([-0.5, 0.0, 0.25, 0.5]) if family == "exact" else rng.uniform(-0.2, 0.4)
        )
        req = request(
            agent,
            _text(rng) + rng.choice(["", " & !", " 'quoted' (x)", " OR -not"]),
            make(rng).tolist(),
            threshold=threshold,
            limit=rng.choice([5, 20, 500]),
            params=params,
        )
        want = (await reference.search(req)).hits
        got = (await other.search(req)).hits
        if family == "float" and _near_ties(want, threshold):
            continue
        compared += 1
        total_hits += len(want)
        assert _ranked(got) == _ranked(want), f"query {q}: {req.query!r} agent={agent}"
        for g, w in zip(got, want, strict=True):
            assert g.explain.cosine == pytest.approx(w.explain.cosine, abs=1e-5)
            assert g.explain.fused_score == pytest.approx(w.explain.fused_score, rel=1e-9, abs=1e-6)
            if w.explain.bm25 is None:
                assert g.explain.bm25 is None
            else:
                assert g.explain.bm25 == pytest.approx(w.explain.bm25, rel=1e-6)
            assert _same_fields(g, w)
        # retrieve_context's path: the same ranking packed into a budget, built only for the
        # memories that fit (PostgreSQL fetches just their rows).
        # (search_memories: no budget, the best few)
        budget = rng.choice([0, 8, 40, 200, 100_000, None])
        max_hits = rng.choice([None, None, 1, 10])
        packed = await other.search(replace(req, budget=budget, max_hits=max_hits))
        expected = pack_hits((await reference.search(req)).hits, stored_tokens, budget, max_hits)
        assert (packed.candidates_considered, packed.tokens) == (
            expected.candidates_considered,
            expected.tokens,
        )
        assert _ranked(packed.hits) == _ranked(expected.hits), f"query {q}, budget {budget}"
        for g, w in zip(packed.hits, expected.hits, strict=True):
            assert _same_fields(g, w)
            assert g.explain.fused_score == pytest.approx(w.explain.fused_score, rel=1e-9, abs=1e-6)
            packed_any += 1
    assert compared >= 100
    assert total_hits >= 10 * compared  # the queries really rank something
    assert packed_any >= 50  # and the packed path really chose memories


async def test_manager_retrieval_matches_the_reference(other: Store) -> None:
    # End to end through MemoryManager: retrieve_context packs through search_packed (PostgreSQL
    # ranks without the fields, then reads only what fits), search_memories takes the best few.
    # Exact vectors (cosines are multiples of 0.25 in any arithmetic): rankings must match.
    rng = random.Random("manager-parity")
    items = [
        {"content": _text(rng), "memory_id": f"m{i}", "created_at": NOW - timedelta(minutes=i)}
        for i in range(150)
    ]
    queries = [(_text(rng) + f" q{n}", rng.choice([40, 400, 4000])) for n in range(25)]
    texts = [str(item["content"]) for item in items] + [q for q, _ in queries]
    vectors = {t: _exact_vector(rng).tolist() for t in texts}

    def manager(store: Store | None) -> Awaitable[MemoryManager]:
        backend = "memory" if store is None else store.backend
        config = MemoryConfig(backend=backend, relevance_threshold=0.25)
        embedder = FixedEmbedder(vectors, dimensions=16, name="exact-16")
        return MemoryManager.create(config, store=store, embedder=embedder)

    ref, mm = await manager(None), await manager(other)
    for m in (ref, mm):
        await m.inject_memories("agent", items)
        for j in range(8):
            await m.store_turn("agent", "s", f"question {j}", f"answer {j} " * j, turn_id=f"t{j}")

    def ranks(memories: list[Memory]) -> list[tuple[str, int | None, int | None, int | None]]:
        return [
            (m.id, m.explain.dense_rank, m.explain.lexical_rank, m.explain.recency_rank)
            for m in memories
            if m.explain is not None
        ]

    chosen = 0
    for query, budget in queries:
        want = await ref.retrieve_context("agent", "s", query, budget, explain=True)
        got = await mm.retrieve_context("agent", "s", query, budget, explain=True)
        assert ranks(got.episodic_memories) == ranks(want.episodic_memories), query
        assert len(ranks(got.episodic_memories)) == len(got.episodic_memories)
        assert [m.content for m in got.episodic_memories] == [
            m.content for m in want.episodic_memories
        ]
        assert got.candidates_considered == want.candidates_considered
        assert (got.session_tokens, got.episodic_tokens) == (
            want.session_tokens,
            want.episodic_tokens,
        )
        assert [t.id for t in got.recent_turns] == [t.id for t in want.recent_turns]
        chosen += len(got.episodic_memories)
        want_hits = await ref.search_memories("agent", query, limit=7, explain=True)
        got_hits = await mm.search_memories("agent", query, limit=7, explain=True)
        assert ranks(got_hits) == ranks(want_hits), query
    assert chosen >= 50
    await ref.close()


@pytest.mark.parametrize("words", [12, 25])
async def test_long_queries_rank_as_the_reference(other: Store, words: int) -> None:
    # _text's queries hold at most nine words. PostgreSQL sums a candidate's BM25 in one
    # expression for up to 16 query terms that the corpus holds, and by a subquery per candidate
    # past that (sql/0024_hybrid_search.sql): queries of 12 and of all 25 VOCAB words take each
    # way. Same scores as the reference, to the bit, and the same rankings, packed or not.
    reference = InMemoryStore()
    rng = random.Random(f"parity-long-{words}")
    records = _dataset(rng, _exact_vector, ["A"], 120)
    for store in (reference, other):
        await _load(store, records)
    for q in range(20):
        chosen = rng.sample(VOCAB, words)
        params = RankingParams(
            rrf_weights=(1.0, 2.0, 0.5),
            bm25_k1=rng.choice([1.2, 0.9]),
            bm25_b=rng.choice([0.75, 0.3]),
        )
        req = request("A", " ".join(chosen), _exact_vector(rng).tolist(), params=params)
        assert len(set(req.terms)) >= words
        want = (await reference.search(req)).hits
        got = (await other.search(req)).hits
        assert _ranked(got) == _ranked(want), f"query {q}: {req.query!r}"
        assert [g.explain.bm25 for g in got] == [w.explain.bm25 for w in want]
        assert sum(w.explain.bm25 is not None for w in want) >= 10
        packed = await other.search(replace(req, budget=60))
        expected = pack_hits(want, stored_tokens, 60, None)
        assert _ranked(packed.hits) == _ranked(expected.hits), f"query {q}, packed"
        assert [g.explain.bm25 for g in packed.hits] == [w.explain.bm25 for w in expected.hits]
