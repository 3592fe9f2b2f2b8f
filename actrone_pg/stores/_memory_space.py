"""One agent's memories of one embedder as arrays aligned by column: what an in-memory search reads.

A :class:`Space` is built from the agent's entries the first time a search needs it and dropped
on every write that touches the agent. Besides the matrix of vectors it holds the columns the
pipeline's arrays read (``created_at``, id order, recency places, token counts, expiry) and,
built on the first search that scores BM25, the :class:`Postings` of every term as slices of
one flat array. A posting used to be built from the agent's dict of postings on its term's first
query, in Python, one memory at a time: the first query of each frequent term paid milliseconds
for it (docs/notes/benchmarks.md, "In-memory: where one call's time goes").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import chain

import numpy as np
import numpy.typing as npt

from actrone_pg.models import Memory, Vector

__all__ = ["NEVER", "Postings", "Space", "aligned_rows"]

#: The expiry of a memory that never expires, as microseconds: later than any datetime.
NEVER = int(np.iinfo(np.int64).max)


def aligned_rows(*columns: npt.NDArray[np.int64]) -> list[npt.NDArray[np.int64]]:
    """The ``columns`` (each one value per memory) as views of one row-major table.

    A search reads several of them at the same few hundred candidates, right after the scan of
    the matrix has flushed the CPU caches: from one table, the first read of a candidate brings
    its whole row in, and the others find it cached (one cache miss per candidate instead of one
    per column; docs/notes/benchmarks.md, "In-memory: where one call's time goes").
    """
    table = np.ascontiguousarray(np.stack(columns, axis=1), dtype=np.int64)
    return [table[:, j] for j in range(len(columns))]


@dataclass(frozen=True, slots=True)
class Postings:
    """Every term's columns, in one flat array: term ``t`` (numbered by ``vocabulary``) is in
    the columns ``columns[offsets[t]:offsets[t + 1]]`` (ascending), ``counts`` times each."""

    vocabulary: dict[str, int]
    columns: npt.NDArray[np.intp]
    counts: npt.NDArray[np.float64]
    offsets: npt.NDArray[np.int64]

    @classmethod
    def build(cls, frequencies: Sequence[Counter[str]]) -> Postings:
        """The postings of the columns whose term frequencies are ``frequencies``, in order."""
        n = len(frequencies)
        sizes = np.fromiter(map(len, frequencies), dtype=np.intp, count=n)
        total = int(sizes.sum())
        terms = list(chain.from_iterable(frequencies))
        vocabulary = {t: i for i, t in enumerate(dict.fromkeys(terms))}
        ids = np.fromiter(map(vocabulary.__getitem__, terms), dtype=np.int64, count=total)
        counts = np.fromiter(
            chain.from_iterable(f.values() for f in frequencies), dtype=np.float64, count=total
        )
        # Column-major to term-major; a stable sort keeps each term's columns ascending.
        order = np.argsort(ids, kind="stable")
        offsets = np.zeros(len(vocabulary) + 1, dtype=np.int64)
        np.cumsum(np.bincount(ids, minlength=len(vocabulary)), out=offsets[1:])
        columns = np.repeat(np.arange(n, dtype=np.intp), sizes)[order]
        return cls(vocabulary, columns, counts[order], offsets)

    def posting(self, term: str) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]] | None:
        """The columns holding ``term`` (ascending) and its frequency in each, or ``None``."""
        t = self.vocabulary.get(term)
        if t is None:
            return None
        start, stop = int(self.offsets[t]), int(self.offsets[t + 1])
        return self.columns[start:stop], self.counts[start:stop]


@dataclass
class Space:
    """One agent's memories of one embedder, as arrays aligned by column."""

    ids: list[str]
    memories: list[Memory]  # each column's memory
    matrix: Vector  # dimensions × n, float32
    created_us: npt.NDArray[np.int64]
    id_order: npt.NDArray[np.int64]  # rank of each id in code-point order
    #: each column's place in the recency order (newest first, then id ascending)
    recency: npt.NDArray[np.int64]
    lengths: npt.NDArray[np.int64]  # each memory's BM25 document length
    tokens: npt.NDArray[np.int64]  # each memory's stored token count
    expires_us: npt.NDArray[np.int64]  # each memory's expiry (NEVER if none)
    first_expiry: int  # the earliest of them
    rows: npt.NDArray[np.intp]  # each column's row in the agent's FilterIndex
    frequencies: list[Counter[str]]  # each column's term frequencies
    postings: Postings | None = None  # built from ``frequencies`` on first use
    column: dict[str, int] = field(default_factory=dict)  # memory id -> column
    # term -> its frequency in every column, for the terms of at least 1/_DENSE of the columns
    # (float32 holds counts exactly); filled on first use
    dense: dict[str, npt.NDArray[np.float32]] = field(default_factory=dict)
    # each column's place among one search's candidates while it scores BM25, else -1
    slots: npt.NDArray[np.int64] = field(default_factory=lambda: np.empty(0, dtype=np.int64))

    def term_frequencies(
        self, idx: npt.NDArray[np.intp], terms: Sequence[str]
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """Each term's frequency in the columns ``idx`` (a row per term), and their lengths."""
        if self.postings is None:
            self.postings = Postings.build(self.frequencies)
        tf = np.zeros((len(terms), idx.size), dtype=np.float64)
        if idx.size == 0:
            return tf, self.lengths[idx].astype(np.float64)
        slot: npt.NDArray[np.int64] | None = None
        try:
            for row, term in enumerate(terms):
                posting = self.postings.posting(term)
                if posting is None:
                    continue
                dense = self.dense.get(term)
                if dense is None and posting[0].size * _DENSE >= len(self.ids):
                    dense = self.dense[term] = np.zeros(len(self.ids), dtype=np.float32)
                    dense[posting[0]] = posting[1]
                if dense is not None:
                    tf[row] = dense[idx]
                    continue
                # A rarer term: its few columns' places among the candidates, looked up in
                # the slots (no sort of the candidates, docs/benchmarks.md).
                if slot is None:
                    slot = self.slots
                    slot[idx] = np.arange(idx.size)
                cols, tfs = posting
                at = slot[cols]
                hit = at >= 0
                tf[row, at[hit]] = tfs[hit]
        finally:
            if slot is not None:
                slot[idx] = -1
        return tf, self.lengths[idx].astype(np.float64)


# A term in at least 1/_DENSE of an agent's memories keeps its frequencies as one array over all
# of them: gathering the candidates' beats searching a long posting (docs/benchmarks.md).
_DENSE = 16
