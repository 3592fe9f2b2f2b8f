"""Scores of evidence retrieval: recall@k, hit@k and reciprocal rank, averaged per category.

Session recall@k (spec §11) is the share of the sessions holding evidence that are among the
sessions of the first k memories returned, session hit@k whether any of them is: the coarser
measures some systems publish for LoCoMo (docs/quality.md says which).

All pure functions of a ranked list of ids and the set of relevant ids; no I/O.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "OVERALL",
    "QueryResult",
    "Scores",
    "hit_at",
    "recall_at",
    "reciprocal_rank",
    "score",
    "session_recall_at",
]

#: The key of the scores over every question.
OVERALL = "overall"


def recall_at(ranked: Sequence[str], relevant: frozenset[str], k: int) -> float:
    """The share of ``relevant`` found among the first ``k`` of ``ranked``."""
    return len(relevant.intersection(ranked[:k])) / len(relevant) if relevant else 0.0


def hit_at(ranked: Sequence[str], relevant: frozenset[str], k: int) -> float:
    """1.0 if any relevant id is among the first ``k``, else 0.0."""
    return 1.0 if relevant.intersection(ranked[:k]) else 0.0


def session_recall_at(
    ranked_sessions: Sequence[str | None], relevant_sessions: frozenset[str], k: int
) -> float:
    """The share of ``relevant_sessions`` among the sessions of the first ``k`` memories."""
    if not relevant_sessions:
        return 0.0
    return len(relevant_sessions.intersection(ranked_sessions[:k])) / len(relevant_sessions)


def reciprocal_rank(ranked: Sequence[str], relevant: frozenset[str]) -> float:
    """1 / the 1-based position of the first relevant id; 0.0 if none was returned."""
    for i, item in enumerate(ranked, 1):
        if item in relevant:
            return 1.0 / i
    return 0.0


@dataclass(frozen=True, slots=True)
class QueryResult:
    """What one question got: the ranked ids returned and how long the search took.

    ``sources``, when given, holds each returned memory's source turn ids (consolidated
    memories): the scores then count an evidence turn as found at the rank of the first memory
    that came from it.

    ``relevant_sessions`` are the sessions of the evidence turns, ``ranked_sessions`` the
    session of each returned memory (``None`` for one without); both empty where unknown.
    """

    conversation: str
    category: str
    relevant: frozenset[str]
    ranked: tuple[str, ...]
    search_ms: float
    sources: tuple[tuple[str, ...], ...] | None = None
    relevant_sessions: frozenset[str] = frozenset()
    ranked_sessions: tuple[str | None, ...] = ()

    def first_ranks(self) -> dict[str, int]:
        """Each relevant id found, with the 1-based rank where it was first found."""
        found: dict[str, int] = {}
        groups = self.sources if self.sources is not None else tuple((i,) for i in self.ranked)
        for rank, ids in enumerate(groups, 1):
            for i in ids:
                if i in self.relevant and i not in found:
                    found[i] = rank
        return found


@dataclass(frozen=True, slots=True)
class Scores:
    """Means over a set of questions."""

    questions: int
    recall_at_5: float
    recall_at_10: float
    hit_at_5: float
    mrr: float
    session_recall_at_5: float = 0.0
    session_recall_at_10: float = 0.0
    session_hit_at_10: float = 0.0

    def as_dict(self) -> dict[str, float | int]:
        """The scores as a JSON-ready dict."""
        return {
            "questions": self.questions,
            "recall@5": self.recall_at_5,
            "recall@10": self.recall_at_10,
            "hit@5": self.hit_at_5,
            "mrr": self.mrr,
            "session_recall@5": self.session_recall_at_5,
            "session_recall@10": self.session_recall_at_10,
            "session_hit@10": self.session_hit_at_10,
        }


def _mean(values: Iterable[float]) -> float:
    items = list(values)
    return statistics.fmean(items) if items else 0.0


def score(results: Sequence[QueryResult]) -> dict[str, Scores]:
    """Scores per category (sorted by name) and :data:`OVERALL` (every question counts once)."""
    groups: dict[str, list[QueryResult]] = {}
    for r in results:
        groups.setdefault(r.category, []).append(r)
    out = {}
    for name, rs in [*sorted(groups.items()), (OVERALL, list(results))]:
        firsts = [(r, r.first_ranks()) for r in rs]
        out[name] = Scores(
            questions=len(rs),
            recall_at_5=_mean(_recall(r, f, 5) for r, f in firsts),
            recall_at_10=_mean(_recall(r, f, 10) for r, f in firsts),
            hit_at_5=_mean(1.0 if any(k <= 5 for k in f.values()) else 0.0 for r, f in firsts),
            mrr=_mean(1.0 / min(f.values()) if f else 0.0 for r, f in firsts),
            session_recall_at_5=_mean(
                session_recall_at(r.ranked_sessions, r.relevant_sessions, 5) for r in rs
            ),
            session_recall_at_10=_mean(
                session_recall_at(r.ranked_sessions, r.relevant_sessions, 10) for r in rs
            ),
            session_hit_at_10=_mean(
                1.0 if r.relevant_sessions.intersection(r.ranked_sessions[:10]) else 0.0 for r in rs
            ),
        )
    return out


def _recall(r: QueryResult, first: dict[str, int], k: int) -> float:
    # The same as recall_at(r.ranked, r.relevant, k) for one id per rank.
    return sum(1 for rank in first.values() if rank <= k) / len(r.relevant) if r.relevant else 0.0
