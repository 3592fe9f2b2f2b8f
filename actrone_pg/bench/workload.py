"""The benchmark behind ``actrone-pg bench``: synthetic data, ingest, timed retrieval, recall.

Everything here is deterministic given the seed, and free of any terminal output, so the command
(:mod:`actrone_pg.bench.command`) and the smoke test share it.

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

**Filters and versions** (optional, :func:`run_benchmark`'s ``filtered`` and ``versions``).
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

import gc
import math
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from actrone_pg.manager import MemoryManager
from actrone_pg.ranking import code_point_ranks, micros, nearest_first

if TYPE_CHECKING:
    from actrone_pg.bench.floor import Floor

__all__ = [
    "AgentData",
    "BenchResult",
    "Dataset",
    "DatasetSpec",
    "FixedVectorEmbedder",
    "LatencyStats",
    "build_dataset",
    "exact_candidates",
    "run_benchmark",
    "schedule",
    "tie_keys",
    "unit_rows",
]

F32 = npt.NDArray[np.float32]

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


@dataclass(frozen=True)
class LatencyStats:
    """Latency summary in milliseconds."""

    n: int
    p50: float
    p99: float
    mean: float
    min: float
    max: float
    #: Per-run p50 and p99 when the passes were repeated (the headline figures are their medians).
    p50_runs: list[float] = field(default_factory=list)
    p99_runs: list[float] = field(default_factory=list)

    @classmethod
    def of(cls, samples_ms: Sequence[float]) -> LatencyStats:
        """Summarise samples (nearest-rank percentiles)."""
        if not samples_ms:
            return cls(0, math.nan, math.nan, math.nan, math.nan, math.nan)
        data = sorted(samples_ms)
        return cls(
            n=len(data),
            p50=_percentile(data, 50),
            p99=_percentile(data, 99),
            mean=statistics.fmean(data),
            min=data[0],
            max=data[-1],
        )

    @classmethod
    def of_runs(cls, runs: Sequence[Sequence[float]]) -> LatencyStats:
        """Summarise repeated runs: p50 and p99 are the medians of each run's p50 and p99."""
        pooled = cls.of([x for run in runs for x in run])
        per_run = [cls.of(run) for run in runs if run]
        if len(per_run) < 2:
            return pooled
        return cls(
            n=pooled.n,
            p50=statistics.median(r.p50 for r in per_run),
            p99=statistics.median(r.p99 for r in per_run),
            mean=pooled.mean,
            min=pooled.min,
            max=pooled.max,
            p50_runs=[r.p50 for r in per_run],
            p99_runs=[r.p99 for r in per_run],
        )


def _percentile(sorted_data: Sequence[float], pct: float) -> float:
    rank = max(1, math.ceil(pct / 100.0 * len(sorted_data)))
    return sorted_data[rank - 1]


@dataclass(slots=True)
class BenchResult:
    """Everything one benchmark run measured."""

    backend: str
    agents: int
    per_agent: int
    dimensions: int
    threshold: float
    seed: int
    memories: int
    ingest_seconds: float
    ingest_rate: float
    retrieve: LatencyStats
    search: LatencyStats
    recall_mean: float
    recall_min: float
    recall_queries: int
    admitted_median: float
    admitted_min: int
    admitted_max: int
    returned_median: float
    context_memories_median: float
    warmup: int
    repeats: int = 1
    notes: list[str] = field(default_factory=list)
    #: ``retrieve_context`` with ``{"tags_any": [tag]}``, by tag (``filtered`` runs only).
    retrieve_filtered: dict[str, LatencyStats] = field(default_factory=dict)
    #: Share of each agent's memories carrying each tag, and the median L2 memories in context.
    filter_share: dict[str, float] = field(default_factory=dict)
    filter_context_median: dict[str, float] = field(default_factory=dict)
    #: ``versions`` runs: updates per updated memory, memories updated, update calls per second.
    versions: int = 0
    versioned_memories: int = 0
    update_rate: float = 0.0
    retrieve_versioned: LatencyStats | None = None
    search_versioned: LatencyStats | None = None
    #: Share of timed searches whose candidates after the updates equal those before.
    versioned_same_candidates: float | None = None
    #: ``search_memories`` with its default ``limit`` (10), what users call most; ``search`` is
    #: ``limit=max_episodic_memories`` (every admitted candidate, for recall).
    search_default: LatencyStats | None = None
    #: The backend's physical floor (:mod:`actrone_pg.bench.floor`), timed over the same queries,
    #: each call right after the store's calls of the same query; ``None`` where the spec names
    #: none.
    floor_name: str = ""
    floor: LatencyStats | None = None
    #: Each pass's retrieve_context p50 ÷ floor p50: the spread of the ratio (spec §7: ±20 %).
    retrieve_floor_ratios: list[float] = field(default_factory=list)
    #: PostgreSQL's plain nearest-neighbour query (:func:`actrone_pg.bench.floor.nearest_for`),
    #: timed like the floor.
    nearest_name: str = ""
    nearest: LatencyStats | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


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


def _agents_of(dataset: Dataset, pairs: list[tuple[int, int]]) -> list[tuple[AgentData, int]]:
    return [(dataset.agents[a], q) for a, q in pairs]


async def run_benchmark(
    mm: MemoryManager,
    embedder: FixedVectorEmbedder,
    dataset: Dataset,
    *,
    queries: int | None = None,
    warmup: int = 50,
    batch_size: int = 1000,
    progress: Progress | None = None,
    clean: bool = True,
    repeats: int = 1,
    after_ingest: Callable[[], Awaitable[None]] | None = None,
    query_progress: Progress | None = None,
    filtered: bool = False,
    versions: int = 0,
    floor: Floor | None = None,
    nearest: Floor | None = None,
) -> BenchResult:
    """Ingest ``dataset`` through ``mm``, then time retrieval and measure recall.

    The timed passes run ``repeats`` times; in each, every query goes through
    ``retrieve_context``, ``search_memories`` with ``limit=max_episodic_memories`` and with the
    default limit, then ``floor`` and ``nearest`` (if given), back to back. Recall is measured
    on the first pass.
    ``after_ingest`` (untimed) runs between ingest and the queries, for example ``ANALYZE``.
    ``progress`` is called with the memories of each ingested batch, ``query_progress`` with 1
    after each timed call (``3 × queries × repeats`` in all, ``queries × repeats`` more for each
    of ``floor`` and ``nearest``, plus ``len(FILTER_TAGS) × queries × repeats`` with
    ``filtered`` and ``2 × queries × repeats`` with ``versions``).

    ``filtered`` and ``versions`` add the passes described in the module doc, after the
    unfiltered ones.

    ``mm`` must use ``embedder`` and the dataset's threshold. With ``clean`` every agent of the
    dataset is erased first (the benchmark's agent ids start with ``bench-agent-``).
    """
    if versions < 0:
        raise ValueError("versions must be 0 or more")
    if mm.relevance_threshold != dataset.threshold:
        raise ValueError("the manager's relevance_threshold must be the dataset's threshold")
    spec = dataset.spec
    queries = spec.queries if queries is None else queries
    limit = mm.config.max_episodic_memories
    for agent in dataset.agents:
        embedder.add(agent.texts, agent.vectors)
        embedder.add(agent.query_texts, agent.query_vectors)
        if clean:
            await mm.erase_agent(agent.agent_id)

    # The harness's own data (100,000 texts and vectors, their dicts) is static: move it out of
    # the garbage collector's sight. Left in, every full collection walked it, and those pauses
    # became search_memories' p99 (docs/benchmarks.md, "Measurements behind the code"). Objects
    # the store creates from here on (the in-memory store's memories) are still collected.
    gc.freeze()
    try:
        seconds = await ingest(
            mm, dataset, batch_size=batch_size, progress=progress, filtered=filtered
        )
        for agent in dataset.agents:
            for j, (user, assistant) in enumerate(agent.turns):
                await mm.store_turn(
                    agent.agent_id, SESSION_ID, user, assistant, turn_id=f"{agent.agent_id}-t{j}"
                )

        if after_ingest is not None:
            await after_ingest()

        async def retrieve(agent: AgentData, q: int) -> Any:
            return await mm.retrieve_context(
                agent.agent_id, SESSION_ID, agent.query_texts[q], TOKEN_BUDGET
            )

        async def search(agent: AgentData, q: int) -> Any:
            return await mm.search_memories(agent.agent_id, agent.query_texts[q], limit=limit)

        # Warm-up: caches, connection pools, query plans, the in-memory store's matrices.
        for agent, q in _agents_of(dataset, schedule(dataset, warmup)):
            await retrieve(agent, q)
            await search(agent, q)

        async def search_default(agent: AgentData, q: int) -> Any:
            return await mm.search_memories(agent.agent_id, agent.query_texts[q])

        # Every timed call of a query runs back to back with the others of the same query
        # (floor and plain query included), so a busy second of the machine slows them alike
        # and their ratios hold; timed one pass after another, the floor once read 0.15 ms in
        # one run and 12 ms in the next of the same command.
        calls: list[tuple[str, Callable[[AgentData, int], Awaitable[Any]]]] = [
            ("retrieve", retrieve),
            ("search", search),
            ("search_default", search_default),
        ]
        if floor is not None:
            calls.append(("floor", floor.call))
        if nearest is not None:
            calls.append(("nearest", nearest.call))
        runs: dict[str, list[list[float]]] = {name: [] for name, _ in calls}
        context_sizes: list[int] = []
        recalls: list[float] = []
        admitted: list[int] = []
        returned: list[int] = []
        found: list[tuple[str, ...]] = []
        pairs = _agents_of(dataset, schedule(dataset, queries))
        for rep in range(repeats):
            samples: dict[str, list[float]] = {name: [] for name, _ in calls}
            for agent, q in pairs:
                for name, call in calls:
                    t0 = time.perf_counter_ns()
                    out = await call(agent, q)
                    samples[name].append((time.perf_counter_ns() - t0) / 1e6)
                    if rep == 0 and name == "retrieve":
                        context_sizes.append(len(out.episodic_memories))
                    elif rep == 0 and name == "search":
                        # A tuple of strings, not a set: the collector stops tracking such
                        # tuples, whereas 1,000 live sets of 500 ids made every full collection
                        # walk 500,000 entries, pauses that became search_memories' p99
                        # (docs/benchmarks.md).
                        found.append(tuple(h.id for h in out))
                    del out
                    if query_progress is not None:
                        query_progress(1)
            for name, taken in samples.items():
                runs[name].append(taken)
        retrieve_runs, search_runs = runs["retrieve"], runs["search"]
        floor_stats = LatencyStats.of_runs(runs["floor"]) if floor is not None else None
        nearest_stats = LatencyStats.of_runs(runs["nearest"]) if nearest is not None else None

        extra = await _filter_and_version_passes(
            mm, dataset, pairs, found, filtered, versions, repeats, query_progress
        )

        # Stored vectors, normalised exactly as the manager normalised them, for the exact scan.
        stored = {a.agent_id: unit_rows(a.vectors) for a in dataset.agents}
        ties = {a.agent_id: tie_keys(a) for a in dataset.agents}
        # Recall after all timing: numpy's exact scan between timed calls would leave BLAS threads
        # spinning on this 2-core machine and slow the next call down.
        for (agent, q), got in zip(pairs, found, strict=True):
            qv = unit_rows(agent.query_vectors[q : q + 1])[0]
            n_admitted, exact = exact_candidates(
                stored[agent.agent_id], qv, dataset.threshold, limit, ties[agent.agent_id]
            )
            admitted.append(n_admitted)
            returned.append(len(got))
            want = {agent.ids[int(i)] for i in exact}
            recalls.append(len(want.intersection(got)) / len(want) if want else 1.0)

        return BenchResult(
            backend=mm.backend,
            agents=spec.agents,
            per_agent=spec.per_agent,
            dimensions=spec.dimensions,
            threshold=dataset.threshold,
            seed=spec.seed,
            memories=dataset.total_memories,
            ingest_seconds=seconds,
            ingest_rate=dataset.total_memories / seconds if seconds > 0 else math.inf,
            retrieve=LatencyStats.of_runs(retrieve_runs),
            search=LatencyStats.of_runs(search_runs),
            search_default=LatencyStats.of_runs(runs["search_default"]),
            retrieve_floor_ratios=_pass_ratios(retrieve_runs, runs.get("floor")),
            recall_mean=statistics.fmean(recalls),
            recall_min=min(recalls),
            recall_queries=len(recalls),
            admitted_median=statistics.median(admitted),
            admitted_min=min(admitted),
            admitted_max=max(admitted),
            returned_median=statistics.median(returned),
            context_memories_median=statistics.median(context_sizes),
            warmup=warmup,
            repeats=repeats,
            floor_name="" if floor is None else floor.name,
            floor=floor_stats,
            nearest_name="" if nearest is None else nearest.name,
            nearest=nearest_stats,
            **extra,
        )
    finally:
        gc.unfreeze()


def _pass_ratios(runs: list[list[float]], floor: list[list[float]] | None) -> list[float]:
    """Each pass's p50 of ``runs`` ÷ the same pass's p50 of ``floor``."""
    if not floor:
        return []
    return [
        LatencyStats.of(a).p50 / LatencyStats.of(b).p50
        for a, b in zip(runs, floor, strict=True)
        if a and b and LatencyStats.of(b).p50 > 0
    ]


async def _timed_runs(
    call: Callable[[AgentData, int], Awaitable[Any]],
    pairs: list[tuple[AgentData, int]],
    repeats: int,
    query_progress: Progress | None,
) -> tuple[list[list[float]], list[Any]]:
    """``repeats`` timed passes of ``call`` over ``pairs``; returns the samples and pass 1's."""
    runs: list[list[float]] = []
    first: list[Any] = []
    for rep in range(repeats):
        samples: list[float] = []
        for agent, q in pairs:
            t0 = time.perf_counter_ns()
            out = await call(agent, q)
            samples.append((time.perf_counter_ns() - t0) / 1e6)
            if rep == 0:
                first.append(out)
            if query_progress is not None:
                query_progress(1)
        runs.append(samples)
    return runs, first


async def _filter_and_version_passes(
    mm: MemoryManager,
    dataset: Dataset,
    pairs: list[tuple[AgentData, int]],
    found: list[tuple[str, ...]],
    filtered: bool,
    versions: int,
    repeats: int,
    query_progress: Progress | None,
) -> dict[str, Any]:
    """The optional passes of the module doc; returns :class:`BenchResult` fields."""
    out: dict[str, Any] = {}
    limit = mm.config.max_episodic_memories
    if filtered:
        stats: dict[str, LatencyStats] = {}
        share: dict[str, float] = {}
        context: dict[str, float] = {}
        for tag, every in FILTER_TAGS:
            flt = {"tags_any": [tag]}

            async def retrieve(agent: AgentData, q: int, flt: dict[str, Any] = flt) -> Any:
                return await mm.retrieve_context(
                    agent.agent_id, SESSION_ID, agent.query_texts[q], TOKEN_BUDGET, filters=flt
                )

            runs, ctxs = await _timed_runs(retrieve, pairs, repeats, query_progress)
            stats[tag] = LatencyStats.of_runs(runs)
            n = dataset.spec.per_agent
            share[tag] = len(range(0, n, every)) / n
            context[tag] = statistics.median(len(c.episodic_memories) for c in ctxs)
        out.update(retrieve_filtered=stats, filter_share=share, filter_context_median=context)
    if versions:
        updated = 0
        t0 = time.perf_counter()
        for agent in dataset.agents:
            for i in range(1, len(agent.ids), VERSION_EVERY):
                for k in range(versions):
                    await mm.update_memory(
                        agent.agent_id, agent.ids[i], metadata={"bench_version": k + 1}
                    )
            updated += len(range(1, len(agent.ids), VERSION_EVERY))
        elapsed = time.perf_counter() - t0

        async def retrieve_all(agent: AgentData, q: int) -> Any:
            return await mm.retrieve_context(
                agent.agent_id, SESSION_ID, agent.query_texts[q], TOKEN_BUDGET
            )

        async def search_all(agent: AgentData, q: int) -> Any:
            hits = await mm.search_memories(agent.agent_id, agent.query_texts[q], limit=limit)
            return tuple(h.id for h in hits)

        r_runs, _ = await _timed_runs(retrieve_all, pairs, repeats, query_progress)
        s_runs, after = await _timed_runs(search_all, pairs, repeats, query_progress)
        same = sum(set(a) == set(b) for a, b in zip(found, after, strict=True))
        out.update(
            versions=versions,
            versioned_memories=updated,
            update_rate=updated * versions / elapsed if elapsed > 0 else math.inf,
            retrieve_versioned=LatencyStats.of_runs(r_runs),
            search_versioned=LatencyStats.of_runs(s_runs),
            versioned_same_candidates=same / len(found) if found else 1.0,
        )
    return out
