"""The ranking's functions return the ranks as one array: a new ranking is one new copy.

Installs three copies this revision pins, the ranking the same bit for bit:

- ``hybrid_search`` (``sql/0019_hybrid_search.sql``): 0018's, returning one more column, last,
  ``ranks``: the rank in each ranking of ``actrone_pg.ranking.CHANNELS``, in the order of
  ``p_rrf_weights`` (``dense_rank``, ``lexical_rank`` and ``recency_rank`` stay, for psql);
- ``retrieve`` (``sql/0019_retrieve.sql``) and ``agent_retrieve`` (``sql/0019_agent_retrieve.sql``):
  0018's, with that body, returning ``ranks`` in place of a column per ranking.

A later ranking then changes ``hybrid_search``'s body alone: its revision pins a new copy of
it and installs these two copies again, their body line naming that copy (``_ops.install``'s
``bodies``; docs/architecture.md, "A new ranking channel"). Each function's result type changes,
so each is dropped and created again (``_ops.replace_function``; on Citus ``agent_retrieve`` is
distributed again as it was).

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-02
"""

from __future__ import annotations

from actrone_pg.migrations._ops import replace_function

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | None = None
depends_on: str | None = None

#: The functions' argument types (unchanged since 0013, 0015 and 0014).
HYBRID_SEARCH = (
    "text, text, text[], {vector_schema}.vector, double precision, integer, boolean, integer,"
    " double precision[], double precision, double precision, timestamptz, boolean, text[],"
    " double precision, double precision, text[], bigint, bigint, integer[]"
)
RETRIEVE = (
    "text, text, integer, double precision, text, text[], {vector_schema}.vector,"
    " double precision, integer, boolean, integer, double precision[], double precision,"
    " double precision, timestamptz, double precision, double precision, bigint, integer"
)
AGENT_RETRIEVE = (
    "text, text, integer, double precision, text, text[], {vector_schema}.vector,"
    " double precision, integer, boolean, integer, double precision[], double precision,"
    " double precision, timestamptz, text[], double precision, double precision, bigint,"
    " bigint, integer[], bigint, integer"
)


def upgrade() -> None:
    """Replace the three copies by this revision's."""
    replace_function("0019", "hybrid_search", HYBRID_SEARCH)
    replace_function("0019", "retrieve", RETRIEVE)
    replace_function("0019", "agent_retrieve", AGENT_RETRIEVE)


def downgrade() -> None:
    """Restore 0018's three copies."""
    replace_function("0018", "hybrid_search", HYBRID_SEARCH)
    replace_function("0018", "retrieve", RETRIEVE)
    replace_function("0018", "agent_retrieve", AGENT_RETRIEVE)
