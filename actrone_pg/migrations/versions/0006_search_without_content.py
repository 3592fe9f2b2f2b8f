"""hybrid_search() can rank without returning the memories' fields; term statistics by key.

Reinstalls the function from ``sql/hybrid_search.sql``, which gains a last argument,
``p_content boolean DEFAULT true``: with ``false`` the ranking is the same and the memories'
fields are left NULL, so that ``retrieve_context`` can pack its token budget from the ranking and
fetch only the memories that fit. Each query term's document frequency is now read by its key
instead of through a join over all of the agent's term statistics.

The argument list changes, so the 12-argument function of 0003-0005 is dropped first (PostgreSQL
would otherwise keep both as overloads). Downgrading keeps the 13-argument function: its new
argument has a default, so every call written for 0005 resolves to it and ranks the same.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30
"""

from __future__ import annotations

from actrone_pg.migrations._ops import replace_hybrid_search

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Replace the 12-argument function with the current one."""
    replace_hybrid_search(
        "text, text, text[], {vector_schema}.vector, double precision, integer, boolean,"
        " integer, double precision[], double precision, double precision, timestamptz"
    )


def downgrade() -> None:
    """Nothing to undo: 0005's callers are served by the new function (see the module doc)."""
