"""Memory lifecycle: expiry, lineage and versions of a memory, with their views.

Adds to ``memories`` the fields :class:`actrone_pg.models.Memory` gained: ``expires_at``,
``source_turn_ids`` (the turns a consolidated memory came from), ``version``, ``valid_from``
and ``valid_to``. ``memories`` keeps holding exactly one row per memory, its current version,
so search, the BM25 statistics and counts are unchanged (and cost nothing more); a version an
update replaces moves to ``memory_history`` (its text and fields, not its vector). The views
``memory_versions`` (every version, current ones with ``valid_to`` NULL) and ``memory_lineage``
(one row per memory and source turn) are pinned here (``sql/0012_*.sql``).

Two indexes: the expiring memories' (a search's look-up of an agent's expired memories, and the
sweeper's, across agents, of the few rows that have an expiry) and the listing's (an agent's
memories newest first, the cursor's key); built in the transaction on an empty table, else
concurrently, as 0002 does.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

from actrone_pg.migrations._ops import drop_view, execute, install, schema_name, template

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | None = None
depends_on: str | None = None

_INDEXES = {
    "ix_memories_agent_id_expires_at": (
        " ix_memories_agent_id_expires_at ON {schema}.memories (agent_id, expires_at)"
        " WHERE expires_at IS NOT NULL"
    ),
    "ix_memories_agent_id_created_at_id": (
        " ix_memories_agent_id_created_at_id ON {schema}.memories (agent_id, created_at, id)"
    ),
}


def _key() -> sa.Text:
    return sa.Text(collation="C")


def _timestamp(name: str, *, nullable: bool = True) -> sa.Column[Any]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    """Add the columns, the history table, the indexes and the views."""
    schema = schema_name()
    op.add_column("memories", _timestamp("expires_at"), schema=schema)
    op.add_column(
        "memories",
        sa.Column(
            "source_turn_ids", ARRAY(sa.Text), nullable=False, server_default=sa.text("'{}'")
        ),
        schema=schema,
    )
    op.add_column(
        "memories",
        sa.Column("version", sa.Integer, nullable=False, server_default=sa.text("1")),
        schema=schema,
    )
    op.add_column("memories", _timestamp("valid_from"), schema=schema)
    op.add_column("memories", _timestamp("valid_to"), schema=schema)
    op.create_table(
        "memory_history",
        sa.Column("agent_id", _key(), nullable=False),
        sa.Column("id", _key(), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("session_id", _key(), nullable=True),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("content_type", sa.Text, nullable=False),
        sa.Column("importance", sa.Float(precision=53), nullable=False),
        sa.Column("tags", ARRAY(sa.Text), nullable=False),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("sensitivity", sa.Text, nullable=False),
        _timestamp("created_at", nullable=False),
        sa.Column("metadata", JSONB, nullable=False),
        sa.Column("embedder", _key(), nullable=False),
        sa.Column("token_count", sa.Integer, nullable=False),
        _timestamp("expires_at"),
        sa.Column("source_turn_ids", ARRAY(sa.Text), nullable=False),
        _timestamp("valid_from"),
        _timestamp("valid_to", nullable=False),
        sa.PrimaryKeyConstraint("agent_id", "id", "version", name="pk_memory_history"),
        schema=schema,
    )
    bind = op.get_bind()
    populated = bind.exec_driver_sql(
        template("SELECT EXISTS (SELECT 1 FROM {schema}.memories)", schema=schema).as_string()
    ).scalar()
    if not populated:
        for body in _INDEXES.values():
            execute(template("CREATE INDEX" + body, schema=schema))
    else:
        with op.get_context().autocommit_block():
            for name, body in _INDEXES.items():
                # A failed concurrent build leaves an INVALID index behind; a retry rebuilds it.
                execute(
                    template(
                        "DROP INDEX CONCURRENTLY IF EXISTS {schema}.{name}",
                        schema=schema,
                        name=name,
                    )
                )
                execute(template("CREATE INDEX CONCURRENTLY" + body, schema=schema))
    install("0012", "memory_versions")
    install("0012", "memory_lineage")


def downgrade() -> None:
    """Drop the views, the indexes, the history table and the columns (versions are lost)."""
    schema = schema_name()
    drop_view("memory_lineage")
    drop_view("memory_versions")
    for name in _INDEXES:
        execute(template("DROP INDEX IF EXISTS {schema}.{name}", schema=schema, name=name))
    op.drop_table("memory_history", schema=schema)
    for column in ("valid_to", "valid_from", "version", "source_turn_ids", "expires_at"):
        op.drop_column("memories", column, schema=schema)
