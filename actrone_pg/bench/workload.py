"""The workload of ``actrone-pg bench``: synthetic data, its exact answers, and its ingest.

Everything here is deterministic given the seed, and free of any terminal output; the timed
passes are in :mod:`actrone_pg.bench.runner`, the results in :mod:`actrone_pg.bench.results`
(``LatencyStats`` and ``BenchResult`` are importable from here too).

**Data.** Each agent gets ``per_agent`` memories of ``dimensions`` floats, grouped into clusters
of about ``cluster_size`` memories. A memory is a unit vector at a random angle from its cluster's
centre: ``m = ρ·c + √(1-ρ²)·u`` with ``u`` a random unit vector orthogonal to ``c`` and ``ρ`` drawn
uniformly from [0.35, 0.90] per memory. A query is built the same way around one cluster with
``ρ = 0.92``, so its cosine to that cluster's members is spread over roughly 0.3-0.85 and to every
other memory close to 0. The admission threshold is then *measured*, not guessed: the median,
over the first agent's queries, of the ``admit_target``-th largest cosine. With the defaults
(clusters of 2,000, ``admit_target`` 1,000) about 1,000 of a 10,000-memory agent's memories pass
it, independent of the agent's size, so ``max_episodic_memories`` (500) always bites and the
store must find the *nearest* 500 of the admitted set.

Texts are short sentences from a synthetic vocabulary: each cluster has its own topic words
(Zipf-weighted), mixed with words shared by everyone, so BM25 has real term statistics; queries
use their cluster's topic words.

**Embedding excluded.** :class:`FixedVectorEmbedder` returns the precomputed vector of each text
(a dict look-up), so retrieval timings measure the manager and the store, not a model.

**Filters and versions** (optional: ``filtered`` and ``versions`` of
:func:`~actrone_pg.bench.runner.run_benchmark`).
With ``filtered``, memory ``i`` of each agent is tagged ``"p1"`` when ``i % 100 == 0``,
``"p10"`` when ``i % 10 == 0``, ``"p50"`` when ``i % 2 == 0`` and ``"p100"`` always (1 %, 10 %,
50 % and 100 % of the agent, spread over every cluster), and the same queries are timed through
``retrieve_context`` with ``{"tags_any": [tag]}`` for each: selective filters and broad ones,
which must cost no more than the unfiltered search (spec §7). With ``versions``, after those
passes every memory with ``i % 5 == 1`` (20 %) is updated ``versions`` times with
``update_memory`` (metadata only: the content, vector and ranking stay the same, so the
candidates must not change), and the same queries are timed again through
``retrieve_context`` and ``search_memories``.

**Recall.** For each timed search the exact answer is computed with numpy over that agent's
vectors: the memories with ``cosine ≥ threshold``, nearest 500. Recall is
``|store's candidate ids ∩ exact| / |exact|``, where the store's candidates are the ids
``search_memories(limit=max_episodic_memories)`` returns (every admitted candidate, ranked).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from actrone_pg.bench.results import BenchResult, LatencyStats
from actrone_pg.manager import MemoryManager
from actrone_pg.ranking import code_point_ranks, micros, nearest_first

__all__ = [
    "AgentData",
    "BenchResult",
    "Dataset",
    "DatasetSpec",
    "FixedVectorEmbedder",
    "LatencyStats",
    "agents_of",
    "build_dataset",
    "exact_candidates",
    "in_turn",
    "ingest",
    "schedule",
    "tie_keys",
    "unit_rows",
]

F32 = npt.NDArray[np.float32]
T = TypeVar("T")

#: The session every agent's L1 turns live in during the benchmark.
SESSION_ID = "bench-session"
#: Turns stored per agent so that ``retrieve_context`` also reads and packs L1.
TURNS_PER_AGENT = 20
#: Token budget of each ``retrieve_context`` call (L2 share: 1,000 tokens).
TOKEN_BUDGET = 4000
#: Fixed reference instant; memories are spread over the 90 days before it.
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)

#: Tags of 1 %, 10 %, 50 % and 100 % of each agent's memories (``filtered`` runs), with the
#: modulus picking them.
FILTER_TAGS = (("p1", 100), ("p10", 10), ("p50", 2), ("p100", 1))
#: Every memory with ``i % VERSION_EVERY == 1`` is updated in a ``versions`` run (20 %).
VERSION_EVERY = 5

_SYLLABLES = (
    "ka ri to me sa lo vi na pe du ru ge mo ta ki zu fa ne ho li ba so wi ma "
    "ze po gu ra te ni do sha ve lu ko ja mi re"
).split()


@dataclass(frozen=True, slots=True)
class DatasetSpec:
    """What to generate."""

    agents: int = 10
    per_agent: int = 10_000
    dimensions: int = 384
    queries: int = 1000
    seed: int = 7
    cluster_size: int = 2000
    admit_target: int = 1000


@dataclass(slots=True)
class AgentData:
    """One agent's memories and queries."""

    agent_id: str
    ids: list[str]
    texts: list[str]
    vectors: F32
    created_at: list[datetime]
    query_texts: list[str]
    query_vectors: F32
    turns: list[tuple[str, str]]


@dataclass(slots=True)
class Dataset:
    """Every agent's data and the admission threshold measured on it."""

    spec: DatasetSpec
    agents: list[AgentData]
    threshold: float

    @property
    def total_memories(self) -> int:
        """Memories over all agents."""
        return sum(len(a.ids) for a in self.agents)


def unit_rows(matrix: npt.ArrayLike) -> F32:
    """Rows scaled to unit length exactly as the manager does (float64 norm, then float32).

    The norm is taken row by row with the same dot product the manager's ``normalise`` uses, so
    the exact scan sees bit-identical vectors to the store's.
    """
    arr = np.asarray(matrix, dtype=np.float64)
    norms = np.array([math.sqrt(float(row @ row)) for row in arr], dtype=np.float64)
    return (arr / norms[:, None]).astype(np.float32)


def _vocabulary(rng: np.random.Generator, size: int) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        n = int(rng.integers(2, 4))
        words.add("".join(_SYLLABLES[int(i)] for i in rng.integers(0, len(_SYLLABLES), n)))
    return sorted(words)


def _around(rng: np.random.Generator, centres: F32, rho: npt.NDArray[np.float64]) -> F32:
    """Unit vectors at cosine ``rho`` from their ``centres`` (one centre row per output row)."""
    noise = rng.standard_normal(centres.shape)
    noise -= np.einsum("ij,ij->i", noise, centres)[:, None] * centres
    noise /= np.linalg.norm(noise, axis=1)[:, None]
    out: npt.NDArray[np.float64] = rho[:, None] * centres + np.sqrt(1.0 - rho**2)[:, None] * noise
    return unit_rows(out)


def _sentence(
    rng: np.random.Generator, topic: Sequence[str], common: Sequence[str], n_words: int
) -> str:
    # Zipf-like weights: early topic words are frequent, the tail is rare (gives BM25 a spread
    # of document frequencies).
    words = []
    for _ in range(n_words):
        pool = topic if rng.random() < 0.6 else common
        idx = min(int(rng.zipf(1.3)) - 1, len(pool) - 1)
        words.append(pool[idx])
    return " ".join(words)


def _agent(spec: DatasetSpec, index: int, vocab: list[str]) -> AgentData:
    rng = np.random.default_rng([spec.seed, index])
    n = spec.per_agent
    n_clusters = max(1, math.ceil(n / spec.cluster_size))
    centres = unit_rows(rng.standard_normal((n_clusters, spec.dimensions)))
    assign = rng.integers(0, n_clusters, n)
    rho = rng.uniform(0.35, 0.90, n)
    vectors = _around(rng, centres[assign], rho)

    common = vocab[:200]
    topics = []
    for _ in range(n_clusters):
        pick = rng.choice(len(vocab) - 200, size=60, replace=False) + 200
        topics.append([vocab[int(i)] for i in pick])

    agent_id = f"bench-agent-{index:03d}"
    ids = [f"{agent_id}-m{i:07d}" for i in range(n)]
    texts = []
    for i in range(n):
        body = _sentence(rng, topics[int(assign[i])], common, int(rng.integers(6, 18)))
        # The serial number keeps every text unique (the embedder looks vectors up by text).
        texts.append(f"{body} note {i}")
    ages = rng.uniform(0, 90 * 86400, n)
    created = [EPOCH - timedelta(seconds=float(a)) for a in ages]

    nq = max(1, math.ceil(spec.queries / spec.agents))
    q_cluster = rng.integers(0, n_clusters, nq)
    q_vectors = _around(rng, centres[q_cluster], np.full(nq, 0.92))
    q_texts = [
        f"{_sentence(rng, topics[int(c)], common, int(rng.integers(3, 7)))} query {j}"
        for j, c in enumerate(q_cluster)
    ]
    turns = [
        (
            _sentence(rng, topics[0], common, 12),
            _sentence(rng, topics[0], common, 24),
        )
        for _ in range(TURNS_PER_AGENT)
    ]
    return AgentData(agent_id, ids, texts, vectors, created, q_texts, q_vectors, turns)


def build_dataset(spec: DatasetSpec) -> Dataset:
    """Generate the agents' data and measure the admission threshold (see the module doc)."""
    if spec.agents < 1 or spec.per_agent < 1 or spec.queries < 1 or spec.dimensions < 2:
        raise ValueError("agents, per_agent and queries must be ≥ 1, dimensions ≥ 2")
    vocab = _vocabulary(np.random.default_rng([spec.seed, 1_000_003]), 3000)
    agents = [_agent(spec, i, vocab) for i in range(spec.agents)]
    first = agents[0]
    k = max(1, min(spec.admit_target, spec.per_agent // 2))
    kth = []
    for q in first.query_vectors:
        cos = first.vectors @ q
        kth.append(float(np.partition(cos, cos.size - k)[cos.size - k]))
    threshold = round(statistics.median(kth), 4)
    threshold = min(max(threshold, 0.01), 0.99)
    return Dataset(spec=spec, agents=agents, threshold=threshold)


class FixedVectorEmbedder:
    """An embedder that returns precomputed vectors, looked up by text.

    It makes query embedding (and memory embedding during ingest) a dict look-up, so the
    benchmark times the manager and the store, not a model.
    """

    relevance_threshold: float | None = None

    def __init__(self, dimensions: int, name: str = "bench-fixed") -> None:
        self.name = f"{name}-{dimensions}"
        self.dimensions = dimensions
        self._vectors: dict[str, F32] = {}

    def add(self, texts: Sequence[str], vectors: F32) -> None:
        """Register the vector of each text."""
        for text, row in zip(texts, vectors, strict=True):
            self._vectors[text] = row

    async def embed_batch(self, texts: Sequence[str]) -> F32:
        """The registered vectors of ``texts``; an unknown text is a bug in the benchmark."""
        return np.stack([self._vectors[t] for t in texts])


#: An agent's memories' ``id_order`` and ``created_us``, the tie-breaking keys of
#: :func:`actrone_pg.ranking.rank_arrays`.
TieKeys = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]


def exact_candidates(
    vectors: F32,
    query: F32,
    threshold: float,
    limit: int,
    ties: TieKeys | None = None,
) -> tuple[int, npt.NDArray[np.intp]]:
    """Brute force: (how many pass ``threshold``, indices of the nearest ``limit`` of those).

    ``ties`` (see :func:`tie_keys`) breaks equal cosines as the stores do, newer first, then id;
    without it the lower index wins.
    """
    cos = (vectors @ query).astype(np.float64)
    admitted = np.flatnonzero(cos >= threshold)
    if admitted.size > limit:
        if ties is None:
            order = np.argsort(-cos[admitted], kind="stable")[:limit]
        else:
            id_order, created_us = ties
            order = nearest_first(cos[admitted], created_us[admitted], id_order[admitted], limit)
        return int(admitted.size), admitted[order]
    return int(admitted.size), admitted


def tie_keys(agent: AgentData) -> TieKeys:
    """The keys the stores break equal cosines by (``ranking.nearest_first``), for the exact scan.

    Equal cosines do occur at the 500th place (two memories' float32 dot products agreeing to
    the last bit); ordered by index instead, the exact scan disagreed with every store there and
    counted it as a missed candidate (recall min 0.998 at 5 × 2,000).
    """
    created_us = np.array([micros(t) for t in agent.created_at], dtype=np.int64)
    return code_point_ranks(agent.ids), created_us


Progress = Callable[[int], None]


async def ingest(
    mm: MemoryManager,
    dataset: Dataset,
    *,
    batch_size: int = 1000,
    progress: Progress | None = None,
    filtered: bool = False,
) -> float:
    """Inject every agent's memories in batches; returns the seconds spent in ``inject_memories``.

    The vectors are registered with the embedder beforehand (outside the timing). With
    ``filtered`` the memories carry the tags of :data:`FILTER_TAGS`.
    """
    elapsed = 0.0
    for agent in dataset.agents:
        for start in range(0, len(agent.ids), batch_size):
            stop = min(start + batch_size, len(agent.ids))
            items = [
                {
                    "content": agent.texts[i],
                    "memory_id": agent.ids[i],
                    "created_at": agent.created_at[i],
                    **({"tags": _tags(i)} if filtered else {}),
                }
                for i in range(start, stop)
            ]
            t0 = time.perf_counter()
            await mm.inject_memories(agent.agent_id, items)
            elapsed += time.perf_counter() - t0
            if progress is not None:
                progress(stop - start)
    return elapsed


def _tags(index: int) -> list[str]:
    return [tag for tag, every in FILTER_TAGS if index % every == 0]


def schedule(dataset: Dataset, count: int) -> list[tuple[int, int]]:
    """``count`` (agent index, query index) pairs: round-robin over agents, cycling queries."""
    out = []
    n_agents = len(dataset.agents)
    for j in range(count):
        agent = dataset.agents[j % n_agents]
        out.append((j % n_agents, (j // n_agents) % len(agent.query_texts)))
    return out


def in_turn(calls: Sequence[T], k: int) -> list[T]:
    """``calls`` for the ``k``-th query, starting at the ``k``-th of them (cyclically): every
    call takes every place equally often. Run in one fixed order, the first call after another
    query's read slower, and the ones after it faster, than their place aside would make them
    (docs/benchmarks.md, "The order of the calls")."""
    shift = k % len(calls)
    return [*calls[shift:], *calls[:shift]]


def agents_of(dataset: Dataset, pairs: list[tuple[int, int]]) -> list[tuple[AgentData, int]]:
    """The agents and query indexes of :func:`schedule`'s pairs."""
    return [(dataset.agents[a], q) for a, q in pairs]
