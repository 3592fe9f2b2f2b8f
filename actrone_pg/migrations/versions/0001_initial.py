"""Tables: embedders, sessions, turns, memories, BM25 statistics and locks.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from pgvector.sqlalchemy import VECTOR
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

from actrone_pg.migrations._ops import schema_name

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def _key() -> sa.Text:
    return sa.Text(collation="C")


def upgrade() -> None:
    """Create the extension (if missing) and every table, keyed by agent_id first."""
    schema = schema_name()
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    now = sa.text("now()")
    op.create_table(
        "embedders",
        sa.Column("name", _key(), nullable=False),
        sa.Column("dimensions", sa.Integer, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=now),
        sa.PrimaryKeyConstraint("name", name="pk_embedders"),
        sa.CheckConstraint("dimensions > 0", name="ck_embedders_dimensions_positive"),
        schema=schema,
    )
    op.create_table(
        "sessions",
        sa.Column("agent_id", _key(), nullable=False),
        sa.Column("session_id", _key(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=now),
        sa.Column("last_active_at", sa.DateTime(timezone=True), nullable=False, server_default=now),
        sa.Column("metadata", JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.PrimaryKeyConstraint("agent_id", "session_id", name="pk_sessions"),
        schema=schema,
    )
    op.create_table(
        "turns",
        sa.Column("agent_id", _key(), nullable=False),
        sa.Column("session_id", _key(), nullable=False),
        sa.Column("id", _key(), nullable=False),
        sa.Column("seq", sa.BigInteger, sa.Identity(always=False), nullable=False),
        sa.Column("user_message", sa.Text, nullable=False),
        sa.Column("assistant_message", sa.Text, nullable=False),
        sa.Column("tool_results", JSONB, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("token_count", sa.Integer, nullable=False),
        sa.PrimaryKeyConstraint("agent_id", "session_id", "id", name="pk_turns"),
        sa.ForeignKeyConstraint(
            ["agent_id", "session_id"],
            [f"{schema}.sessions.agent_id", f"{schema}.sessions.session_id"],
            name="fk_turns_agent_id_sessions",
            ondelete="CASCADE",
        ),
        schema=schema,
    )
    op.create_index(
        "ix_turns_agent_id_session_id_seq",
        "turns",
        ["agent_id", "session_id", "seq"],
        schema=schema,
    )
    op.create_table(
        "memories",
        sa.Column("agent_id", _key(), nullable=False),
        sa.Column("id", _key(), nullable=False),
        sa.Column("session_id", _key(), nullable=True),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("content_type", sa.Text, nullable=False),
        sa.Column("importance", sa.Float(precision=53), nullable=False),
        sa.Column("tags", ARRAY(sa.Text), nullable=False),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("sensitivity", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("metadata", JSONB, nullable=False),
        sa.Column("embedder", _key(), nullable=False),
        sa.Column("token_count", sa.Integer, nullable=False),
        sa.Column("doc_len", sa.Integer, nullable=False),
        sa.Column("term_freqs", JSONB, nullable=False),
        sa.Column("embedding", VECTOR(), nullable=False),
        sa.PrimaryKeyConstraint("agent_id", "id", name="pk_memories"),
        sa.ForeignKeyConstraint(
            ["embedder"], [f"{schema}.embedders.name"], name="fk_memories_embedder_embedders"
        ),
        schema=schema,
    )
    op.create_table(
        "term_stats",
        sa.Column("agent_id", _key(), nullable=False),
        sa.Column("term", _key(), nullable=False),
        sa.Column("df", sa.Integer, nullable=False),
        sa.PrimaryKeyConstraint("agent_id", "term", name="pk_term_stats"),
        schema=schema,
    )
    op.create_table(
        "agent_stats",
        sa.Column("agent_id", _key(), nullable=False),
        sa.Column("n_docs", sa.BigInteger, nullable=False),
        sa.Column("total_length", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("agent_id", name="pk_agent_stats"),
        schema=schema,
    )
    op.create_table(
        "locks",
        sa.Column("agent_id", _key(), nullable=False),
        sa.Column("name", _key(), nullable=False),
        sa.Column("holder", sa.Text, nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("agent_id", "name", name="pk_locks"),
        schema=schema,
    )


def downgrade() -> None:
    """Drop every table (the extension stays: other schemas may use it)."""
    schema = schema_name()
    for table in ("locks", "agent_stats", "term_stats", "memories", "turns", "sessions"):
        op.drop_table(table, schema=schema)
    op.drop_table("embedders", schema=schema)
