"""What the ONNX embedder and the ONNX cross-encoder share: finding, reading and loading a model.

Private: both :mod:`actrone_pg.embedders.onnx` and :mod:`actrone_pg.rerankers.cross_encoder`
import from here, neither from the other.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Protocol

from actrone_pg.errors import MissingDependencyError

__all__ = [
    "ONNX_FILES",
    "find_onnx",
    "import_runtime",
    "looks_like_path",
    "max_length",
    "read_json",
]

#: Where a model directory keeps its ONNX file, in the order looked for.
ONNX_FILES = ("model.onnx", "onnx/model.onnx")
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


class _Preset(Protocol):
    """What :func:`max_length` reads of a model preset (``embedders.onnx.Preset``)."""

    @property
    def max_length(self) -> int: ...


def import_runtime() -> tuple[Any, Any]:
    """``onnxruntime`` and ``tokenizers``, or the ``[onnx]`` extra's install line."""
    try:
        import onnxruntime
    except ImportError:
        raise MissingDependencyError("onnx", "onnxruntime") from None
    try:
        import tokenizers
    except ImportError:
        raise MissingDependencyError("onnx", "tokenizers") from None
    return onnxruntime, tokenizers


def read_json(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``, or ``{}`` if it is missing or not an object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def find_onnx(directory: Path) -> Path | None:
    """The model directory's ONNX file, or ``None``."""
    for name in ONNX_FILES:
        if (directory / name).is_file():
            return directory / name
    return None


def max_length(directory: Path, meta: dict[str, Any], preset: _Preset | None) -> int:
    """The longest input in tokens: the model's own files first, then the preset's, then 512."""
    positions = read_json(directory / "config.json").get("max_position_embeddings")
    length: Any = meta.get("max_length")
    if not length:
        length = read_json(directory / "sentence_bert_config.json").get("max_seq_length")
    if not length and preset is not None:
        length = preset.max_length
    if not length:
        tok_max = read_json(directory / "tokenizer_config.json").get("model_max_length")
        # Tokenizers without a limit store a huge sentinel (1e30); ignore it.
        if isinstance(tok_max, int) and tok_max < 100_000:
            length = tok_max
    if not length:
        length = positions or 512
    if isinstance(positions, int) and positions > 0:
        length = min(int(length), positions)
    return int(length)


def looks_like_path(model: str) -> bool:
    """Whether ``model`` names a directory rather than a hub id."""
    return (
        model.startswith(("/", ".", "~"))
        or os.sep in model.strip("/")
        and not _HUB_ID.fullmatch(model)
        or Path(model).expanduser().exists()
    )
