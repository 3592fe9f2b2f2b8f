"""The threshold rule of actrone_pg.calibration, on scores worked out by hand."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from actrone_pg import ValidationError
from actrone_pg.calibration import (
    choose_threshold,
    histogram,
    metrics_at,
    parse_pairs,
    summarise,
)

# Scores end in 5 in the 4th decimal so rounding down to 3 decimals is never a float accident.
SCORES = [0.9125, 0.8125, 0.7125, 0.6125, 0.5125, 0.3125]
LABELS = [True, False, True, True, False, False]


def test_best_f2_threshold_by_hand() -> None:
    # F2 = 5 TP / (5 TP + 4 FN + FP). t=0.912: TP 1, FN 2: 5/13 | t=0.812: FP 1: 5/14 |
    # t=0.712: TP 2, FN 1, FP 1: 10/15 | t=0.612: TP 3, FP 1: 15/16 (best; F1 6/7, also best) |
    # t=0.512: FP 2: 15/17 | t=0.312: FP 3: 15/18
    r = choose_threshold(SCORES, LABELS)
    assert r.threshold == 0.612
    assert (r.metrics.true_positives, r.metrics.false_positives) == (3, 1)
    assert (r.metrics.false_negatives, r.metrics.true_negatives) == (0, 2)
    assert r.metrics.precision == 0.75
    assert r.metrics.recall == 1.0
    assert r.metrics.f1 == pytest.approx(6 / 7)
    assert r.metrics.f2 == 15 / 16
    assert r.relevant_scores == (0.9125, 0.7125, 0.6125)


def test_recall_weighs_twice() -> None:
    # t=0.9: P 1, R .5 (F1 2/3, F2 5/9); t=0.6: P .5, R 1 (F1 2/3, F2 5/6): F2 takes the lower.
    r = choose_threshold([0.9, 0.8, 0.7, 0.6], [True, False, False, True])
    assert r.threshold == 0.6
    assert r.metrics.f2 == pytest.approx(5 / 6)


def test_ties_go_to_the_higher_threshold() -> None:
    # t=0.9: TP 1, FN 1: F2 5/9; t=0.05: TP 2, FP 8: F2 10/18 = 5/9 -> the tie goes to 0.9.
    scores = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.05]
    r = choose_threshold(scores, [True] + [False] * 8 + [True])
    assert r.threshold == 0.9
    assert r.metrics.f2 == 5 / 9


def test_threshold_is_rounded_down_and_admits_its_pair() -> None:
    r = choose_threshold([0.45678, 0.1], [True, False], decimals=2)
    assert r.threshold == 0.45
    assert metrics_at([0.45678], [True], 0.45).true_positives == 1


def test_admission_is_score_at_or_above() -> None:
    m = metrics_at([0.5, 0.49999], [True, True], 0.5)
    assert (m.true_positives, m.false_negatives) == (1, 1)


def test_degenerate_inputs_are_rejected() -> None:
    with pytest.raises(ValidationError, match="relevant"):
        choose_threshold([0.1, 0.2], [False, False])
    with pytest.raises(ValidationError, match="unrelated"):
        choose_threshold([0.1], [True])
    with pytest.raises(ValidationError, match="finite"):
        choose_threshold([float("nan"), 0.2], [True, False])


def test_summary_and_histogram() -> None:
    s = summarise([0.1, 0.2, 0.3, 0.4])
    assert (s["count"], s["median"], s["min"], s["max"]) == (4, 0.25, 0.1, 0.4)
    assert s["mean"] == pytest.approx(0.25)
    rows = histogram([0.0, 1.0], [0.5, 0.5, 0.2], bins=2)
    assert [(r[2], r[3]) for r in rows] == [(1, 1), (1, 2)]  # 0.5 opens the upper bin
    assert rows[0][0] == 0.0 and rows[-1][1] == 1.0


def test_parse_jsonl_and_csv() -> None:
    jsonl = '{"query": "q", "memory": "m", "relevant": true}\n\n# note\n' + json.dumps(
        {"query": "q2", "memory": "m2", "relevant": 0}
    )
    pairs = parse_pairs(jsonl, "jsonl")
    assert [(p.query, p.relevant) for p in pairs] == [("q", True), ("q2", False)]
    csv_text = 'query,memory,relevant\nq,"m, with comma",yes\nq,m2,false\n'
    pairs = parse_pairs(csv_text, "csv")
    assert [(p.memory, p.relevant) for p in pairs] == [("m, with comma", True), ("m2", False)]


def test_parse_errors_name_the_line() -> None:
    with pytest.raises(ValidationError, match="pairs:2: 'relevant' must be true or false"):
        parse_pairs(
            '{"query":"q","memory":"m","relevant":true}\n'
            '{"query":"q","memory":"m","relevant":"maybe"}',
            "jsonl",
        )
    with pytest.raises(ValidationError, match="missing memory"):
        parse_pairs('{"query":"q","relevant":true}', "jsonl")
    with pytest.raises(ValidationError, match="header"):
        parse_pairs("a,b\n1,2\n", "csv")


def test_the_shipped_set_has_48_relevant_and_528_unrelated_pairs() -> None:
    text = resources.files("actrone_pg").joinpath("data/calibration.jsonl").read_text("utf-8")
    pairs = parse_pairs(text, "jsonl")
    assert sum(p.relevant for p in pairs) == 48
    assert sum(not p.relevant for p in pairs) == 528
    queries = {p.query for p in pairs}
    assert len(queries) == 48
    for q in queries:  # each query: one relevant memory and 11 unrelated ones, all distinct
        mine = [p for p in pairs if p.query == q]
        assert sum(p.relevant for p in mine) == 1 and len({p.memory for p in mine}) == 12


def test_every_public_function_is_exported() -> None:
    # A public function outside __all__ is used by nobody (split_labels was such dead code).
    import inspect

    from actrone_pg import calibration

    defined = {
        name
        for name, obj in vars(calibration).items()
        if inspect.isfunction(obj)
        and obj.__module__ == calibration.__name__
        and not name.startswith("_")
    }
    assert defined <= set(calibration.__all__)
