"""Token-budget packing (README, "How retrieval works", step 3), without I/O.

The budget is split into fixed shares: ``floor(0.35 × budget)`` for recent turns (L1) and
``floor(0.25 × budget)`` for memories (L2); the rest belongs to the caller's system prompt and
current turn. A share left unused is never handed to the other.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import ROUND_FLOOR, Decimal
from functools import lru_cache
from typing import TypeVar

__all__ = ["Shares", "pack_costs", "pack_turns", "share", "split_budget"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Shares:
    """The L1 and L2 shares of a budget, in tokens."""

    session: int
    episodic: int


def share(budget: int, fraction: float) -> int:
    """``floor(fraction × budget)`` computed exactly (0.29 × 100 is 29, not 28.999…)."""
    value = (Decimal(repr(fraction)) * Decimal(budget)).to_integral_value(rounding=ROUND_FLOOR)
    return int(value)


# A manager asks for the same few budgets call after call; the exact decimal arithmetic is
# worth computing once each (docs/notes/benchmarks.md, "In-memory: where one call's time goes").
@lru_cache(maxsize=256)
def split_budget(budget: int, session_fraction: float, episodic_fraction: float) -> Shares:
    """The two shares of ``budget`` (each floored, computed exactly)."""
    return Shares(
        session=share(budget, session_fraction), episodic=share(budget, episodic_fraction)
    )


def pack_turns(
    newest_first: Sequence[T], cost: Callable[[T], int], limit: int
) -> tuple[list[T], int]:
    """Take turns newest first until the first that does not fit; return them oldest first.

    A conversation has no holes: once a turn is left out, every older one is too.
    """
    taken: list[T] = []
    used = 0
    for item in newest_first:
        c = cost(item)
        if used + c > limit:
            break
        taken.append(item)
        used += c
    taken.reverse()
    return taken, used


def pack_costs(
    costs: Sequence[int], limit: int | None, max_items: int | None = None
) -> tuple[list[int], int]:
    """Take memories in rank order, skipping any that does not fit and trying the next.

    Works on the memories' costs, in rank order; returns the positions taken and their total.
    ``limit=None`` takes every item; ``max_items`` stops after that many are taken. The walk ends
    as soon as even the cheapest item would not fit, rather than trying every one of
    (typically) 500 candidates for a budget that holds a few dozen.
    """
    if limit is None:
        taken = list(range(len(costs) if max_items is None else min(max_items, len(costs))))
        return taken, sum(costs[i] for i in taken)
    # Once the budget left is below every cost nothing more fits: the walk may stop (it changes
    # nothing taken; one min() is cheaper than a suffix minimum per position, docs/benchmarks.md).
    cheapest = min(costs, default=0)
    taken = []
    used = 0
    for i, c in enumerate(costs):
        if used + cheapest > limit or len(taken) == max_items:
            break
        if used + c <= limit:
            taken.append(i)
            used += c
    return taken, used
