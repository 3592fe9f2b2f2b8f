"""hybrid_search() ranks the same way in fewer passes; p_bm25_b defaults to 0.3.

Installs the function as this revision pinned it (``sql/0016_hybrid_search.sql``): 0013's
arguments and results, the same ranking bit for bit, computed with one sort per ranking and no
join between the rankings, each candidate's term frequencies read once per query term, and the
memories' fields carried only when asked for (docs/benchmarks.md, "Where one call's time goes").
Its ``p_bm25_b`` default is the library's, 0.3 (it was 0.75); callers that pass it rank as
before. ``retrieve()`` (0015) calls it by name and needs no change.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02
"""

from __future__ import annotations

from actrone_pg.migrations._ops import install

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Replace 0013's copy with this revision's (same argument list: CREATE OR REPLACE)."""
    install("0016", "hybrid_search")


def downgrade() -> None:
    """Restore 0013's copy."""
    install("0013", "hybrid_search")
