"""Built-in embedders and the factory that picks one from a config.

``HashingEmbedder`` needs nothing; ``OnnxEmbedder`` needs the ``[onnx]`` extra and a model;
``OpenAIEmbedder`` talks to any OpenAI-compatible ``/v1/embeddings`` server. The ONNX and OpenAI
classes are imported on first use, so ``import actrone_pg`` never imports onnxruntime.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

from actrone_pg.embedders.base import Embedder, as_vectors, normalise
from actrone_pg.embedders.hashing import HashingEmbedder
from actrone_pg.errors import MissingDependencyError, ModelNotAvailableError

if TYPE_CHECKING:
    from actrone_pg.config import MemoryConfig
    from actrone_pg.embedders.onnx import OnnxEmbedder
    from actrone_pg.embedders.openai import OpenAIEmbedder

__all__ = [
    "Embedder",
    "HashingEmbedder",
    "OnnxEmbedder",
    "OpenAIEmbedder",
    "as_vectors",
    "create_embedder",
    "normalise",
]

logger = logging.getLogger("actrone_pg.embedders")

_LAZY = {
    "OnnxEmbedder": "actrone_pg.embedders.onnx",
    "OpenAIEmbedder": "actrone_pg.embedders.openai",
}
_fallback_noticed = False


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'actrone_pg.embedders' has no attribute {name!r}")


def create_embedder(config: MemoryConfig) -> Embedder:
    """The embedder ``config.embedding_provider`` names.

    ``"local"`` uses an ONNX model when one is installed and reachable, and otherwise the hashing
    embedder, saying so once in the log. ``"onnx"`` without a model raises
    :class:`~actrone_pg.errors.ModelNotAvailableError` explaining how to get one.
    """
    global _fallback_noticed
    provider = config.embedding_provider
    if provider == "hashing":
        return HashingEmbedder()
    if provider == "onnx":
        return _onnx_from_config(config)
    if provider == "openai":
        module = importlib.import_module("actrone_pg.embedders.openai")
        embedder: Embedder = module.from_config(config)
        return embedder
    # provider == "local"
    try:
        return _onnx_from_config(config, local_only=True)
    except (MissingDependencyError, ModelNotAvailableError, ImportError) as exc:
        if not _fallback_noticed:
            _fallback_noticed = True
            logger.warning(
                "no local ONNX embedding model available (%s); using the keyword-only hashing "
                "embedder. Install actrone-pg[onnx] and a model for semantic recall.",
                exc,
            )
        return HashingEmbedder()


def _onnx_from_config(config: MemoryConfig, *, local_only: bool = False) -> Embedder:
    try:
        module = importlib.import_module("actrone_pg.embedders.onnx")
    except ImportError as exc:  # pragma: no cover - the module itself has no hard imports
        raise MissingDependencyError("onnx", "onnxruntime") from exc
    embedder: Embedder = module.from_config(config, local_only=local_only)
    return embedder
