"""Leave one conversation out: choose a configuration on the others, score it on the one left out.

A configuration chosen because it scores best on the development set may only fit it. Leave one
out estimates what choosing does on a conversation never seen: for each conversation, the
configuration with the best recall@10 + MRR on every *other* conversation (their questions
pooled) is scored on that one; the held-out scores of all folds, pooled over their questions, are
the estimate. No I/O: it reads the results of one run (:class:`~actrone_pg.evaluation.runner.
ConfigResult`), so every configuration was measured on the same data and vectors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from actrone_pg.evaluation.metrics import OVERALL, QueryResult, Scores, score
from actrone_pg.evaluation.runner import ConfigResult

__all__ = ["Fold", "LeaveOneOut", "leave_one_out", "objective"]


def objective(s: Scores) -> float:
    """What a fold maximises: recall@10 + MRR (finding the evidence, and finding it first)."""
    return s.recall_at_10 + s.mrr


@dataclass(frozen=True, slots=True)
class Fold:
    """One conversation held out: the configuration chosen without it, and their scores on it."""

    held_out: str
    chosen: str
    #: The chosen configuration's recall@10 + MRR on the other conversations.
    train_objective: float
    #: The chosen configuration's scores on the held-out conversation.
    held_out_scores: Scores
    #: The first configuration's (the default's) scores on it, for comparison.
    baseline_scores: Scores


@dataclass(frozen=True, slots=True)
class LeaveOneOut:
    """Every fold, and the held-out scores pooled over the questions of all folds."""

    folds: list[Fold]
    pooled: Scores
    baseline_pooled: Scores
    baseline: str

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready summary."""
        return {
            "objective": "recall@10 + mrr",
            "baseline": self.baseline,
            "pooled": self.pooled.as_dict(),
            "baseline_pooled": self.baseline_pooled.as_dict(),
            "folds": [
                {
                    "held_out": f.held_out,
                    "chosen": f.chosen,
                    "train_objective": f.train_objective,
                    "scores": f.held_out_scores.as_dict(),
                    "baseline_scores": f.baseline_scores.as_dict(),
                }
                for f in self.folds
            ],
        }


def leave_one_out(configs: Sequence[ConfigResult]) -> LeaveOneOut | None:
    """The folds over ``configs`` (the first is the baseline; ties go to the earlier one).

    ``None`` with fewer than two conversations or no configuration: nothing to hold out.
    """
    if not configs:
        return None
    conversations = list(dict.fromkeys(r.conversation for r in configs[0].results))
    if len(conversations) < 2:
        return None
    folds: list[Fold] = []
    pooled: list[QueryResult] = []
    baseline_pooled: list[QueryResult] = []
    for held in conversations:
        best: ConfigResult | None = None
        best_value = float("-inf")
        for c in configs:
            train = [r for r in c.results if r.conversation != held]
            value = objective(score(train)[OVERALL])
            if value > best_value:
                best, best_value = c, value
        assert best is not None
        test = [r for r in best.results if r.conversation == held]
        base = [r for r in configs[0].results if r.conversation == held]
        pooled += test
        baseline_pooled += base
        folds.append(Fold(held, best.label, best_value, score(test)[OVERALL], score(base)[OVERALL]))
    return LeaveOneOut(
        folds, score(pooled)[OVERALL], score(baseline_pooled)[OVERALL], configs[0].label
    )
