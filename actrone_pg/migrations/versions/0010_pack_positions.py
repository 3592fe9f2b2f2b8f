"""pack_positions(): the memories of a ranking that fit a token budget, chosen in SQL.

Installs ``{schema}.pack_positions(costs, budget, max_items)`` as this revision pinned it
(``sql/0010_pack_positions.sql``), the greedy packing of spec §3.3
(``actrone_pg.budget.pack_costs``) as a function. The store calls it in the statement that ranks
the candidates and reads the chosen memories, so ``retrieve_context`` gets its L2 share in one
statement and one round trip instead of two statements in a transaction.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-30
"""

from __future__ import annotations

from actrone_pg.migrations._ops import drop_function, install

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Install the function."""
    install("0010", "pack_positions")


def downgrade() -> None:
    """Drop it (the store of revision 0009 packs in Python)."""
    drop_function("pack_positions", "integer[], bigint, integer")
