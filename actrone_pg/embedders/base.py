"""What an embedder is, and the checks every vector passes before it reaches a store."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from actrone_pg.errors import DimensionMismatchError, EmbedderError, ValidationError
from actrone_pg.models import Vector

__all__ = ["Embedder", "as_vectors", "normalise"]


@runtime_checkable
class Embedder(Protocol):
    """Anything that turns texts into vectors.

    ``name`` identifies the vector space: vectors are only ever compared with vectors of the same
    name, so two models (or two dimensions of one model) must have different names.
    ``relevance_threshold`` is the cosine at or above which a memory counts as relevant for this
    embedder, or ``None`` to use the library default (0.72).
    """

    name: str
    dimensions: int
    relevance_threshold: float | None

    async def embed_batch(self, texts: Sequence[str]) -> Any:
        """One vector per text: a list of lists of floats or a 2-D numpy array."""


def normalise(vector: Any, dimensions: int, *, what: str = "vector") -> Vector:
    """A finite, non-zero vector of ``dimensions`` floats, scaled to unit length (float32).

    The vector is first divided by its largest absolute component, so that neither a huge one
    (whose squared norm overflows) nor a tiny one (whose squared norm underflows to zero) is lost.
    """
    try:
        arr = np.asarray(vector)
        if arr.dtype.kind not in "iuf":
            raise TypeError(arr.dtype)
        arr = arr.astype(np.float64)
    except (TypeError, ValueError, OverflowError):
        raise ValidationError(f"{what} must be a sequence of numbers") from None
    if arr.ndim != 1:
        raise ValidationError(f"{what} must be one-dimensional, got shape {arr.shape}")
    if arr.shape[0] != dimensions:
        raise DimensionMismatchError(
            f"{what} has {arr.shape[0]} dimensions; the embedder declares {dimensions}"
        )
    if not np.all(np.isfinite(arr)):
        raise ValidationError(f"{what} contains NaN or infinite values")
    scale = float(np.max(np.abs(arr))) if dimensions else 0.0
    if scale == 0.0:
        raise ValidationError(f"{what} is all zeros; its cosine to anything is undefined")
    arr = arr / scale
    return (arr / math.sqrt(float(arr @ arr))).astype(np.float32)


def as_vectors(raw: Any, count: int, dimensions: int, embedder: str) -> list[Vector]:
    """Check an embedder's output (``count`` vectors of ``dimensions``) and normalise each.

    A vector of the wrong length is a :class:`DimensionMismatchError`; anything else unusable
    (not a list of vectors, the wrong count, non-numbers, NaN, all zeros) an :class:`EmbedderError`.
    """
    try:
        rows = list(raw)
    except TypeError:
        raise EmbedderError(
            f"embedder {embedder!r} returned {type(raw).__name__}, not vectors"
        ) from None
    if len(rows) != count:
        raise EmbedderError(f"embedder {embedder!r} returned {len(rows)} vectors for {count} texts")
    out = []
    for i, row in enumerate(rows):
        try:
            out.append(normalise(row, dimensions, what=f"vector {i} from embedder {embedder!r}"))
        except DimensionMismatchError:
            raise
        except ValidationError as exc:
            raise EmbedderError(str(exc)) from None
    return out
