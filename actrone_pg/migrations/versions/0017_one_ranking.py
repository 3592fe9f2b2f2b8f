"""agent_retrieve() ranks with hybrid_search's own statement: the ranking has one text.

Installs ``agent_retrieve`` as this revision pinned it (``sql/0017_agent_retrieve.sql``): 0014's
arguments and rows, its L1 read and packing as before, and in place of 0014's PL/pgSQL copy of
0013's ranking the body of ``sql/0016_hybrid_search.sql`` itself, taken verbatim when the copy
is read (``_ops.pinned``'s ``{{body ...}}`` line). The ranking is the same bit for bit (0016
ranks as 0013 did, in fewer passes); a schema distributed with Citus now ranks with 0016's
leaner passes too. ``hybrid_search`` (SQL, the psql-callable function that ``retrieve()`` calls)
stays 0016's copy; a later change of the ranking pins a new ``hybrid_search`` and a new
``agent_retrieve`` naming its body (docs/architecture.md, "A new ranking channel").

On a distributed schema ``CREATE OR REPLACE`` keeps 0014's distribution of the function (by its
first argument, colocated with ``memories``) and Citus propagates the new body to the workers.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02
"""

from __future__ import annotations

from actrone_pg.migrations._ops import install

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Replace 0014's copy with this revision's (same argument list: CREATE OR REPLACE)."""
    install("0017", "agent_retrieve")


def downgrade() -> None:
    """Restore 0014's copy."""
    install("0014", "agent_retrieve")
