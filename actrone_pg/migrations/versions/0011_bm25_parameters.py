"""hybrid_search() takes BM25's k1 and b as arguments instead of constants.

Installs the function as this revision pinned it (``sql/0011_hybrid_search.sql``): 0009's, with
two last arguments, ``p_bm25_k1 double precision DEFAULT 1.2`` and ``p_bm25_b double precision
DEFAULT 0.75``, in place of the constants 1.2 and 0.75 that 0003 to 0009 wrote into the BM25
sum. The store passes ``RankingParams.bm25_k1`` / ``bm25_b``, so every backend ranks with the same
values; with the defaults the results are those of 0009, bit for bit.

The argument list changes, so the 14-argument function of 0007-0010 is dropped first;
downgrading drops the 16-argument one and reinstalls 0009's.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

from __future__ import annotations

from actrone_pg.migrations._ops import drop_function, install

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | None = None
depends_on: str | None = None

#: hybrid_search's argument types before this revision (0007 to 0010).
PREVIOUS_ARGUMENTS = (
    "text, text, text[], {vector_schema}.vector, double precision, integer, boolean, integer,"
    " double precision[], double precision, double precision, timestamptz, boolean, text[]"
)
#: hybrid_search's argument types in this revision.
ARGUMENTS = PREVIOUS_ARGUMENTS + ", double precision, double precision"


def upgrade() -> None:
    """Replace the 14-argument function with 0011's copy."""
    drop_function("hybrid_search", PREVIOUS_ARGUMENTS)
    install("0011", "hybrid_search")


def downgrade() -> None:
    """Replace the 16-argument function with 0009's copy."""
    drop_function("hybrid_search", ARGUMENTS)
    install("0009", "hybrid_search")
