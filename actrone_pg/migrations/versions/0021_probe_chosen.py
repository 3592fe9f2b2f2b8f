"""agent_retrieve reads the chosen memories by a probe each, as retrieve() does.

Installs ``agent_retrieve`` (``sql/0021_agent_retrieve.sql``): 0020's function, its statement's
tail as 0019's ``retrieve``: the ranked rows keep the columns read after them, and each chosen
memory is one primary-key probe instead of a join that read every memory of the agent. The
``EXECUTE`` on the agent's worker is written by the migrations in the prepared statement's
parameter order. docs/scale-out.md, "Migration 0021", has what it saves.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-03
"""

from __future__ import annotations

from actrone_pg.migrations._ops import install

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Replace agent_retrieve (same arguments and result: CREATE OR REPLACE)."""
    install("0021", "agent_retrieve")


def downgrade() -> None:
    """Restore 0020's agent_retrieve."""
    install("0020", "agent_retrieve")
