"""hybrid_search() plans once per session and reuses that plan.

Installs the function as this revision pinned it (``sql/0009_hybrid_search.sql``): 0008's, plus
``SET plan_cache_mode = force_generic_plan``. PostgreSQL 18 caches the plans of SQL-language
functions; by default it kept choosing a custom plan, which means planning the whole body again
on every call (about 0.9 ms here). Results are unchanged; only when planning happens differs.
On servers before 18 the setting changes nothing.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-30
"""

from __future__ import annotations

from actrone_pg.migrations._ops import install

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """CREATE OR REPLACE the function with 0009's copy (same arguments as 0007)."""
    install("0009", "hybrid_search")


def downgrade() -> None:
    """Reinstall 0008's copy (without the setting)."""
    install("0008", "hybrid_search")
