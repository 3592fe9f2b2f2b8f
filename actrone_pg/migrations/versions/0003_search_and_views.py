"""The hybrid search function, its query-term helper, and the inspection views.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

from actrone_pg import sql as sql_files
from actrone_pg.migrations._ops import (
    execute,
    install_hybrid_search,
    schema_name,
    template,
    vector_schema,
)

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Install hybrid_search(), query_terms() and the views."""
    schema = schema_name()
    vschema = vector_schema()
    install_hybrid_search()
    execute(template(sql_files.load("query_terms"), schema=schema))
    # One statement per execute: the driver may use the extended protocol, which takes one.
    for statement in sql_files.load("views").split(";\n\n"):
        execute(template(statement, schema=schema, vector_schema=vschema))


def downgrade() -> None:
    """Drop the views and functions."""
    schema = schema_name()
    for view in ("memory_overview", "recent_turns", "session_overview"):
        execute(template("DROP VIEW IF EXISTS {schema}.{view}", schema=schema, view=view))
    execute(template("DROP FUNCTION IF EXISTS {schema}.query_terms(text)", schema=schema))
    # By name: later revisions change its argument list (0006 adds one); there is only ever one.
    execute(template("DROP FUNCTION IF EXISTS {schema}.hybrid_search", schema=schema))
