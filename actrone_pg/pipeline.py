"""The ranking pipeline, without I/O: candidates and statistics in, ranked hits out.

A Python store supplies only what it holds: its candidates as arrays aligned by position
(:class:`Candidates`) and the agent's BM25 statistics (:class:`~actrone_pg.ranking.CorpusStats`).
:func:`search` does the rest, the same way for every such store::

    candidates ──admit──> admitted ──bm25, rank_arrays──> ranked ──pack──> hits + Explain

The rules it applies (tie order, BM25, RRF, the classic blend) are :mod:`actrone_pg.ranking`;
the packing is :func:`actrone_pg.budget.pack_costs`. PostgreSQL renders the same pipeline in SQL
(``hybrid_search.sql``, ``pack_positions.sql``) and is pinned to this one by the parity tests.

A ranking channel is one entry of :data:`actrone_pg.ranking.CHANNELS` (this module derives its
explanations from it), its rank in ``Explain``, one new ``hybrid_search`` copy for the SQL, and
a new input, if it reads one, in :class:`Candidates` and each store's feed of it:
docs/architecture.md lists the files; a filter key is defined in :mod:`actrone_pg.filters` alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from datetime import datetime
from itertools import repeat

import numpy as np
import numpy.typing as npt

from actrone_pg.budget import pack_costs
from actrone_pg.filters import MemoryFilter  # re-exported: the type of SearchRequest.filter
from actrone_pg.models import Explain, Memory, ScoredMemory, Vector
from actrone_pg.ranking import (
    CHANNELS,
    CorpusStats,
    RankingParams,
    bm25,
    nearest_first,
    rank_arrays,
)

__all__ = [
    "NEIGHBOUR_POOL",
    "Candidates",
    "MemoryFilter",
    "PackedSearch",
    "SearchRequest",
    "TermFrequencies",
    "admit",
    "explanation",
    "explains",
    "inherit_from_predecessors",
    "pack_hits",
    "rerank",
    "search",
    "stored_tokens",
]

#: ``(positions, terms)`` -> (frequency of each term in each candidate at ``positions``, as a
#: ``len(terms) × len(positions)`` matrix; each candidate's length in tokens).
TermFrequencies = Callable[
    [npt.NDArray[np.intp], Sequence[str]],
    tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]],
]


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """One L2 search: admission, the three rankings, fusion and packing, for one agent.

    ``budget`` (tokens) and ``max_hits`` bound the hits returned, as
    :func:`~actrone_pg.budget.pack_costs` takes them in rank order, each costing its stored
    ``token_count``; ``None`` for both returns every ranked memory.

    ``filter`` restricts the search to the memories it matches, statistics included (see
    :mod:`actrone_pg.filters`). A memory whose ``expires_at`` is not after ``now`` is never a
    candidate; until the sweeper deletes it, it still counts in the BM25 statistics (of the
    filtered set too), which the sweeper then updates, on every backend alike.
    """

    agent_id: str
    query: str
    terms: tuple[str, ...]
    vector: Vector
    embedder: str
    threshold: float
    limit: int
    params: RankingParams
    now: datetime
    budget: int | None = None
    max_hits: int | None = None
    filter: MemoryFilter | None = None
    #: Whether the caller reads the hits' explanations: ``False`` lets a store return each hit
    #: with ``explain`` ``None`` and skip making them (the PostgreSQL store does: for a
    #: ``retrieve_context`` that shows none they were a large part of the client's decoding,
    #: docs/benchmarks.md, "The client's CPU per call").
    explain: bool = True


@dataclass(frozen=True, slots=True)
class PackedSearch:
    """The ranked memories that fit a request's budget, and how many candidates were ranked."""

    #: Chosen memories, best first, each with its explanation.
    hits: list[ScoredMemory]
    #: How many memories the search ranked: every admitted candidate (``max_episodic_memories``
    #: at most; ``RetrievedContext.candidates_considered``).
    candidates_considered: int
    #: Tokens of the chosen memories.
    tokens: int


@dataclass(frozen=True, slots=True)
class Candidates:
    """A store's candidates for one search, aligned by position, before admission.

    Only the arrays are read for every candidate; ``term_frequencies`` is asked for the admitted
    ones, and ``memories`` only for the hits that fit (building a memory is the expensive part).
    """

    cosine: npt.NDArray[np.float64]
    created_us: npt.NDArray[np.int64]
    #: Integers that order the candidates as their ids compare (see ``ranking.code_point_ranks``).
    id_order: npt.NDArray[np.int64]
    #: Each candidate's stored token count: its cost in the budget.
    tokens: npt.NDArray[np.int64]
    term_frequencies: TermFrequencies
    #: The memories at the given positions, in that order.
    memories: Callable[[list[int]], list[Memory]]
    #: Which candidates may be admitted (the filter and expiry), or ``None`` for all of them.
    allowed: npt.NDArray[np.bool_] | None = None
    #: Each candidate's place in the recency order (``ranking.recency_places``), if the store
    #: keeps it; else the admitted candidates' recency order is sorted for each search.
    recency: npt.NDArray[np.int64] | None = None


def admit(candidates: Candidates, threshold: float, limit: int) -> npt.NDArray[np.intp]:
    """Allowed positions with ``cosine >= threshold``: the nearest ``limit``, nearest first
    (ties newer, then id), which is the dense ranking's order."""
    passes = candidates.cosine >= threshold
    if candidates.allowed is not None:
        passes &= candidates.allowed
    idx = np.flatnonzero(passes)
    if idx.size > 1 or idx.size > limit:
        idx = nearest_first(
            candidates.cosine, candidates.created_us, candidates.id_order, limit, among=idx
        )
    return idx


def search(request: SearchRequest, candidates: Candidates, stats: CorpusStats) -> PackedSearch:
    """Admit, score BM25, rank, fuse and pack ``candidates`` for ``request``.

    ``stats`` covers the agent's whole corpus, or with ``request.filter`` the memories that
    match it (its ``doc_freq`` needs only the query's terms).
    """
    admitted = admit(candidates, request.threshold, request.limit)
    if admitted.size == 0:
        return PackedSearch(hits=[], candidates_considered=0, tokens=0)
    cosine = candidates.cosine[admitted]
    tf, lengths = candidates.term_frequencies(admitted, request.terms)
    doc_freqs = [stats.doc_freq.get(t, 0) for t in request.terms]
    p = request.params
    scores = bm25(tf, lengths, doc_freqs, stats, p.bm25_k1, p.bm25_b)
    # Admitted nearest first, the dense order is theirs; a store's recency places give the
    # recency order by one sort of distinct integers (docs/notes/benchmarks.md, "In-memory:
    # where one call's time goes").
    recent = None if candidates.recency is None else np.argsort(candidates.recency[admitted])
    ranked = rank_arrays(
        candidates.id_order[admitted],
        candidates.created_us[admitted],
        cosine,
        scores,
        request.params,
        request.now,
        recent=recent,
        orders={"dense": np.arange(admitted.size)},
    )
    # Packing walks a plain list: indexing numpy arrays element by element costs ~10× more.
    costs = candidates.tokens[admitted[ranked.order]].tolist()
    taken, used = pack_costs(costs, request.budget, request.max_hits)
    # The chosen hits' values, gathered by numpy and turned into lists once.
    chosen = ranked.order[np.asarray(taken, dtype=np.intp)]
    memories = candidates.memories(admitted[chosen].tolist())
    explained = explains(
        cosine=cosine[chosen].tolist(),
        bm25=scores[chosen].tolist(),
        ranks={name: rank[chosen].tolist() for name, rank in ranked.ranks.items()},
        fused_score=ranked.score[chosen].tolist(),
    )
    hits = [ScoredMemory(m, e) for m, e in zip(memories, explained, strict=True)]
    return PackedSearch(hits=hits, candidates_considered=len(costs), tokens=used)


def explains(
    *,
    cosine: Sequence[float],
    bm25: Sequence[float | None],
    ranks: Mapping[str, Sequence[int | None]],
    fused_score: Sequence[float],
) -> list[Explain]:
    """The explanations of hits given column by column, by name (one entry per hit, in order).

    ``ranks`` holds each channel's ranks by its name (:data:`~actrone_pg.ranking.CHANNELS`),
    each the ``Explain`` field of :attr:`~actrone_pg.ranking.Channel.field`. A rank of 0 or
    ``None`` and a BM25 of 0 or ``None`` mean "absent from that ranking".
    """
    n = len(cosine)
    given: dict[str, Sequence[float | int | None]] = {
        "cosine": cosine,
        "fused_score": fused_score,
        "bm25": [b if b is not None and b > 0.0 else None for b in bm25],
        **{c.field: [r or None for r in ranks[c.name]] for c in CHANNELS},
    }
    # Column by column, then each Explain from positional arguments in field order: keyword
    # arguments cost several times more per hit (docs/notes/benchmarks.md, "In-memory: where one
    # call's time goes"). A field no column gives keeps its default, None.
    columns = [given.get(name, repeat(None, n)) for name in _EXPLAIN_FIELDS]
    return [Explain(*row) for row in zip(*columns, strict=True)]


#: ``Explain``'s fields in the order its constructor takes them.
_EXPLAIN_FIELDS = tuple(f.name for f in fields(Explain))


def pack_hits(
    hits: list[ScoredMemory],
    cost: Callable[[ScoredMemory], int],
    budget: int | None,
    max_hits: int | None = None,
) -> PackedSearch:
    """Ranked ``hits`` packed by :func:`~actrone_pg.budget.pack_costs`, each costing ``cost``.

    For hits whose cost or order the caller changes after the store ranked them (a custom token
    counter, a reranker); ``candidates_considered`` is then ``len(hits)``.
    """
    taken, used = pack_costs([cost(h) for h in hits], budget, max_hits)
    return PackedSearch(hits=[hits[i] for i in taken], candidates_considered=len(hits), tokens=used)


def stored_tokens(hit: ScoredMemory) -> int:
    """A hit's cost in the budget: the token count stored with its memory."""
    return hit.memory.token_count


def explanation(hit: ScoredMemory) -> Explain:
    """``hit``'s explanation, which a search asked without explanations leaves out
    (:attr:`SearchRequest.explain`)."""
    if hit.explain is None:
        raise ValueError("the hits were searched without their explanations (explain=False)")
    return hit.explain


def rerank(hits: Sequence[ScoredMemory], scores: Sequence[float]) -> list[ScoredMemory]:
    """``hits`` ordered by a reranker's ``scores`` (one per hit), best first.

    The sort is stable: equal rerank scores keep their fused order.
    """
    order = sorted(range(len(hits)), key=lambda i: -scores[i])
    return [
        ScoredMemory(
            memory=hits[i].memory, explain=replace(explanation(hits[i]), rerank_score=scores[i])
        )
        for i in order
    ]


#: How many of the fused ranking's best hits :func:`inherit_from_predecessors` looks at: the hits
#: a predecessor can lift, and the predecessors they are lifted by (measured: docs/notes/quality.md,
#: "Round 4"; looking at every candidate gains little more).
NEIGHBOUR_POOL = 100


def inherit_from_predecessors(hits: Sequence[ScoredMemory], weight: float) -> list[ScoredMemory]:
    """``hits`` (best first) reordered so each scores at least ``weight`` × its predecessor's.

    A hit's predecessor is the hit of the same session written just before it: the previous one
    when the session's hits are ordered by ``created_at``, then id. A hit without a session has
    none. Its score becomes ``max(fused_score, weight × predecessor's fused_score)`` (the
    predecessor's own score: nothing is inherited twice over); where the inherited part is the
    larger, ``explain.neighbour_score`` holds it. Why: in a conversation the turn that answers
    often shares few words with the question, which the turn before it (what it answers) names
    ("Did you finish the painting?" / "Yes! It took me a week."). The order is the new score
    descending, then newer first, then id, the ranking's tie rule. ``weight`` 0 changes nothing.
    """
    if weight <= 0.0 or len(hits) < 2:
        return list(hits)
    memories = [h.memory for h in hits]
    scores = [explanation(h).fused_score for h in hits]
    sessions: dict[str, list[int]] = {}
    for i, m in enumerate(memories):
        if m.session_id is not None:
            sessions.setdefault(m.session_id, []).append(i)
    inherited: dict[int, float] = {}
    for members in sessions.values():
        if len(members) < 2:
            continue
        members.sort(key=lambda i: (memories[i].created_at, memories[i].id))
        for before, i in zip(members, members[1:], strict=False):
            lifted = weight * scores[before]
            if lifted > scores[i]:
                inherited[i] = lifted
    if not inherited:
        return list(hits)
    final = [inherited.get(i, s) for i, s in enumerate(scores)]
    # Id ascending, then (stable) score and time descending: the ranking's tie rule.
    order = sorted(range(len(hits)), key=lambda i: memories[i].id)
    order.sort(key=lambda i: (final[i], memories[i].created_at), reverse=True)
    return [
        ScoredMemory(memories[i], replace(explanation(hits[i]), neighbour_score=inherited[i]))
        if i in inherited
        else hits[i]
        for i in order
    ]
