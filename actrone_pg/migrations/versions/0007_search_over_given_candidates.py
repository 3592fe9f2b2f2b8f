"""hybrid_search() can rank a given candidate set (the nearest ids from an agent's HNSW index).

Installs the function as this revision pinned it (``sql/0007_hybrid_search.sql``), which gains
a last argument, ``p_candidates text[] DEFAULT NULL``: when given, admission, the rankings and
fusion run over those memories instead of an exact scan of the agent's vectors. The store passes
it for agents that have their own HNSW index (``postgres_ann_min_memories``); the indexes
themselves are built by the store, per agent, not by a migration.

The argument list changes, so the 13-argument function of 0006 is dropped first; downgrading
drops the 14-argument one and reinstalls 0006's.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30
"""

from __future__ import annotations

from actrone_pg.migrations._ops import drop_function, install

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | None = None
depends_on: str | None = None

#: hybrid_search's argument types before this revision (0006).
PREVIOUS_ARGUMENTS = (
    "text, text, text[], {vector_schema}.vector, double precision, integer, boolean, integer,"
    " double precision[], double precision, double precision, timestamptz, boolean"
)
#: hybrid_search's argument types in this revision.
ARGUMENTS = PREVIOUS_ARGUMENTS + ", text[]"


def upgrade() -> None:
    """Replace the 13-argument function with 0007's copy."""
    drop_function("hybrid_search", PREVIOUS_ARGUMENTS)
    install("0007", "hybrid_search")


def downgrade() -> None:
    """Replace the 14-argument function with 0006's copy."""
    drop_function("hybrid_search", ARGUMENTS)
    install("0006", "hybrid_search")
