"""Token counting: the default heuristic and the type of a pluggable counter."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["TokenCounter", "heuristic_token_count"]

#: A callable that returns the number of tokens ``text`` takes in the caller's model.
TokenCounter = Callable[[str], int]


def heuristic_token_count(text: str) -> int:
    """``ceil(len(text) / 4)``: about four characters a token for English text."""
    return -(-len(text) // 4)
