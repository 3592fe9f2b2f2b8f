"""What every collaborator of the manager shares: its components, the rules in force, helpers.

:class:`ManagerContext` is declared and set here, once, by its constructor; the manager builds
one and hands it to each collaborator (:mod:`actrone_pg._manager`). Its methods count tokens,
embed texts and give a stored memory the form a read returns.
"""

from __future__ import annotations

import json
from contextvars import ContextVar
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from actrone_pg._guard import calling
from actrone_pg._telemetry import Telemetry, create_telemetry
from actrone_pg.config import MemoryConfig
from actrone_pg.consolidation import Consolidator
from actrone_pg.embedders import Embedder, as_vectors
from actrone_pg.errors import ActroneError, ConfigurationError, ValidationError
from actrone_pg.models import Memory, Vector
from actrone_pg.ranking import DEFAULT_RELEVANCE_THRESHOLD, RankingParams
from actrone_pg.rerankers import Reranker
from actrone_pg.stores import Store
from actrone_pg.stores.base import Fence
from actrone_pg.tokens import TokenCounter, heuristic_token_count

__all__ = ["ManagerContext", "utc_now", "write_fence"]

#: The lock the running task writes under, if any: a consolidation sets it to the agent's
#: maintenance lock for the memory writes it makes through inject_memories and update_memory,
#: and the store refuses them once that lock is gone (erase_agent deletes it).
write_fence: ContextVar[Fence | None] = ContextVar("actrone_write_fence", default=None)


class ManagerContext:
    """A manager's components and the rules derived from its config, shared by its collaborators.

    Nothing here changes after construction: the state that does (the query cache, the
    consolidation schedule) belongs to the collaborator that keeps it.
    """

    __slots__ = (
        "config",
        "store",
        "embedder",
        "reranker",
        "consolidator",
        "count",
        "custom_counter",
        "redacted",
        "threshold",
        "params",
        "telemetry",
    )

    def __init__(
        self,
        config: MemoryConfig,
        store: Store,
        embedder: Embedder,
        reranker: Reranker | None,
        token_counter: TokenCounter | None,
        consolidator: Consolidator | None,
    ) -> None:
        self.config = config
        self.store = store
        self.embedder = embedder
        self.reranker = reranker
        self.consolidator = consolidator
        self.count: TokenCounter = token_counter or heuristic_token_count
        #: A custom counter recounts what a store packs by stored token counts (retrieval).
        self.custom_counter = token_counter is not None
        #: The sensitivities a read returns redacted (spec §9.6).
        self.redacted = frozenset(config.redact_sensitivities)
        threshold = config.relevance_threshold
        if threshold is None:
            threshold = embedder.relevance_threshold
        if threshold is None:
            threshold = DEFAULT_RELEVANCE_THRESHOLD
        self.threshold = float(threshold)
        self.params = RankingParams(
            hybrid=config.hybrid_retrieval,
            rrf_k=config.rrf_k,
            rrf_weights=config.rrf_weights,
            relevance_weight=config.relevance_weight,
            recency_weight=config.recency_weight,
            bm25_k1=config.bm25_k1,
            bm25_b=config.bm25_b,
        )
        self.telemetry: Telemetry = create_telemetry(
            config, backend=store.backend, embedder=embedder.name, threshold=self.threshold
        )

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` by the counter in force."""
        if not isinstance(text, str):
            raise ValidationError(f"text must be a string, got {type(text).__name__}")
        try:
            n = self.count(text)
        except ActroneError:
            raise
        except Exception as exc:
            raise ConfigurationError(
                "token_counter", f"raised {type(exc).__name__}: {exc}"
            ) from exc
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ConfigurationError("token_counter", f"must return a whole number ≥ 0, got {n!r}")
        return n

    def shown(self, memory: Memory, **changes: Any) -> Memory:
        """``memory`` as a read returns it, with ``changes``: redacted if its sensitivity is listed.

        The one rule of redaction (spec §9.6): every read that returns a memory passes here.
        """
        if memory.sensitivity in self.redacted:
            changes["content"] = f"[redacted: {memory.sensitivity}]"
        return replace(memory, **changes) if changes else memory

    def live(self, memory: Memory | None, now: datetime) -> Memory | None:
        """``memory`` unless it is ``None`` or has expired at ``now``."""
        if memory is None or (memory.expires_at is not None and memory.expires_at <= now):
            return None
        return memory

    def count_turn(self, user: str, assistant: str, tool_results: list[Any] | None) -> int:
        """A turn's tokens: its two messages and the JSON of its tool results, together."""
        tokens = self.count_tokens(user) + self.count_tokens(assistant)
        if tool_results:
            tokens += self.count_tokens(json.dumps(tool_results))
        return tokens

    async def embed(self, texts: list[str]) -> list[Vector]:
        """The vectors of ``texts``, in batches of ``embedding_batch_size``."""
        size = self.config.embedding_batch_size
        out: list[Vector] = []
        for start in range(0, len(texts), size):
            chunk = texts[start : start + size]
            with calling("embedder", self.embedder.name):
                raw = await self.telemetry.step(
                    "actrone.embed",
                    self.embedder.embed_batch(chunk),
                    {"actrone.embed.texts": len(chunk)},
                )
            out.extend(as_vectors(raw, len(chunk), self.embedder.dimensions, self.embedder.name))
        return out


def utc_now() -> datetime:
    """The time now, aware, in UTC: every time the manager writes or compares is one of these."""
    return datetime.now(UTC)
