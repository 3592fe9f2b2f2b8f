"""Choosing an embedder's relevance threshold from labelled query-memory pairs (no I/O here).

**The rule.** Given the cosine ``s_i`` of every labelled pair and its label, a threshold ``t``
classifies a pair as relevant when ``s_i >= t`` (the same comparison the admission step makes).
The candidate thresholds are the distinct pair scores, each first rounded *down* to ``decimals``
places (3 by default) so that the published number admits every pair the exact score admitted;
the chosen threshold is the candidate with the highest **F2** (the F-measure that weighs recall
twice as much as precision), and among equal F2 the **highest** candidate (fewest admissions).
Precision, recall, F1 and F2 are reported at that rounded threshold.

Why F2 and not F1: admission only decides which memories the ranking may order. An unrelated
memory admitted is ranked below the relevant ones by the fusion (and costs nothing unless it is
packed); a relevant memory refused is lost for good. On the LoCoMo development set, MiniLM's best-F1
threshold (0.351) gave recall@10 0.626 / MRR 0.454 and its best-F2 threshold (0.267) 0.643 /
0.469, better on every conversation but one (docs/quality.md). The hashing embedder's threshold is
the same under both rules.

F2 only changes when ``t`` crosses a pair's score, so checking every score is exhaustive: no other
threshold scores better.

**Pairs format.** JSON Lines, one object per line: ``{"query": str, "memory": str, "relevant":
true|false}``; or CSV with a header row naming the columns ``query``, ``memory`` and ``relevant``
(``true``/``false``, ``1``/``0`` or ``yes``/``no``). Blank lines and lines starting with ``#`` are
skipped in JSON Lines.
"""

from __future__ import annotations

import csv
import io
import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from actrone_pg.errors import ValidationError

__all__ = [
    "CalibrationResult",
    "LabelledPair",
    "Metrics",
    "choose_threshold",
    "histogram",
    "metrics_at",
    "parse_pairs",
    "summarise",
]

RULE = (
    "threshold = the pair score (rounded down to {decimals} decimals) that maximises F2 "
    "(recall weighed twice) of 'score >= threshold'; ties go to the higher threshold"
)


@dataclass(frozen=True, slots=True)
class LabelledPair:
    """A query, a memory and whether the memory is relevant to the query."""

    query: str
    memory: str
    relevant: bool


@dataclass(frozen=True, slots=True)
class Metrics:
    """Confusion counts and the scores derived from them at one threshold."""

    threshold: float
    true_positives: int
    false_positives: int
    false_negatives: int
    true_negatives: int

    @property
    def precision(self) -> float:
        """Share of admitted pairs that are relevant (1.0 when nothing is admitted)."""
        admitted = self.true_positives + self.false_positives
        return self.true_positives / admitted if admitted else 1.0

    @property
    def recall(self) -> float:
        """Share of relevant pairs that are admitted."""
        relevant = self.true_positives + self.false_negatives
        return self.true_positives / relevant if relevant else 0.0

    @property
    def f1(self) -> float:
        """Harmonic mean of precision and recall (0.0 when either is 0)."""
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    @property
    def f2(self) -> float:
        """F-measure with recall weighed twice: ``5·TP / (5·TP + 4·FN + FP)`` (0.0 without TP).

        From the counts, so that equal scores are equal floats (ties are exact).
        """
        tp = self.true_positives
        return 5 * tp / (5 * tp + 4 * self.false_negatives + self.false_positives) if tp else 0.0


@dataclass(frozen=True, slots=True)
class CalibrationResult:
    """The chosen threshold, its metrics, and the score distributions it came from."""

    metrics: Metrics
    relevant_scores: tuple[float, ...]
    unrelated_scores: tuple[float, ...]
    rule: str

    @property
    def threshold(self) -> float:
        """The chosen threshold."""
        return self.metrics.threshold


def _floor(value: float, decimals: int) -> float:
    factor = 10.0**decimals
    # The small epsilon keeps 0.3 (stored as 0.29999999999999999) from flooring to 0.299.
    return math.floor(value * factor + 1e-9) / factor


def metrics_at(scores: Sequence[float], labels: Sequence[bool], threshold: float) -> Metrics:
    """Confusion counts of the rule ``score >= threshold``."""
    tp = fp = fn = tn = 0
    for s, rel in zip(scores, labels, strict=True):
        admitted = s >= threshold
        if rel and admitted:
            tp += 1
        elif rel:
            fn += 1
        elif admitted:
            fp += 1
        else:
            tn += 1
    return Metrics(threshold, tp, fp, fn, tn)


def choose_threshold(
    scores: Sequence[float], labels: Sequence[bool], *, decimals: int = 3
) -> CalibrationResult:
    """The best-F2 threshold of the module's rule, with its metrics."""
    if len(scores) != len(labels):
        raise ValidationError(f"{len(scores)} scores for {len(labels)} labels")
    if not any(labels):
        raise ValidationError("the pairs need at least one relevant pair to calibrate")
    if all(labels):
        raise ValidationError("the pairs need at least one unrelated pair to calibrate")
    if not all(math.isfinite(s) for s in scores):
        raise ValidationError("scores must be finite numbers")
    best: Metrics | None = None
    for t in sorted({_floor(s, decimals) for s in scores}):
        m = metrics_at(scores, labels, t)
        # Ascending candidates and ">=" hand ties to the higher threshold.
        if best is None or m.f2 >= best.f2:
            best = m
    assert best is not None
    relevant = tuple(s for s, rel in zip(scores, labels, strict=True) if rel)
    unrelated = tuple(s for s, rel in zip(scores, labels, strict=True) if not rel)
    return CalibrationResult(best, relevant, unrelated, RULE.format(decimals=decimals))


def summarise(scores: Sequence[float]) -> dict[str, float]:
    """Count, mean, median, minimum, maximum (and 10th/90th percentiles) of ``scores``."""
    if not scores:
        return {"count": 0}
    ordered = sorted(scores)

    def pct(p: float) -> float:
        # Nearest rank: the smallest score with at least p of the scores at or below it.
        return ordered[max(0, math.ceil(p * len(ordered)) - 1)]

    return {
        "count": len(ordered),
        "mean": statistics.fmean(ordered),
        "median": statistics.median(ordered),
        "min": ordered[0],
        "p10": pct(0.10),
        "p90": pct(0.90),
        "max": ordered[-1],
    }


def histogram(
    relevant: Sequence[float], unrelated: Sequence[float], *, bins: int = 20
) -> list[tuple[float, float, int, int]]:
    """``(low, high, relevant_count, unrelated_count)`` per bin over the observed score range.

    Bins are half-open ``[low, high)`` except the last, which includes its upper edge.
    """
    values = list(relevant) + list(unrelated)
    if not values:
        return []
    lo, hi = min(values), max(values)
    if hi == lo:
        hi = lo + 1e-6
    width = (hi - lo) / bins
    rel_counts = [0] * bins
    unr_counts = [0] * bins

    def index(v: float) -> int:
        return min(bins - 1, int((v - lo) / width))

    for v in relevant:
        rel_counts[index(v)] += 1
    for v in unrelated:
        unr_counts[index(v)] += 1
    return [
        (lo + i * width, lo + (i + 1) * width, rel_counts[i], unr_counts[i]) for i in range(bins)
    ]


_TRUE = {"true", "1", "yes", "y", "t"}
_FALSE = {"false", "0", "no", "n", "f"}


def _label(value: object, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        low = value.strip().lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
    raise ValidationError(f"{where}: 'relevant' must be true or false, got {value!r}")


def _pair(obj: object, where: str) -> LabelledPair:
    if not isinstance(obj, dict):
        raise ValidationError(f"{where}: expected an object with query, memory and relevant")
    missing = [k for k in ("query", "memory", "relevant") if k not in obj]
    if missing:
        raise ValidationError(f"{where}: missing {', '.join(missing)}")
    query, memory = obj["query"], obj["memory"]
    if not isinstance(query, str) or not query.strip():
        raise ValidationError(f"{where}: 'query' must be non-empty text")
    if not isinstance(memory, str) or not memory.strip():
        raise ValidationError(f"{where}: 'memory' must be non-empty text")
    return LabelledPair(query, memory, _label(obj["relevant"], where))


def parse_pairs(text: str, fmt: str = "jsonl", *, source: str = "pairs") -> list[LabelledPair]:
    """Labelled pairs from the text of a JSON Lines (``fmt="jsonl"``) or CSV (``"csv"``) file."""
    pairs: list[LabelledPair] = []
    if fmt == "jsonl":
        for n, line in enumerate(text.splitlines(), 1):
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                continue
            try:
                obj = json.loads(stripped)
            except ValueError as exc:
                raise ValidationError(f"{source}:{n}: not valid JSON ({exc})") from None
            pairs.append(_pair(obj, f"{source}:{n}"))
    elif fmt == "csv":
        reader = csv.DictReader(io.StringIO(text))
        if reader.fieldnames is None or not {"query", "memory", "relevant"} <= set(
            f.strip() for f in reader.fieldnames
        ):
            raise ValidationError(f"{source}: the CSV header must name query, memory, relevant")
        for n, row in enumerate(reader, 2):
            clean = {(k or "").strip(): v for k, v in row.items()}
            pairs.append(_pair(clean, f"{source}:{n}"))
    else:
        raise ValidationError(f"unknown pairs format {fmt!r}; use 'jsonl' or 'csv'")
    if not pairs:
        raise ValidationError(f"{source}: no pairs found")
    return pairs
