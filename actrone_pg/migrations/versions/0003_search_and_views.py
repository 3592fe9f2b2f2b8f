"""The hybrid search function, its query-term helper, and the inspection views.

Installs the copies this revision pinned (``sql/0003_*.sql``). The function is the one the
store of this revision called with twelve arguments. (Until 0005 was written, this revision
installed whatever ``hybrid_search.sql`` held, and the file changed several times on the day;
the copy pinned here is its last text before 0005, which 0005 then only extends with
``SET enable_nestloop = off``.)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

from actrone_pg.migrations._ops import drop_function, drop_view, install

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None

#: hybrid_search's argument types in this revision.
HYBRID_SEARCH_ARGUMENTS = (
    "text, text, text[], {vector_schema}.vector, double precision, integer, boolean, integer,"
    " double precision[], double precision, double precision, timestamptz"
)


def upgrade() -> None:
    """Install hybrid_search(), query_terms() and the views."""
    install("0003", "hybrid_search")
    install("0003", "query_terms")
    install("0003", "session_overview")
    install("0003", "recent_turns")
    install("0003", "memory_overview")


def downgrade() -> None:
    """Drop the views and functions."""
    for view in ("memory_overview", "recent_turns", "session_overview"):
        drop_view(view)
    drop_function("query_terms", "text")
    drop_function("hybrid_search", HYBRID_SEARCH_ARGUMENTS)
