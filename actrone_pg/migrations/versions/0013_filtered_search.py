"""hybrid_search() ranks a filtered set with its own statistics and skips expired memories.

Installs the function as this revision pinned it (``sql/0013_hybrid_search.sql``): 0011's with
four last arguments, ``p_excluded`` (ids never admitted: the agent's expired memories not yet
swept) and ``p_n_docs``, ``p_total_length``, ``p_doc_freqs`` (BM25 statistics replacing the
agent's: those of a filtered set, spec §9.3). Without them it ranks exactly as 0011 does.

Two GIN indexes let a selective filter find its memories without reading the agent's rows:
``tags`` (``&&``, ``@>``) and ``metadata`` (``@>``, ``jsonb_path_ops``). Built in the transaction
on an empty table, else concurrently, as 0002 does.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

from actrone_pg.migrations._ops import drop_function, execute, install, schema_name, template

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | None = None
depends_on: str | None = None

#: hybrid_search's argument types before this revision (0011, 0012).
PREVIOUS_ARGUMENTS = (
    "text, text, text[], {vector_schema}.vector, double precision, integer, boolean, integer,"
    " double precision[], double precision, double precision, timestamptz, boolean, text[],"
    " double precision, double precision"
)
#: hybrid_search's argument types in this revision.
ARGUMENTS = PREVIOUS_ARGUMENTS + ", text[], bigint, bigint, integer[]"

_INDEXES = {
    "ix_memories_tags": " ix_memories_tags ON {schema}.memories USING gin (tags)",
    "ix_memories_metadata": (
        " ix_memories_metadata ON {schema}.memories USING gin (metadata jsonb_path_ops)"
    ),
}


def upgrade() -> None:
    """Replace the 16-argument function with 0013's copy; build the filter indexes."""
    drop_function("hybrid_search", PREVIOUS_ARGUMENTS)
    install("0013", "hybrid_search")
    schema = schema_name()
    populated = (
        op.get_bind()
        .exec_driver_sql(
            template("SELECT EXISTS (SELECT 1 FROM {schema}.memories)", schema=schema).as_string()
        )
        .scalar()
    )
    if not populated:
        for body in _INDEXES.values():
            execute(template("CREATE INDEX" + body, schema=schema))
        return
    with op.get_context().autocommit_block():
        for name, body in _INDEXES.items():
            # A failed concurrent build leaves an INVALID index behind; a retry rebuilds it.
            execute(
                template(
                    "DROP INDEX CONCURRENTLY IF EXISTS {schema}.{name}", schema=schema, name=name
                )
            )
            execute(template("CREATE INDEX CONCURRENTLY" + body, schema=schema))


def downgrade() -> None:
    """Drop the indexes; replace the 20-argument function with 0011's copy."""
    schema = schema_name()
    for name in _INDEXES:
        execute(template("DROP INDEX IF EXISTS {schema}.{name}", schema=schema, name=name))
    drop_function("hybrid_search", ARGUMENTS)
    install("0011", "hybrid_search")
