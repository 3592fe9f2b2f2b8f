"""Leave one conversation out, on results small enough to work out by hand."""

from __future__ import annotations

from actrone_pg.evaluation.metrics import QueryResult
from actrone_pg.evaluation.runner import ConfigResult
from actrone_pg.evaluation.selection import leave_one_out


def result(label: str, hits: dict[str, list[bool]]) -> ConfigResult:
    """One question per entry of ``hits[conv]``: found at rank 1 (True) or not at all."""
    out = ConfigResult(label, {}, 0.0)
    for conv, found in hits.items():
        for ok in found:
            out.results.append(
                QueryResult(conv, "x", frozenset({"e"}), ("e",) if ok else ("n",), 0.0)
            )
    return out


def test_each_fold_chooses_on_the_other_conversations() -> None:
    # "fits-c" is best on c alone: chosen only where c is trained on, never when c is held out.
    default = result("default", {"a": [True, False], "b": [True, False], "c": [False, False]})
    fits_c = result("fits-c", {"a": [False, False], "b": [True, False], "c": [True, True]})
    loo = leave_one_out([default, fits_c])
    assert loo is not None
    assert [(f.held_out, f.chosen) for f in loo.folds] == [
        ("a", "fits-c"),  # trained on b + c: fits-c 3/4, default 1/4
        ("b", "fits-c"),  # a + c: fits-c 2/4, default 1/4
        ("c", "default"),  # a + b: default 2/4, fits-c 1/4
    ]
    # Held out: a under fits-c 0/2, b under fits-c 1/2, c under default 0/2.
    assert loo.pooled.recall_at_10 == 1 / 6
    assert loo.baseline_pooled.recall_at_10 == 2 / 6
    assert loo.folds[0].train_objective == 2 * 3 / 4  # recall@10 + MRR, both 3/4


def test_a_tie_keeps_the_earlier_configuration() -> None:
    same = {"a": [True], "b": [False]}
    loo = leave_one_out([result("default", same), result("other", same)])
    assert loo is not None and {f.chosen for f in loo.folds} == {"default"}


def test_one_conversation_has_nothing_to_hold_out() -> None:
    assert leave_one_out([result("default", {"a": [True]})]) is None
    assert leave_one_out([]) is None
