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
from typing import Any

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
    # metadata key -> (scalar value's key -> rows whose metadata holds it there); filled on
    # first use of the key in a filter
    metadata_rows: dict[str, dict[_Scalar, Rows]] = field(default_factory=dict)

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

    def mask(self, flt: MemoryFilter) -> Mask:
        """Which rows ``flt`` matches: ``[flt.matches(m) for m in memories]``, vectorised.

        Each condition is that of :meth:`MemoryFilter.matches`. ``created_at`` bounds compare
        whole microseconds since the epoch: the order of the instants, which is Python's order
        of aware datetimes at microsecond resolution (the manager stores and validates them in
        UTC; Python would compare wall clocks only for two datetimes sharing one tzinfo with a
        varying offset). A ``metadata`` condition's top-level scalar values (``{"lang": "en"}``)
        are looked up in a per-key index of the memories' values; nested ones (objects, arrays)
        are checked with :func:`json_contains` in Python, on the rows the other conditions left.
        """
        mask = np.ones(len(self.memories), dtype=bool)
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
            nested: dict[str, Any] = {}
            for key, value in flt.metadata.items():
                scalar = _scalar(value)
                if scalar is None:
                    nested[key] = value
                else:
                    mask &= self._rows_mask(self._metadata_rows(key, scalar))
            if nested:
                for i in np.flatnonzero(mask).tolist():
                    if not json_contains(self.memories[i].metadata, nested):
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

    def _metadata_rows(self, key: str, scalar: _Scalar) -> list[Rows]:
        values = self.metadata_rows.get(key)
        if values is None:
            found: dict[_Scalar, list[int]] = {}
            for i, m in enumerate(self.memories):
                if key in m.metadata:
                    held = _scalar(m.metadata[key])
                    if held is not None:
                        found.setdefault(held, []).append(i)
            values = {v: np.array(r, dtype=np.intp) for v, r in found.items()}
            self.metadata_rows[key] = values
        rows = values.get(scalar)
        return [] if rows is None else [rows]

    def _tag_rows(self, tags: Sequence[str]) -> list[Rows]:
        return [self.tag_rows[t] for t in dict.fromkeys(tags) if t in self.tag_rows]

    def _rows_mask(self, rows: Sequence[Rows]) -> Mask:
        out = np.zeros(len(self.memories), dtype=bool)
        for r in rows:
            out[r] = True
        return out


# A JSON scalar as a dictionary key, equal to another exactly when json_contains calls the two
# the same: numbers by value (1 and 1.0 alike, and Python hashes them alike), booleans apart from
# numbers, strings and null by type and value.
_Scalar = tuple[str, object]


def _scalar(value: object) -> _Scalar | None:
    """``value``'s key if it is a JSON scalar equal to itself, else ``None`` (objects, arrays,
    NaN and other types are left to :func:`json_contains`)."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float)):
        return ("number", value) if value == value else None
    if type(value) is str:
        return ("string", value)
    if value is None:
        return ("null", None)
    return None
