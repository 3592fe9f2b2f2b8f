"""hybrid_search() plans its joins without nested loops.

Reinstalls the function from ``sql/hybrid_search.sql``, which now carries
``SET enable_nestloop = off``: without table statistics the planner joined the candidates by
nested loops (quadratic in the number of candidates). Results are unchanged; only plans differ.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from __future__ import annotations

from actrone_pg.migrations._ops import install_hybrid_search, reset_hybrid_search_setting

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """CREATE OR REPLACE the function from the current SQL file."""
    install_hybrid_search()


def downgrade() -> None:
    """Drop the setting again (the function body is the same)."""
    reset_hybrid_search_setting("enable_nestloop")
