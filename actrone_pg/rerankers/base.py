"""What a reranker is: anything that scores (query, text) pairs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = ["Reranker"]


@runtime_checkable
class Reranker(Protocol):
    """Anything that scores (query, text) pairs; higher means more relevant."""

    async def score(self, query: str, texts: Sequence[str]) -> Any:
        """One score per text."""
