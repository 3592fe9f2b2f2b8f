"""A deterministic, dependency-free embedder: words hashed into a fixed number of dimensions.

It knows nothing of meaning: two texts are similar only when they share words. It exists so that
the library works with no model at all, and so that tests have an embedder that gives the same
vector on every machine and Python version (blake2b, not ``hash()``, which is salted per process).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from actrone_pg.ranking import tokenize

__all__ = ["HASHING_THRESHOLD", "HashingEmbedder"]

# Words that appear in nearly every sentence carry no topic; hashing them would make every pair
# of texts look alike.
_STOP_WORDS = frozenset(
    """a an and are as at be been but by can could did do does for from had has have he her his
    i if in into is it its me my of on or our she so than that the their them then there these
    they this to was we were what when where which who will with would you your""".split()
)

#: Measured with ``actrone-pg calibrate --embedder hashing`` on the shipped set (48 relevant, 528
#: unrelated pairs; best-F2 rule, which gives the same as best-F1): precision 0.212, recall
#: 0.438, F1 0.286, F2 0.360 (TP 21, FP 78). Low by
#: design of the set: 28 of its 48 relevant pairs share no word, which no keyword method can
#: find; relevant pairs that do share a word score 0.15-0.58 (median 0.26), unrelated pairs that
#: share one 0.13-0.44 (median 0.25). Tried and not adopted, as it would change the vector space
#: (and ``name``) other code relies on: dropping "user" as a stop word lifts F1 to 0.396, adding
#: 5-letter prefixes as well to 0.419.
HASHING_THRESHOLD = 0.218


def _features(text: str) -> list[str]:
    words = [w for w in tokenize(text) if w not in _STOP_WORDS]
    # A light plural fold so that "allergy"/"allergies" or "plan"/"plans" meet.
    folded = []
    for w in words:
        if len(w) > 4 and w.endswith("ies"):
            w = w[:-3] + "y"
        elif len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
            w = w[:-1]
        folded.append(w)
    if not folded:
        # Text made only of stop words or punctuation still gets a vector of its own.
        stripped = text.strip().lower()
        folded = [stripped] if stripped else ["\x00empty"]
    return folded


class HashingEmbedder:
    """Bag of words hashed into ``dimensions`` signed buckets, L2-normalised."""

    def __init__(
        self, dimensions: int = 256, *, relevance_threshold: float | None = HASHING_THRESHOLD
    ) -> None:
        if dimensions < 8:
            raise ValueError("dimensions must be at least 8")
        self.dimensions = dimensions
        self.name = f"hashing-v1-{dimensions}"
        self.relevance_threshold = relevance_threshold

    def embed_one(self, text: str) -> np.ndarray:
        """The vector of one text (synchronous; the work is microseconds)."""
        vec = np.zeros(self.dimensions, dtype=np.float64)
        for feature in _features(text):
            digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
            value = int.from_bytes(digest, "little")
            bucket = value % self.dimensions
            sign = 1.0 if (value >> 63) & 1 else -1.0
            vec[bucket] += sign
        norm = float(np.linalg.norm(vec))
        if norm == 0.0:  # every feature cancelled out; fall back to one fixed bucket
            vec[0] = 1.0
            norm = 1.0
        return (vec / norm).astype(np.float32)

    async def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of ``texts`` as a ``(len(texts), dimensions)`` float32 array."""
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        return np.stack([self.embed_one(t) for t in texts])
