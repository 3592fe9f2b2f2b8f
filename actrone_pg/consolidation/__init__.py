"""Conversations become memories (spec §9.1): consolidators and how the manager runs them.

``create_consolidator(config)`` builds the configured one: :class:`ExtractiveConsolidator` (the
default, no service), :class:`~actrone_pg.consolidation.llm.LLMConsolidator` (an OpenAI-compatible
chat model, the ``[openai]`` extra) or ``None`` for ``consolidator="none"``. Any object with a
``name`` and an ``async consolidate(turns, context)`` method is a consolidator
(:class:`Consolidator`); pass your own to ``MemoryManager.create(consolidator=...)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from actrone_pg.consolidation.base import (
    ConsolidatedMemory,
    ConsolidationContext,
    Consolidator,
)
from actrone_pg.consolidation.extractive import ExtractiveConsolidator

if TYPE_CHECKING:
    from actrone_pg.config import MemoryConfig

__all__ = [
    "ConsolidatedMemory",
    "ConsolidationContext",
    "Consolidator",
    "ExtractiveConsolidator",
    "create_consolidator",
]


def create_consolidator(config: MemoryConfig) -> Consolidator | None:
    """The consolidator ``config.consolidator`` names (``None`` for ``"none"``)."""
    if config.consolidator == "none":
        return None
    if config.consolidator == "llm":
        from actrone_pg.consolidation.llm import LLMConsolidator

        assert config.consolidator_api_url is not None and config.consolidator_model is not None
        return LLMConsolidator(
            api_url=config.consolidator_api_url,
            model=config.consolidator_model,
            api_key=config.consolidator_api_key,
            timeout=config.consolidator_timeout,
            retries=config.consolidator_retries,
        )
    return ExtractiveConsolidator()
