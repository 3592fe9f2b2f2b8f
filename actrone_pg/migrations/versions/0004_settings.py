"""A settings table: the text search configuration the lexical statistics were built with.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from actrone_pg.migrations._ops import schema_name

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create the settings table (one row per setting)."""
    op.create_table(
        "settings",
        sa.Column("name", sa.Text(collation="C"), nullable=False),
        sa.Column("value", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_settings"),
        schema=schema_name(),
    )


def downgrade() -> None:
    """Drop the settings table."""
    op.drop_table("settings", schema=schema_name())
