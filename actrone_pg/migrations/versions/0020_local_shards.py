"""On its worker, agent_retrieve reads the agent's shard tables by name, with a plan kept.

Installs ``agent_retrieve`` (``sql/0020_agent_retrieve.sql``): 0019's arguments, rows and ranking
(0019's ``hybrid_search`` body), VOLATILE (it prepares a statement). Where the node it runs on
holds the agent's shards, which is where Citus delegates the call, it runs the turns and the
ranking as one prepared statement over the shard tables, which Citus does not plan; elsewhere,
0019's statements over the distributed tables. On a server without Citus it is 0019's function.
docs/scale-out.md, "Where the difference goes", has what it saves.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-02
"""

from __future__ import annotations

from actrone_pg.migrations._ops import install

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Replace agent_retrieve (same arguments and result: CREATE OR REPLACE)."""
    install("0020", "agent_retrieve")


def downgrade() -> None:
    """Restore 0019's agent_retrieve (CREATE OR REPLACE sets STABLE again)."""
    install("0019", "agent_retrieve")
