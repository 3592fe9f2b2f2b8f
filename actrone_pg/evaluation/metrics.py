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
    """What one question got: the ranked ids returned and how long the search took."""

    conversation: str
    category: str
    relevant: frozenset[str]
    ranked: tuple[str, ...]
    search_ms: float


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
        out[name] = Scores(
            questions=len(rs),
            recall_at_5=_mean(recall_at(r.ranked, r.relevant, 5) for r in rs),
            recall_at_10=_mean(recall_at(r.ranked, r.relevant, 10) for r in rs),
            hit_at_5=_mean(hit_at(r.ranked, r.relevant, 5) for r in rs),
            mrr=_mean(reciprocal_rank(r.ranked, r.relevant) for r in rs),
        )
    return out
