"""hybrid_search() plans its joins without nested loops.

Installs the function as this revision pinned it (``sql/0005_hybrid_search.sql``): 0003's, plus
``SET enable_nestloop = off``. Without table statistics the planner joined the candidates by
nested loops (quadratic in the number of candidates). Results are unchanged; only plans differ.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from __future__ import annotations

from actrone_pg.migrations._ops import install

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """CREATE OR REPLACE the function with 0005's copy (same arguments as 0003)."""
    install("0005", "hybrid_search")


def downgrade() -> None:
    """Reinstall 0003's copy (without the setting)."""
    install("0003", "hybrid_search")
