"""The manager's base layer: the state every layer shares, and the helpers more than one uses.

:class:`Base` declares the attributes :class:`~actrone_pg.manager.MemoryManager` sets in its
constructor, so that each layer is typed against them; its methods count tokens, embed texts and
give a stored memory the form a read returns.
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from actrone_pg._telemetry import Telemetry
from actrone_pg.config import MemoryConfig
from actrone_pg.consolidation import Consolidator
from actrone_pg.embedders import Embedder, as_vectors
from actrone_pg.errors import ActroneError, ConfigurationError, EmbedderError, ValidationError
from actrone_pg.models import Memory, Vector
from actrone_pg.ranking import RankingParams
from actrone_pg.rerankers import Reranker
from actrone_pg.stores import Store
from actrone_pg.tokens import TokenCounter

__all__ = ["Base", "utc_now"]


class Base:
    """What every layer of the manager shares: its components, its state and a few helpers."""

    # Declared here, set (and explained) in MemoryManager.__init__.
    config: MemoryConfig
    store: Store
    embedder: Embedder
    reranker: Reranker | None
    consolidator: Consolidator | None
    _new_turns: dict[tuple[str, str], int]
    _consolidating: dict[tuple[str, str], asyncio.Task[None]]
    _not_before: dict[tuple[str, str], float]
    _live_until: dict[tuple[str, str], float]
    _count: TokenCounter
    _custom_counter: bool
    _query_cache: OrderedDict[str, Vector]
    _redacted: frozenset[str]
    _closed: bool
    _built: list[object]
    _threshold: float
    _params: RankingParams
    _telemetry: Telemetry

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` by the counter in force."""
        if not isinstance(text, str):
            raise ValidationError(f"text must be a string, got {type(text).__name__}")
        try:
            n = self._count(text)
        except ActroneError:
            raise
        except Exception as exc:
            raise ConfigurationError(
                "token_counter", f"raised {type(exc).__name__}: {exc}"
            ) from exc
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ConfigurationError("token_counter", f"must return a whole number ≥ 0, got {n!r}")
        return n

    def _shown(self, memory: Memory) -> Memory:
        """``memory`` as a read returns it: redacted if its sensitivity is listed (§9.6)."""
        if memory.sensitivity in self._redacted:
            return replace(memory, content=f"[redacted: {memory.sensitivity}]")
        return memory

    def _live(self, memory: Memory | None, now: datetime) -> Memory | None:
        """``memory`` unless it is ``None`` or has expired at ``now``."""
        if memory is None or (memory.expires_at is not None and memory.expires_at <= now):
            return None
        return memory

    def _count_turn(self, user: str, assistant: str, tool_results: list[Any] | None) -> int:
        """A turn's tokens: its two messages and the JSON of its tool results, together."""
        tokens = self.count_tokens(user) + self.count_tokens(assistant)
        if tool_results:
            tokens += self.count_tokens(json.dumps(tool_results))
        return tokens

    async def _embed(self, texts: list[str]) -> list[Vector]:
        size = self.config.embedding_batch_size
        out: list[Vector] = []
        for start in range(0, len(texts), size):
            chunk = texts[start : start + size]
            try:
                raw = await self._telemetry.step(
                    "actrone.embed",
                    self.embedder.embed_batch(chunk),
                    {"actrone.embed.texts": len(chunk)},
                )
            except ActroneError:
                raise
            except Exception as exc:
                raise EmbedderError(
                    f"embedder {self.embedder.name!r} failed: {type(exc).__name__}: {exc}"
                ) from exc
            out.extend(as_vectors(raw, len(chunk), self.embedder.dimensions, self.embedder.name))
        return out


def utc_now() -> datetime:
    """The time now, aware, in UTC: every time the manager writes or compares is one of these."""
    return datetime.now(UTC)
