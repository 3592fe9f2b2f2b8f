"""Memories' rows stay whole, uncompressed, up to a page: ``toast_tuple_target = 8160``.

At PostgreSQL's default target (about 2 KB) a memory of a sentence or two, with its 384-float
vector, is over it: the server compresses its ``term_freqs`` (and its content), and past that
moves the vector out of line. Every search then decompresses the ``term_freqs`` of each
candidate it scores (BM25), and a filtered search fetches the vectors from the TOAST table.
With the target at a page's room, rows up to that size are stored as written; larger ones (a
megabyte of text) are compressed and moved as before. docs/postgres.md, "Rows as written", has
what it saves and costs. It applies to rows written from then on (``actrone-pg reindex``
rewrites every memory's terms).

On a schema distributed with Citus, the setting reaches every shard (Citus propagates it).

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-03
"""

from __future__ import annotations

from actrone_pg.migrations._ops import execute, schema_name, template

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | None = None
depends_on: str | None = None

#: The largest target PostgreSQL accepts: a heap page's room for one tuple.
TARGET = 8160


def upgrade() -> None:
    """Set memories' toast_tuple_target to a page's room."""
    execute(
        template(
            f"ALTER TABLE {{schema}}.memories SET (toast_tuple_target = {TARGET})",
            schema=schema_name(),
        )
    )


def downgrade() -> None:
    """Back to PostgreSQL's default target (rows written meanwhile stay as they are)."""
    execute(
        template("ALTER TABLE {schema}.memories RESET (toast_tuple_target)", schema=schema_name())
    )
