"""hybrid_search() plans once per session and reuses that plan.

Reinstalls the function from ``sql/hybrid_search.sql``, which now carries
``SET plan_cache_mode = force_generic_plan``. PostgreSQL 18 caches the plans of SQL-language
functions; by default it kept choosing a custom plan, which means planning the whole body again
on every call (about 0.9 ms here). Results are unchanged; only when planning happens differs.
On servers before 18 the setting changes nothing.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-30
"""

from __future__ import annotations

from actrone_pg.migrations._ops import install_hybrid_search, reset_hybrid_search_setting

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """CREATE OR REPLACE the function from the current SQL file (same arguments as 0007)."""
    install_hybrid_search()


def downgrade() -> None:
    """Drop the setting again (the function body is the same)."""
    reset_hybrid_search_setting("plan_cache_mode")
