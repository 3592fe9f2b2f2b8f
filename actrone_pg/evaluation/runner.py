"""Running the evaluation: every configuration over every conversation, through the public API.

Each conversation becomes an agent: its turns are written with ``inject_memories`` (each turn's
``created_at`` the time it was said, its id the turn's id), then each question is asked with
``search_memories(limit=10)``, which is what a user gets (admission threshold, candidate cap,
ranking of the configuration in force). Texts are embedded once, before anything is timed, and
the vectors reused by every configuration (:class:`CachingEmbedder`), so the search time is the
store's and the ranking's, without the query embedding.

With ``memories="context"`` (or ``"context:C"``) each turn is still one memory, injected with the
C turns before it in its session (1 if omitted) as its ``embedding_context``: the vector carries
them, the stored content stays the turn.

With ``memories="consolidated"`` (or ``"consolidated:N:S"``) the turns are not written as
memories: each session's turns go through the extractive consolidator (windows of N turns, least
sentence score S; its defaults if omitted), as
``consolidate_session`` would write them, and an evidence turn counts as found where a returned
memory's ``source_turn_ids`` contain it.
"""

from __future__ import annotations

import dataclasses
import os
import re
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from actrone_pg.config import ENV_PREFIX, MemoryConfig
from actrone_pg.consolidation import ExtractiveConsolidator
from actrone_pg.embedders import Embedder, as_vectors
from actrone_pg.errors import ConfigurationError
from actrone_pg.evaluation.loader import Conversation, DialogTurn
from actrone_pg.evaluation.metrics import OVERALL, QueryResult, Scores, score
from actrone_pg.models import Turn
from actrone_pg.ranking import analyzer

if TYPE_CHECKING:
    from actrone_pg.manager import MemoryManager

__all__ = [
    "SEARCH_LIMIT",
    "CachingEmbedder",
    "ConfigResult",
    "EvalConfig",
    "EvalReport",
    "build_config",
    "context_of",
    "embedded_texts",
    "parse_overrides",
    "run_eval",
    "total_steps",
    "turn_context",
]

#: Memories each question asks for (recall@10 and MRR are measured on them).
SEARCH_LIMIT = 10
#: The label of the configuration without overrides, always measured first.
DEFAULT_LABEL = "default"

_FIELDS = frozenset(f.name for f in dataclasses.fields(MemoryConfig))


def parse_overrides(spec: str) -> dict[str, str]:
    """``"rrf_weights=1,1,0.3 relevance_threshold=0.3"`` (space or ``;`` apart) as a dict."""
    out: dict[str, str] = {}
    for part in re.split(r"[;\s]+", spec.strip()):
        if not part:
            continue
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigurationError(
                "config", f"expected FIELD=VALUE (e.g. rrf_weights=1,1,0.3), got {part!r}"
            )
        if key not in _FIELDS:
            raise ConfigurationError(
                key, f"unknown setting; valid ones are {', '.join(sorted(_FIELDS))}"
            )
        out[key] = value
    if not out:
        raise ConfigurationError("config", "an empty --config; give FIELD=VALUE pairs")
    return out


def build_config(
    overrides: Mapping[str, str],
    *,
    backend: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> MemoryConfig:
    """The environment's configuration with ``backend`` and the text ``overrides`` on top.

    Values are read exactly as ``ACTRONE_*`` variables are, so a bad one fails the same way,
    naming the field.
    """
    env = dict(os.environ if environ is None else environ)
    if backend is not None:
        env[ENV_PREFIX + "BACKEND"] = backend
    for key, value in overrides.items():
        if key not in _FIELDS:
            raise ConfigurationError(key, "unknown setting")
        env[ENV_PREFIX + key.upper()] = value
    return MemoryConfig.from_env(env)


@dataclass(frozen=True, slots=True)
class EvalConfig:
    """One configuration to measure: its label, the overrides it was built from, the config."""

    label: str
    overrides: Mapping[str, str]
    config: MemoryConfig
    #: "raw" (each turn a memory), "context[:C]" or "consolidated[:N[:S]]" (module docstring).
    memories: str = "raw"


def turn_context(memories: str) -> int | None:
    """The turns of context of ``"raw"`` (0) or ``"context[:C]"`` (C, default 1); ``None`` for
    consolidated memories. A bad value raises :class:`ConfigurationError`."""
    head, _, rest = memories.partition(":")
    if head == "raw" and not rest:
        return 0
    if head != "context":
        consolidation_window(memories)  # raises for anything but consolidated[:N[:S]]
        return None
    try:
        turns = int(rest) if rest else 1
        if turns < 1:
            raise ValueError(memories)
    except ValueError:
        raise ConfigurationError(
            "memories", f"expected 'context' or 'context:C' (C ≥ 1 turns), got {memories!r}"
        ) from None
    return turns


def context_of(
    turns: Sequence[DialogTurn], turns_before: int, *, captions: bool
) -> list[str | None]:
    """Each turn's ``embedding_context``: the ``turns_before`` turns before it in its session."""
    out: list[str | None] = [None] * len(turns)
    previous: dict[str, list[str]] = {}
    # In the order they were said (a JSON Lines file may list them in any order).
    for i in sorted(range(len(turns)), key=lambda i: turns[i].created_at):
        t = turns[i]
        seen = previous.setdefault(t.session, [])
        if seen and turns_before:
            out[i] = "\n".join(seen[-turns_before:])
        seen.append(t.content(captions=captions))
    return out


def embedded_texts(turns: Sequence[DialogTurn], turns_before: int, *, captions: bool) -> list[str]:
    """The texts the manager embeds for ``turns`` written with ``turns_before`` of context."""
    contexts = context_of(turns, turns_before, captions=captions)
    return [
        t.content(captions=captions) if c is None else f"{c}\n{t.content(captions=captions)}"
        for t, c in zip(turns, contexts, strict=True)
    ]


def consolidation_window(memories: str) -> tuple[int, float] | None:
    """``None`` for ``"raw"``, else the window and minimum sentence score of
    ``"consolidated[:N[:S]]"`` (defaults: the extractive consolidator's)."""
    if memories == "raw" or memories.partition(":")[0] == "context":
        return None
    head, *rest = memories.split(":")
    defaults = ExtractiveConsolidator()
    try:
        if head != "consolidated" or len(rest) > 2:
            raise ValueError(memories)
        window = int(rest[0]) if rest else defaults.window_turns
        min_score = float(rest[1]) if len(rest) > 1 else defaults.min_score
        if window < 1:
            raise ValueError(memories)
    except ValueError:
        raise ConfigurationError(
            "memories",
            f"expected 'raw', 'context[:C]' or 'consolidated[:N[:S]]' (N turns a memory, S the "
            f"least sentence score), got {memories!r}",
        ) from None
    return window, min_score


class CachingEmbedder:
    """Wraps an embedder so each distinct text is embedded once, whatever the configuration."""

    def __init__(self, inner: Embedder, batch_size: int = 64) -> None:
        self.inner = inner
        self.name: str = inner.name
        self.dimensions: int = inner.dimensions
        self.relevance_threshold: float | None = getattr(inner, "relevance_threshold", None)
        self._batch = batch_size
        self._cache: dict[str, np.ndarray] = {}

    async def warm(
        self, texts: Sequence[str], on_batch: Callable[[int], None] | None = None
    ) -> None:
        """Embed every text not seen yet, ``batch_size`` at a time (``on_batch(n)`` after each)."""
        todo = [t for t in dict.fromkeys(texts) if t not in self._cache]
        for start in range(0, len(todo), self._batch):
            chunk = todo[start : start + self._batch]
            raw = await self.inner.embed_batch(chunk)
            vectors = as_vectors(raw, len(chunk), self.dimensions, self.name)
            self._cache.update(zip(chunk, vectors, strict=True))
            if on_batch is not None:
                on_batch(len(chunk))

    def vector(self, text: str) -> np.ndarray:
        """The cached vector of ``text`` (embedded by :meth:`warm` before)."""
        return self._cache[text]

    async def embed_batch(self, texts: Sequence[str]) -> list[np.ndarray]:
        """The cached vectors (a text not seen yet is embedded now)."""
        await self.warm(texts)
        return [self._cache[t] for t in texts]


@dataclass
class ConfigResult:
    """Every question's result under one configuration."""

    label: str
    overrides: Mapping[str, str]
    threshold: float
    results: list[QueryResult] = field(default_factory=list)

    def scores(self) -> dict[str, Scores]:
        """Per category and overall."""
        return score(self.results)

    def by_conversation(self) -> dict[str, Scores]:
        """Overall scores of each conversation."""
        groups: dict[str, list[QueryResult]] = {}
        for r in self.results:
            groups.setdefault(r.conversation, []).append(r)
        return {conv: score(rs)[OVERALL] for conv, rs in groups.items()}

    @property
    def p50_search_ms(self) -> float:
        """Median time of one ``search_memories`` call (query embedding excluded)."""
        return statistics.median(r.search_ms for r in self.results) if self.results else 0.0

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready summary."""
        return {
            "label": self.label,
            "overrides": dict(self.overrides),
            "threshold": self.threshold,
            "p50_search_ms": self.p50_search_ms,
            "scores": {k: s.as_dict() for k, s in self.scores().items()},
            "per_conversation": {k: s.as_dict() for k, s in self.by_conversation().items()},
        }


@dataclass
class EvalReport:
    """The result of one run: the data it saw and each configuration's scores."""

    embedder: str
    backend: str
    conversations: list[dict[str, Any]]
    configs: list[ConfigResult]

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready summary."""
        return {
            "embedder": self.embedder,
            "backend": self.backend,
            "search_limit": SEARCH_LIMIT,
            "conversations": self.conversations,
            "configs": [c.as_dict() for c in self.configs],
        }


def _texts(
    conversations: Sequence[Conversation], memories: Sequence[str], *, captions: bool
) -> list[str]:
    """Every text a run embeds: what each kind of memory embeds, and the questions."""
    texts = [t.content(captions=captions) for c in conversations for t in c.turns]
    for turns_before in dict.fromkeys(turn_context(m) for m in memories):
        if turns_before:
            for c in conversations:
                texts += embedded_texts(c.turns, turns_before, captions=captions)
    texts += [q.text for c in conversations for q in c.questions]
    return texts


def total_steps(
    conversations: Sequence[Conversation],
    configs: int,
    *,
    captions: bool,
    memories: Sequence[str] = ("raw",),
) -> int:
    """Units of progress of :func:`run_eval`: texts to embed plus questions asked."""
    texts = set(_texts(conversations, memories, captions=captions))
    return len(texts) + configs * sum(len(c.questions) for c in conversations)


def _agent_id(conv: Conversation) -> str:
    return f"eval-{conv.id}"


async def run_eval(
    conversations: Sequence[Conversation],
    configs: Sequence[EvalConfig],
    embedder: Embedder,
    *,
    captions: bool = True,
    progress: Callable[[int], None] | None = None,
) -> EvalReport:
    """Measure every configuration on every conversation; ``progress(n)`` as work is done."""
    from actrone_pg.manager import MemoryManager

    cached = embedder if isinstance(embedder, CachingEmbedder) else CachingEmbedder(embedder)
    texts = _texts(conversations, [ec.memories for ec in configs], captions=captions)
    await cached.warm(texts, progress)
    out: list[ConfigResult] = []
    backend = configs[0].config.backend if configs else "memory"
    for ec in configs:
        mm = await MemoryManager.create(_own_index(ec.config, configs[0].config), embedder=cached)
        result = ConfigResult(ec.label, ec.overrides, mm.relevance_threshold)
        try:
            for conv in conversations:
                agent = _agent_id(conv)
                session_of = conv.sessions()
                await mm.erase_agent(agent)
                window = consolidation_window(ec.memories)
                turns_before = turn_context(ec.memories)
                if window is None:
                    contexts = context_of(conv.turns, turns_before or 0, captions=captions)
                    await mm.inject_memories(
                        agent,
                        [
                            {
                                "content": t.content(captions=captions),
                                "memory_id": t.id,
                                "session_id": t.session_id,
                                "created_at": t.created_at,
                                "source": "eval",
                                "embedding_context": context,
                            }
                            for t, context in zip(conv.turns, contexts, strict=True)
                        ],
                    )
                else:
                    await _consolidate(mm, agent, conv, *window, captions=captions)
                for q in conv.questions:
                    started = time.perf_counter()
                    hits = await mm.search_memories(agent, q.text, limit=SEARCH_LIMIT)
                    elapsed = (time.perf_counter() - started) * 1000.0
                    result.results.append(
                        QueryResult(
                            conv.id,
                            q.category,
                            q.evidence,
                            tuple(h.id for h in hits),
                            elapsed,
                            None if window is None else tuple(h.source_turn_ids for h in hits),
                            relevant_sessions=frozenset(
                                s for e in q.evidence if (s := session_of.get(e)) is not None
                            ),
                            ranked_sessions=tuple(h.session_id for h in hits),
                        )
                    )
                    if progress is not None:
                        progress(1)
                await mm.erase_agent(agent)
        finally:
            await mm.close()
        out.append(result)
    summary = [
        {"id": c.id, "turns": len(c.turns), "questions": len(c.questions), "skipped": c.skipped}
        for c in conversations
    ]
    return EvalReport(cached.name, backend, summary, out)


def _own_index(config: MemoryConfig, first: MemoryConfig) -> MemoryConfig:
    """``config``, with a schema and key prefix of its own where it indexes terms otherwise than
    the first configuration (``text_analyzer``, ``lexical_dates``): a PostgreSQL schema or a Redis
    prefix records how its terms were built and refuses a store that builds them otherwise."""
    mine = analyzer(config.text_analyzer, dates=config.lexical_dates).index_name
    if config.backend == "memory" or mine == (
        analyzer(first.text_analyzer, dates=first.lexical_dates).index_name
    ):
        return config
    return dataclasses.replace(
        config,
        postgres_schema=f"{config.postgres_schema}_{mine.replace('+', '_')}",
        # '-': a collection of this prefix never matches the pattern of the first's
        qdrant_collection_prefix=f"{config.qdrant_collection_prefix}-{mine.replace('+', '-')}",
    )


async def _consolidate(
    mm: MemoryManager,
    agent: str,
    conv: Conversation,
    window: int,
    min_score: float,
    *,
    captions: bool,
) -> None:
    """Write the conversation as the extractive consolidator turns each session into memories.

    Each thing said becomes a turn whose user message is the line with its speaker's name, so
    the consolidator adds no "User:" label of its own.
    """
    from actrone_pg.consolidation.run import consolidate_turns

    consolidator = ExtractiveConsolidator(
        window_turns=window, min_score=min_score, user_label="", assistant_label=""
    )
    sessions: dict[str, list[Turn]] = {}
    for t in conv.turns:
        session = t.session_id or "session-0"
        sessions.setdefault(session, []).append(
            Turn(t.id, agent, session, t.content(captions=captions), "", None, t.created_at, 0)
        )
    for session, turns in sessions.items():
        await consolidate_turns(mm, consolidator, agent, session, turns)
