"""hybrid_search() can rank without returning the memories' fields; term statistics by key.

Installs the function as this revision pinned it (``sql/0006_hybrid_search.sql``), which gains
a last argument, ``p_content boolean DEFAULT true``: with ``false`` the ranking is the same and
the memories' fields are left NULL, so that ``retrieve_context`` can pack its token budget from
the ranking and fetch only the memories that fit. Each query term's document frequency is now
read by its key instead of through a join over all of the agent's term statistics.

The argument list changes, so the 12-argument function of 0003-0005 is dropped first
(PostgreSQL would otherwise keep both as overloads); downgrading drops the 13-argument one and
reinstalls 0005's.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30
"""

from __future__ import annotations

from actrone_pg.migrations._ops import drop_function, install

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | None = None
depends_on: str | None = None

#: hybrid_search's argument types before this revision (0003-0005).
PREVIOUS_ARGUMENTS = (
    "text, text, text[], {vector_schema}.vector, double precision, integer, boolean, integer,"
    " double precision[], double precision, double precision, timestamptz"
)
#: hybrid_search's argument types in this revision.
ARGUMENTS = PREVIOUS_ARGUMENTS + ", boolean"


def upgrade() -> None:
    """Replace the 12-argument function with 0006's copy."""
    drop_function("hybrid_search", PREVIOUS_ARGUMENTS)
    install("0006", "hybrid_search")


def downgrade() -> None:
    """Replace the 13-argument function with 0005's copy."""
    drop_function("hybrid_search", ARGUMENTS)
    install("0005", "hybrid_search")
