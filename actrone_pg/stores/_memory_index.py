"""The in-memory store's filter index: an agent's filterable fields as numpy columns.

A :class:`~actrone_pg.pipeline.MemoryFilter` is evaluated here for all of an agent's memories at
once, as a boolean mask over its rows, and the BM25 statistics of the filtered set (spec §9.3)
are read off that mask. :meth:`MemoryFilter.matches` stays the definition of what a filter means;
a property test holds :meth:`FilterIndex.mask` equal to it row by row.

Rows are the agent's memories in the store's insertion order: every embedder, and expired
memories until the sweeper deletes them (they count in the statistics, as on every backend).
Checking the filter in Python for every memory made a filtered search several times slower than
an unfiltered one (docs/benchmarks.md, "Measurements behind the code").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from actrone_pg.models import Memory
from actrone_pg.pipeline import MemoryFilter, json_contains
from actrone_pg.ranking import CorpusStats, micros

__all__ = ["FilterIndex"]

Rows = npt.NDArray[np.intp]
Mask = npt.NDArray[np.bool_]


@dataclass
class FilterIndex:
    """One agent's memories as columns aligned by row: what a filter and its statistics read."""

    memories: list[Memory]
    row: dict[str, int]  # memory id -> row
    lengths: npt.NDArray[np.int64]  # BM25 document lengths
    created_us: npt.NDArray[np.int64]
    importance: npt.NDArray[np.float64]
    tag_rows: dict[str, Rows]  # tag -> rows carrying it, ascending
    content_type_code: dict[str, int]
    content_type_codes: npt.NDArray[np.int32]
    session_code: dict[str | None, int]
    session_codes: npt.NDArray[np.int32]
    # term -> rows holding it; filled on first use from the agent's postings
    term_rows: dict[str, Rows] = field(default_factory=dict)

    @classmethod
    def build(cls, memories: Sequence[Memory], lengths: Sequence[int]) -> FilterIndex:
        """The index of ``memories`` (with their BM25 ``lengths``), rows in the given order."""
        tags: dict[str, list[int]] = {}
        content_type_code: dict[str, int] = {}
        session_code: dict[str | None, int] = {}
        n = len(memories)
        content_type_codes = np.empty(n, dtype=np.int32)
        session_codes = np.empty(n, dtype=np.int32)
        for i, m in enumerate(memories):
            # A tag listed twice on one memory is one row.
            for tag in dict.fromkeys(m.tags):
                tags.setdefault(tag, []).append(i)
            content_type_codes[i] = content_type_code.setdefault(
                m.content_type, len(content_type_code)
            )
            session_codes[i] = session_code.setdefault(m.session_id, len(session_code))
        return cls(
            memories=list(memories),
            row={m.id: i for i, m in enumerate(memories)},
            lengths=np.array(lengths, dtype=np.int64),
            created_us=np.array([micros(m.created_at) for m in memories], dtype=np.int64),
            importance=np.array([m.importance for m in memories], dtype=np.float64),
            tag_rows={t: np.array(r, dtype=np.intp) for t, r in tags.items()},
            content_type_code=content_type_code,
            content_type_codes=content_type_codes,
            session_code=session_code,
            session_codes=session_codes,
        )

    def __len__(self) -> int:
        return len(self.memories)

    def mask(self, flt: MemoryFilter) -> Mask:
        """Which rows ``flt`` matches: ``[flt.matches(m) for m in memories]``, vectorised.

        Each condition is that of :meth:`MemoryFilter.matches`. ``created_at`` bounds compare
        whole microseconds since the epoch: the order of the instants, which is Python's order
        of aware datetimes at microsecond resolution (the manager stores and validates them in
        UTC; Python would compare wall clocks only for two datetimes sharing one tzinfo with a
        varying offset). The metadata containment, which has no columnar form, is checked in
        Python on the rows the other conditions left.
        """
        n = len(self.memories)
        mask = np.ones(n, dtype=bool)
        if flt.tags_any is not None:
            mask &= self._rows_mask(self._tag_rows(flt.tags_any))
        if flt.tags_all is not None:
            for tag in dict.fromkeys(flt.tags_all):
                mask &= self._rows_mask(self._tag_rows((tag,)))
        if flt.content_types is not None:
            codes = [
                self.content_type_code[t] for t in flt.content_types if t in self.content_type_code
            ]
            mask &= np.isin(self.content_type_codes, np.array(codes, dtype=np.int32))
        if flt.session_id is not None:
            code = self.session_code.get(flt.session_id)
            if code is None:
                mask[:] = False
            else:
                mask &= self.session_codes == code
        if flt.created_after is not None:
            mask &= self.created_us > micros(flt.created_after)
        if flt.created_before is not None:
            mask &= self.created_us < micros(flt.created_before)
        if flt.min_importance is not None:
            mask &= self.importance >= flt.min_importance
        if flt.metadata is not None:
            wanted = flt.metadata
            for i in np.flatnonzero(mask).tolist():
                if not json_contains(self.memories[i].metadata, wanted):
                    mask[i] = False
        return mask

    def stats(
        self, mask: Mask, terms: Sequence[str], postings: Mapping[str, Mapping[str, int]]
    ) -> CorpusStats:
        """BM25 statistics of the rows in ``mask``, document frequencies of ``terms`` only.

        ``postings`` maps each term to the ids of the memories holding it (the agent's).
        """
        doc_freq: dict[str, int] = {}
        for term in dict.fromkeys(terms):
            rows = self.term_rows.get(term)
            if rows is None:
                posting = postings.get(term, {})
                rows = np.fromiter(
                    (self.row[mid] for mid in posting), dtype=np.intp, count=len(posting)
                )
                self.term_rows[term] = rows
            df = int(np.count_nonzero(mask[rows]))
            if df:
                doc_freq[term] = df
        return CorpusStats(int(np.count_nonzero(mask)), int(self.lengths[mask].sum()), doc_freq)

    def _tag_rows(self, tags: Sequence[str]) -> list[Rows]:
        return [self.tag_rows[t] for t in dict.fromkeys(tags) if t in self.tag_rows]

    def _rows_mask(self, rows: Sequence[Rows]) -> Mask:
        out = np.zeros(len(self.memories), dtype=bool)
        for r in rows:
            out[r] = True
        return out
