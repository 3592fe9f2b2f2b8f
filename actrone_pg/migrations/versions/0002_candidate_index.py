"""The candidate index: each agent's vectors stored together in a covering btree.

Built with CREATE INDEX CONCURRENTLY outside the migration transaction, so that upgrading a
populated database does not block writers (an index over millions of vectors takes minutes).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

from actrone_pg.migrations._ops import execute, schema_name, template, vector_schema

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None

COLUMNS = " ix_memories_candidates ON {schema}.memories (agent_id, embedder)"
# A btree entry holds at most 2704 bytes: vectors up to 600 dimensions (2408 bytes) are included;
# larger ones (e.g. 1536-d) are scanned through the primary key instead (see hybrid_search.sql).
INCLUDE = " INCLUDE (created_at, id, embedding) WHERE {vector_schema}.vector_dims(embedding) <= 600"
CREATE = "CREATE INDEX" + COLUMNS + INCLUDE
CREATE_CONCURRENTLY = "CREATE INDEX CONCURRENTLY" + COLUMNS + INCLUDE


def upgrade() -> None:
    """Create the candidate index: in the transaction if the table is empty, else concurrently."""
    schema = schema_name()
    bind = op.get_bind()
    populated = bind.exec_driver_sql(
        template("SELECT EXISTS (SELECT 1 FROM {schema}.memories)", schema=schema).as_string()
    ).scalar()
    if not populated:
        # A fresh install: building on an empty table is instant, and staying inside the
        # migration transaction keeps a failed first install from leaving anything behind.
        # (CONCURRENTLY would also wait for every older transaction in the database.)
        execute(template(CREATE, schema=schema, vector_schema=vector_schema()))
        return
    with op.get_context().autocommit_block():
        # A failed concurrent build leaves an INVALID index behind; drop it so a retry rebuilds.
        execute(
            template(
                "DROP INDEX CONCURRENTLY IF EXISTS {schema}.ix_memories_candidates",
                schema=schema,
            )
        )
        execute(template(CREATE_CONCURRENTLY, schema=schema, vector_schema=vector_schema()))


def downgrade() -> None:
    """Drop the candidate index."""
    schema = schema_name()
    with op.get_context().autocommit_block():
        execute(
            template(
                "DROP INDEX CONCURRENTLY IF EXISTS {schema}.ix_memories_candidates",
                schema=schema,
            )
        )
