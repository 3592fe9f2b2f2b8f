"""hybrid_search() sums each candidate's BM25 terms without sorting them first.

Installs the function as this revision pinned it (``sql/0008_hybrid_search.sql``): the query
terms' IDFs are stored in query-term order once per call, and each candidate's BM25 sum reads
them in that order instead of sorting its matching terms (``sum(... ORDER BY ord)``) once per
candidate. The sums are added in the same order as before, so every score is bit-for-bit the
same; only the plan is cheaper.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-30
"""

from __future__ import annotations

from actrone_pg.migrations._ops import install

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """CREATE OR REPLACE the function with 0008's copy (same arguments as 0007)."""
    install("0008", "hybrid_search")


def downgrade() -> None:
    """Reinstall 0007's copy."""
    install("0007", "hybrid_search")
