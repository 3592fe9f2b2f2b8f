"""The scan of an agent's vectors and the admission order over it: rules of
:mod:`actrone_pg.ranking` (which re-exports them) kept in a file of their own.

:func:`cosines` is how every backend that computes cosines in Python computes them (and the
in-memory floor of the benchmark with it); :func:`nearest_first` is the admission order, which
is also the dense ranking's; :func:`recency_places` numbers candidates in the order every
ranking breaks its ties by.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["cosines", "nearest_first", "recency_places"]


def nearest_first(
    cosine: npt.NDArray[np.floating],
    created_us: npt.NDArray[np.int64],
    id_order: npt.NDArray[np.int64],
    limit: int,
    *,
    among: npt.NDArray[np.intp] | None = None,
) -> npt.NDArray[np.intp]:
    """Positions of the nearest ``limit`` admitted candidates, nearest first (ties newer first,
    then by id), ``id_order`` as in :func:`actrone_pg.ranking.rank_arrays`. This is the dense
    ranking's order.

    ``among`` (positions) restricts the candidates to those; the arrays are then indexed by it.
    """
    near = cosine if among is None else cosine[among]
    keep: npt.NDArray[np.intp] | None = None
    if near.size > limit:
        # Only rows at least as near as the limit-th can be kept; ties with it all stay.
        kth = np.partition(near, near.size - limit)[near.size - limit]
        keep = np.flatnonzero(near >= kth)
        near = near[keep]
    best = np.argsort(-near, kind="stable")
    ordered = near[best]
    # Equal cosines are rare: only then are the tie keys read (one sort on the cosine instead of
    # a sort on three keys: docs/notes/benchmarks.md, "In-memory: where one call's time goes").
    # (NaN, which no admitted cosine is, sorts last and equals nothing: the tie keys then too.)
    tied = bool((ordered[1:] == ordered[:-1]).any()) or (
        ordered.size > 0 and bool(np.isnan(ordered[-1]))
    )
    if near.size > limit or tied:
        rows = keep if among is None else among if keep is None else among[keep]
        created, ids = (
            (created_us, id_order) if rows is None else (created_us[rows], id_order[rows])
        )
        best = np.lexsort((ids, -created, -near))
    best = best[:limit]
    if keep is not None:
        best = keep[best]
    return best if among is None else among[best]


def recency_places(
    created_us: npt.NDArray[np.int64], id_order: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """Each candidate's place in the recency order (newest first, then id ascending): distinct
    integers, so that a plain sort of a subset's places is that subset's recency order (the
    ``recent`` of :func:`rank_arrays`)."""
    places = np.empty(created_us.size, dtype=np.int64)
    places[np.lexsort((id_order, -created_us))] = np.arange(created_us.size, dtype=np.int64)
    return places


# Columns per matrix-vector product: on 1,024 columns OpenBLAS stays on the calling thread. One
# product over all columns runs on its threads, and the seams of their split change some float32
# cosines (and woken between queries those threads cost more than they save on 2 busy cores; the
# alternatives measured: docs/notes/benchmarks.md, "Measurements behind the code").
_CHUNK = 1024


def cosines(
    query: npt.NDArray[np.float32], matrix: npt.NDArray[np.float32]
) -> npt.NDArray[np.float64]:
    """Cosines of a unit query with the unit columns of a (dimensions × n) float32 matrix.

    float32 products widened to float64: the arithmetic every backend that computes cosines in
    Python uses, so that they agree bit for bit.
    """
    n = matrix.shape[1]
    out = np.empty(n, dtype=np.float32)
    for start in range(0, n, _CHUNK):
        np.matmul(query, matrix[:, start : start + _CHUNK], out=out[start : start + _CHUNK])
    return out.astype(np.float64)
