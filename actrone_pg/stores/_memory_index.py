"""The in-memory store's filter index: an agent's filterable fields as numpy columns.

A :class:`~actrone_pg.filters.MemoryFilter` is evaluated here for all of an agent's memories at
once, as a boolean mask over its rows (each key's ``mask`` reads the columns of
:class:`~actrone_pg.filters.Columns`, built on first use), and the BM25 statistics of the
filtered set (spec §9.3) are read off that mask by :func:`~actrone_pg.filters.filtered_stats`.
Each key's ``matches`` stays the definition of what it means; a property test holds the mask
equal to it row by row.

Rows are the agent's memories in the store's insertion order: every embedder, and expired
memories until the sweeper deletes them (they count in the statistics, as on every backend).
Checking the filter in Python for every memory made a filtered search several times slower than
an unfiltered one (docs/notes/benchmarks.md, "Measurements behind the code").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from actrone_pg.filters import MemoryFilter, filtered_stats, json_contains
from actrone_pg.models import Memory
from actrone_pg.ranking import CorpusStats, micros

__all__ = ["FilterIndex"]

Rows = npt.NDArray[np.intp]
Mask = npt.NDArray[np.bool_]


@dataclass
class FilterIndex:
    """One agent's memories as columns aligned by row: what a filter and its statistics read.

    Implements :class:`actrone_pg.filters.Columns`; every column is built from the memories the
    first time a filter reads it, and lives as long as the index (dropped on every write).
    """

    memories: list[Memory]
    row: dict[str, int]  # memory id -> row
    lengths: npt.NDArray[np.int64]  # BM25 document lengths
    # field -> its value in every row (datetimes as microseconds)
    columns: dict[str, npt.NDArray[Any]] = field(default_factory=dict)
    # field -> (value -> code, each row's code)
    codes: dict[str, tuple[dict[Any, int], npt.NDArray[np.int32]]] = field(default_factory=dict)
    # tuple field -> (member -> rows holding it, ascending)
    members: dict[str, dict[Any, Rows]] = field(default_factory=dict)
    # term -> rows holding it; filled on first use from the agent's postings
    term_rows: dict[str, Rows] = field(default_factory=dict)
    # (JSON field, key) -> (scalar value's key -> rows whose object holds it there)
    json_rows: dict[tuple[str, str], dict[_Scalar, Rows]] = field(default_factory=dict)

    @classmethod
    def build(cls, memories: Sequence[Memory], lengths: Sequence[int]) -> FilterIndex:
        """The index of ``memories`` (with their BM25 ``lengths``), rows in the given order."""
        return cls(
            memories=list(memories),
            row={m.id: i for i, m in enumerate(memories)},
            lengths=np.array(lengths, dtype=np.int64),
        )

    def mask(self, flt: MemoryFilter) -> Mask:
        """Which rows ``flt`` matches: ``[flt.matches(m) for m in memories]``, vectorised."""
        return flt.mask(self, len(self.memories))

    def stats(
        self, mask: Mask, terms: Sequence[str], postings: Mapping[str, Mapping[str, int]]
    ) -> CorpusStats:
        """BM25 statistics of the rows in ``mask``, document frequencies of ``terms`` only.

        ``postings`` maps each term to the ids of the memories holding it (the agent's).
        """

        def rows_of(term: str) -> Rows:
            rows = self.term_rows.get(term)
            if rows is None:
                posting = postings.get(term, {})
                rows = np.fromiter(
                    (self.row[mid] for mid in posting), dtype=np.intp, count=len(posting)
                )
                self.term_rows[term] = rows
            return rows

        return filtered_stats(mask, self.lengths, rows_of, terms)

    # -- actrone_pg.filters.Columns --
    def column(self, name: str) -> npt.NDArray[Any]:
        """``name`` of every memory; datetimes as whole microseconds since the epoch."""
        found = self.columns.get(name)
        if found is None:
            values = [getattr(m, name) for m in self.memories]
            if values and isinstance(values[0], datetime):
                found = np.array([micros(t) for t in values], dtype=np.int64)
            else:
                found = np.array(values)
            self.columns[name] = found
        return found

    def any_member(self, name: str, values: Sequence[str]) -> Mask:
        """Rows whose tuple ``name`` holds one of ``values``."""
        members = self.members.get(name)
        if members is None:
            found: dict[Any, list[int]] = {}
            for i, m in enumerate(self.memories):
                # A member listed twice on one memory is one row.
                for item in dict.fromkeys(getattr(m, name)):
                    found.setdefault(item, []).append(i)
            members = {k: np.array(r, dtype=np.intp) for k, r in found.items()}
            self.members[name] = members
        return self._rows_mask([members[x] for x in dict.fromkeys(values) if x in members])

    def isin(self, name: str, values: Sequence[Any]) -> Mask:
        """Rows whose ``name`` equals one of ``values``."""
        coded = self.codes.get(name)
        if coded is None:
            code: dict[Any, int] = {}
            codes = np.array(
                [code.setdefault(getattr(m, name), len(code)) for m in self.memories],
                dtype=np.int32,
            )
            coded = self.codes[name] = (code, codes)
        code, codes = coded
        wanted = [code[x] for x in values if x in code]
        return np.isin(codes, np.array(wanted, dtype=np.int32))

    def json_contains(self, name: str, value: Mapping[str, Any]) -> Mask:
        """Rows whose JSON object ``name`` contains ``value``.

        Top-level scalar values (``{"lang": "en"}``) are looked up in a per-key index of the
        memories' values; nested ones (objects, arrays) are checked with :func:`json_contains`
        in Python, on the rows the scalars left.
        """
        mask = np.ones(len(self.memories), dtype=bool)
        nested: dict[str, Any] = {}
        for key, item in value.items():
            scalar = _scalar(item)
            if scalar is None:
                nested[key] = item
            else:
                mask &= self._rows_mask(self._json_rows(name, key, scalar))
        if nested:
            for i in np.flatnonzero(mask).tolist():
                if not json_contains(getattr(self.memories[i], name), nested):
                    mask[i] = False
        return mask

    def _json_rows(self, name: str, key: str, scalar: _Scalar) -> list[Rows]:
        values = self.json_rows.get((name, key))
        if values is None:
            found: dict[_Scalar, list[int]] = {}
            for i, m in enumerate(self.memories):
                obj = getattr(m, name)
                if key in obj:
                    held = _scalar(obj[key])
                    if held is not None:
                        found.setdefault(held, []).append(i)
            values = {v: np.array(r, dtype=np.intp) for v, r in found.items()}
            self.json_rows[(name, key)] = values
        rows = values.get(scalar)
        return [] if rows is None else [rows]

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
