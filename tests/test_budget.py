"""Budget packing (docs/retrieval.md, step 3)."""

from __future__ import annotations

import random

from actrone_pg.budget import pack_costs, pack_turns, split_budget


def test_split_leaves_forty_percent_to_the_caller() -> None:
    s = split_budget(1000, 0.35, 0.25)
    assert (s.session, s.episodic) == (350, 250)


def test_first_turn_that_does_not_fit_ends_l1() -> None:
    newest_first = [("t5", 10), ("t4", 10), ("t3", 50), ("t2", 1), ("t1", 1)]
    taken, used = pack_turns(newest_first, lambda t: t[1], 30)
    # t3 does not fit; t2 and t1 would, but a conversation has no holes
    assert [t[0] for t in taken] == ["t4", "t5"]  # oldest first
    assert used == 20


def test_memory_too_large_is_skipped_and_the_next_taken() -> None:
    # m1 20, m2 100, m3 30, m4 1
    assert pack_costs([20, 100, 30, 1], 51) == ([0, 2, 3], 51)


def test_budget_of_one_token() -> None:
    s = split_budget(1, 0.35, 0.25)
    assert (s.session, s.episodic) == (0, 0)
    assert pack_turns([("t", 1)], lambda t: t[1], s.session) == ([], 0)
    assert pack_costs([1], s.episodic) == ([], 0)


def test_zero_cost_items_fit_in_an_empty_share() -> None:
    assert pack_costs([0], 0) == ([0], 0)


def test_a_count_limit_stops_after_that_many_and_no_budget_takes_the_first() -> None:
    assert pack_costs([20, 100, 30, 1], 51, max_items=2) == ([0, 2], 50)
    assert pack_costs([20, 100, 30, 1], None, max_items=3) == ([0, 1, 2], 150)
    assert pack_costs([20, 100], None) == ([0, 1], 120)
    assert pack_costs([5, 5], 100, max_items=0) == ([], 0)


def test_pack_costs_stopping_early_takes_what_trying_every_item_takes() -> None:
    def every_item(costs: list[int], limit: int) -> tuple[list[int], int]:
        taken, used = [], 0
        for i, c in enumerate(costs):
            if used + c <= limit:
                taken.append(i)
                used += c
        return taken, used

    rng = random.Random(3)
    for _ in range(2000):
        costs = [rng.choice([0, 1, 2, 5, 30, 200]) for _ in range(rng.randint(0, 40))]
        limit = rng.choice([0, 1, 7, 60, 400, 10_000])
        assert pack_costs(costs, limit) == every_item(costs, limit), (costs, limit)
        cap = rng.randint(0, 5)
        want, _ = every_item(costs, limit)
        got, used = pack_costs(costs, limit, cap)
        assert got == want[:cap] and used == sum(costs[i] for i in got)
