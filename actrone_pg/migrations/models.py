"""The schema as SQLAlchemy metadata: what ``alembic check`` compares the database against.

The migrations under ``versions/`` are written by hand and reviewed; this module describes the
tables they produce, so that ``alembic check`` (run by the test suite) reports any drift between
the two. Views and SQL functions are not tables and are not compared; the migrations own them.

Every table is keyed by ``agent_id`` first, and every query of the store filters on it, so the
tables can be distributed by ``agent_id`` (Citus) or hash-partitioned on it without a query change.
Text keys use the "C" collation: ids then sort by code point, exactly as Python sorts strings
(the ranking's tie-break), and comparisons skip locale rules.
"""

from __future__ import annotations

import sqlalchemy as sa
from pgvector.sqlalchemy import VECTOR
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

__all__ = ["NAMING_CONVENTION", "build_metadata"]

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def _key() -> sa.Text:
    return sa.Text(collation="C")


def _now() -> sa.TextClause:
    return sa.text("now()")


def build_metadata(schema: str) -> sa.MetaData:
    """The tables of the actrone schema named ``schema`` (already validated by the caller)."""
    md = sa.MetaData(schema=schema, naming_convention=NAMING_CONVENTION)
    sa.Table(
        "embedders",
        md,
        sa.Column("name", _key(), primary_key=True),
        sa.Column("dimensions", sa.Integer, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=_now()),
        sa.CheckConstraint("dimensions > 0", name="dimensions_positive"),
    )
    sa.Table(
        "sessions",
        md,
        sa.Column("agent_id", _key(), primary_key=True),
        sa.Column("session_id", _key(), primary_key=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=_now()),
        sa.Column(
            "last_active_at", sa.DateTime(timezone=True), nullable=False, server_default=_now()
        ),
        sa.Column("metadata", JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
    )
    sa.Table(
        "turns",
        md,
        sa.Column("agent_id", _key(), primary_key=True),
        sa.Column("session_id", _key(), primary_key=True),
        sa.Column("id", _key(), primary_key=True),
        # Append order within a session (created_at can tie; a sequence cannot).
        sa.Column("seq", sa.BigInteger, sa.Identity(always=False), nullable=False),
        sa.Column("user_message", sa.Text, nullable=False),
        sa.Column("assistant_message", sa.Text, nullable=False),
        sa.Column("tool_results", JSONB, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("token_count", sa.Integer, nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id", "session_id"],
            ["sessions.agent_id", "sessions.session_id"],
            ondelete="CASCADE",
        ),
        sa.Index(None, "agent_id", "session_id", "seq"),
    )
    sa.Table(
        "memories",
        md,
        sa.Column("agent_id", _key(), primary_key=True),
        sa.Column("id", _key(), primary_key=True),
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
        # Lifecycle (0012): expiry, lineage, and the current version's number and start.
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "source_turn_ids", ARRAY(sa.Text), nullable=False, server_default=sa.text("'{}'")
        ),
        sa.Column("version", sa.Integer, nullable=False, server_default=sa.text("1")),
        sa.Column("valid_from", sa.DateTime(timezone=True), nullable=True),
        sa.Column("valid_to", sa.DateTime(timezone=True), nullable=True),
        # BM25 inputs, from actrone_pg.ranking.tokenize at write time: the document's length in
        # tokens and {term: count}.
        sa.Column("doc_len", sa.Integer, nullable=False),
        sa.Column("term_freqs", JSONB, nullable=False),
        # Untyped: each embedder has its own dimension (recorded in embedders), so a new model
        # needs no table rebuild. Vectors are only ever compared within one embedder.
        sa.Column("embedding", VECTOR(), nullable=False),
        sa.ForeignKeyConstraint(["embedder"], ["embedders.name"]),
        # The candidate scan: an index-only scan of this index reads one agent's vectors stored
        # together, whatever the heap order (docs/postgres.md, "Candidate search").
        sa.Index(
            "ix_memories_candidates",
            "agent_id",
            "embedder",
            postgresql_include=["created_at", "id", "embedding"],
            postgresql_where=sa.text("vector_dims(embedding) <= 600"),
        ),
        # Memories that expire: a search's look-up of the agent's expired ones, the sweeper's.
        sa.Index(
            None,
            "agent_id",
            "expires_at",
            postgresql_where=sa.text("expires_at IS NOT NULL"),
        ),
        # Filters (0013): a selective tag or metadata filter finds its memories here.
        sa.Index("ix_memories_tags", "tags", postgresql_using="gin"),
        sa.Index(
            "ix_memories_metadata",
            "metadata",
            postgresql_using="gin",
            postgresql_ops={"metadata": "jsonb_path_ops"},
        ),
        # list_memories: an agent's memories newest first (the cursor's key).
        sa.Index(None, "agent_id", "created_at", "id"),
    )
    sa.Table(
        # Versions that update_memory replaced; the current one stays in memories.
        "memory_history",
        md,
        sa.Column("agent_id", _key(), primary_key=True),
        sa.Column("id", _key(), primary_key=True),
        sa.Column("version", sa.Integer, primary_key=True),
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
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("source_turn_ids", ARRAY(sa.Text), nullable=False),
        sa.Column("valid_from", sa.DateTime(timezone=True), nullable=True),
        sa.Column("valid_to", sa.DateTime(timezone=True), nullable=False),
    )
    sa.Table(
        "term_stats",
        md,
        sa.Column("agent_id", _key(), primary_key=True),
        sa.Column("term", _key(), primary_key=True),
        sa.Column("df", sa.Integer, nullable=False),
    )
    sa.Table(
        "agent_stats",
        md,
        sa.Column("agent_id", _key(), primary_key=True),
        sa.Column("n_docs", sa.BigInteger, nullable=False),
        sa.Column("total_length", sa.BigInteger, nullable=False),
    )
    sa.Table(
        "locks",
        md,
        sa.Column("agent_id", _key(), primary_key=True),
        sa.Column("name", _key(), primary_key=True),
        sa.Column("holder", sa.Text, nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    sa.Table(
        "settings",
        md,
        # e.g. text_search_config: the term statistics are only valid for the one they used.
        sa.Column("name", _key(), primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
    )
    return md
