"""${message}

Revision ID: ${up_revision}
Revises: ${down_revision | comma,n}
Create Date: ${create_date}
"""

from __future__ import annotations

from alembic import op

from actrone_pg.migrations._ops import schema_name

revision: str = ${repr(up_revision)}
down_revision: str | None = ${repr(down_revision)}
branch_labels: str | None = ${repr(branch_labels)}
depends_on: str | None = ${repr(depends_on)}


def upgrade() -> None:
    """Apply this revision."""
    schema = schema_name()
    ${upgrades if upgrades else "del schema"}


def downgrade() -> None:
    """Revert this revision."""
    schema = schema_name()
    ${downgrades if downgrades else "del schema"}
