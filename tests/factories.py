"""Builders for turns, memories and search requests used across the test-suite."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import numpy as np

from actrone_pg.models import Memory, Turn
from actrone_pg.ranking import RankingParams, query_terms
from actrone_pg.stores.base import MemoryRecord, SearchRequest, Vector

NOW = datetime(2026, 11, 1, 12, 0, 0, tzinfo=UTC)


def unit(values: Sequence[float]) -> Vector:
    """A float32 unit vector in the direction of ``values``."""
    arr = np.asarray(values, dtype=np.float64)
    return (arr / np.linalg.norm(arr)).astype(np.float32)


def turn(
    agent_id: str = "agent",
    session_id: str = "s1",
    text: str = "hello",
    *,
    turn_id: str | None = None,
    created_at: datetime | None = None,
) -> Turn:
    """A turn whose user and assistant messages are derived from ``text``."""
    return Turn(
        id=turn_id or str(uuid.uuid4()),
        agent_id=agent_id,
        session_id=session_id,
        user_message=f"user: {text}",
        assistant_message=f"assistant: {text}",
        tool_results=None,
        created_at=created_at or datetime.now(UTC),
        token_count=len(text),
    )


def memory(
    agent_id: str,
    memory_id: str,
    content: str,
    *,
    created_at: datetime = NOW,
    embedder: str = "test-embedder",
    session_id: str | None = None,
    tags: tuple[str, ...] = (),
    metadata: dict[str, object] | None = None,
) -> Memory:
    """A memory with sensible defaults."""
    return Memory(
        id=memory_id,
        agent_id=agent_id,
        session_id=session_id,
        content=content,
        content_type="fact",
        importance=0.5,
        tags=tags,
        source="test",
        sensitivity="none",
        created_at=created_at,
        metadata=metadata or {},
        embedder=embedder,
        token_count=-(-len(content) // 4),
    )


def record(
    agent_id: str,
    memory_id: str,
    content: str,
    vector: Sequence[float],
    **kwargs: object,
) -> MemoryRecord:
    """A memory with its (normalised) vector."""
    return MemoryRecord(memory=memory(agent_id, memory_id, content, **kwargs), vector=unit(vector))  # type: ignore[arg-type]


def request(
    agent_id: str,
    query: str,
    vector: Sequence[float],
    *,
    threshold: float = 0.0,
    limit: int = 500,
    embedder: str = "test-embedder",
    params: RankingParams | None = None,
    now: datetime = NOW,
) -> SearchRequest:
    """A search request as the manager would build it."""
    return SearchRequest(
        agent_id=agent_id,
        query=query,
        terms=tuple(query_terms(query)),
        vector=unit(vector),
        embedder=embedder,
        threshold=threshold,
        limit=limit,
        params=params or RankingParams(),
        now=now,
    )


def ago(**kwargs: float) -> datetime:
    """``NOW`` minus a timedelta."""
    return NOW - timedelta(**kwargs)
