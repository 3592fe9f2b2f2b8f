"""hybrid_search() can rank a given candidate set (the nearest ids from an agent's HNSW index).

Reinstalls the function from ``sql/hybrid_search.sql``, which gains a last argument,
``p_candidates text[] DEFAULT NULL``: when given, admission, the rankings and fusion run over
those memories instead of an exact scan of the agent's vectors. The store passes it for agents
that have their own HNSW index (``postgres_ann_min_memories``); the indexes themselves are built
by the store, per agent, not by a migration.

The argument list changes, so the 13-argument function of 0006 is dropped first. Downgrading
keeps the 14-argument function: its new argument has a default, so every call written for 0006
resolves to it and ranks the same.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30
"""

from __future__ import annotations

from actrone_pg.migrations._ops import replace_hybrid_search

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Replace the 13-argument function with the current one."""
    replace_hybrid_search(
        "text, text, text[], {vector_schema}.vector, double precision, integer, boolean,"
        " integer, double precision[], double precision, double precision, timestamptz, boolean"
    )


def downgrade() -> None:
    """Nothing to undo: 0006's callers are served by the new function (see the module doc)."""
