"""The baseline of release 0.1.0: the whole schema, tables, functions and views, in one revision.

Runs the files ``manifest.json`` lists for it (``sql/0024_*.sql``; :mod:`actrone_pg.migrations.
_files` describes them): the tables and their indexes, then the functions and views; on a Citus
coordinator, when ``postgres_distribute`` says so (:func:`_ops.distributes`), the distribution
(``sql/0024_distribute.sql``). The tables are new, hence empty: indexes are built in the
transaction, and nothing is left behind if anything fails.

Revisions 0001 to 0023 were the pre-release history of this schema; 0024 creates what 0023 left.
A database at 0023 is moved to 0024 without a change to its tables (env.py,
:func:`actrone_pg.migrations._legacy.adopt`).

Revision ID: 0024
Revises:
Create Date: 2026-12-05
"""

from __future__ import annotations

from actrone_pg.migrations import _files
from actrone_pg.migrations._ops import (
    distributes,
    drop_function,
    drop_view,
    execute,
    install,
    schema_name,
    template,
)

revision: str = "0024"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None

#: The functions the baseline creates, by argument types (a downgrade drops them by these).
FUNCTIONS = {
    "agent_write": "text, text[], text[], integer[], integer, bigint, boolean, text, text",
    "retrieve": (
        "text, text, integer, double precision, text, text[], {vector_schema}.vector,"
        " double precision, integer, boolean, integer, double precision[], double precision,"
        " double precision, timestamptz, double precision, double precision, bigint, integer,"
        " jsonb, integer"
    ),
    "hybrid_search": (
        "text, text, text[], {vector_schema}.vector, double precision, integer, boolean,"
        " integer, double precision[], double precision, double precision, timestamptz,"
        " boolean, text[], double precision, double precision, text[], bigint, bigint,"
        " integer[]"
    ),
    "pack_positions": "integer[], bigint, integer",
    "query_terms": "text",
}
#: Its views.
VIEWS = ("memory_lineage", "memory_versions", "memory_overview", "recent_turns", "session_overview")
#: Its tables, in an order that drops each before the ones its foreign keys name.
TABLES = (
    "locks",
    "agent_stats",
    "term_stats",
    "memory_history",
    "memories",
    "turns",
    "sessions",
    "embedders",
    "settings",
)


def upgrade() -> None:
    """Create the extension (if missing), the tables, functions and views; distribute them."""
    execute("CREATE EXTENSION IF NOT EXISTS vector")
    files = _files.revision(revision)
    for name in files.tables + files.objects:
        install(name)
    if distributes():
        for name in files.citus:
            install(name)


def downgrade() -> None:
    """Drop everything the baseline created (the extension stays: other schemas may use it)."""
    schema = schema_name()
    for view in VIEWS:
        drop_view(view)
    for name, arguments in FUNCTIONS.items():
        drop_function(name, arguments)
    for table in TABLES:
        execute(template("DROP TABLE IF EXISTS {schema}.{table}", schema=schema, table=table))
