"""Rerankers: rescore the top of the fused ranking with a model reading query and memory together.

``create_reranker(config)`` builds the configured cross-encoder (``rerank_model``: a hub id such as
the default ``Xenova/ms-marco-MiniLM-L-6-v2``, or a directory with ``model.onnx`` and
``tokenizer.json``). It fails at once, with :class:`~actrone_pg.errors.ModelNotAvailableError` or
:class:`~actrone_pg.errors.MissingDependencyError`, when the model or the ``[onnx]`` extra is
missing: ``MemoryManager.create()`` calls it, so a missing model is an error at start-up, never a
silent fallback to unreranked results.

Any object with ``async score(query, texts) -> list[float]`` is a reranker; pass it to
``MemoryManager.create(reranker=...)`` to use it as is.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from actrone_pg.rerankers.base import Reranker

if TYPE_CHECKING:
    from actrone_pg.config import MemoryConfig
    from actrone_pg.rerankers.cross_encoder import CrossEncoderReranker

__all__ = ["CrossEncoderReranker", "Reranker", "create_reranker"]


def __getattr__(name: str) -> Any:
    if name == "CrossEncoderReranker":
        return importlib.import_module("actrone_pg.rerankers.cross_encoder").CrossEncoderReranker
    raise AttributeError(f"module 'actrone_pg.rerankers' has no attribute {name!r}")


def create_reranker(config: MemoryConfig) -> Reranker:
    """The cross-encoder ``config.rerank_model`` names, loaded now (errors surface here)."""
    from actrone_pg.rerankers.cross_encoder import from_config

    return from_config(config)
