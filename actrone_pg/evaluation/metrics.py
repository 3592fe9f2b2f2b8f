"""Scores of evidence retrieval: recall@k, hit@k and reciprocal rank, averaged per category.

All pure functions of a ranked list of ids and the set of relevant ids; no I/O.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["OVERALL", "QueryResult", "Scores", "hit_at", "recall_at", "reciprocal_rank", "score"]

#: The key of the scores over every question.
OVERALL = "overall"


def recall_at(ranked: Sequence[str], relevant: frozenset[str], k: int) -> float:
    """The share of ``relevant`` found among the first ``k`` of ``ranked``."""
    return len(relevant.intersection(ranked[:k])) / len(relevant) if relevant else 0.0


def hit_at(ranked: Sequence[str], relevant: frozenset[str], k: int) -> float:
    """1.0 if any relevant id is among the first ``k``, else 0.0."""
    return 1.0 if relevant.intersection(ranked[:k]) else 0.0


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
    """

    conversation: str
    category: str
    relevant: frozenset[str]
    ranked: tuple[str, ...]
    search_ms: float
    sources: tuple[tuple[str, ...], ...] | None = None

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

    def as_dict(self) -> dict[str, float | int]:
        """The scores as a JSON-ready dict."""
        return {
            "questions": self.questions,
            "recall@5": self.recall_at_5,
            "recall@10": self.recall_at_10,
            "hit@5": self.hit_at_5,
            "mrr": self.mrr,
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
        )
    return out


def _recall(r: QueryResult, first: dict[str, int], k: int) -> float:
    # The same as recall_at(r.ranked, r.relevant, k) for one id per rank.
    return sum(1 for rank in first.values() if rank <= k) / len(r.relevant) if r.relevant else 0.0
