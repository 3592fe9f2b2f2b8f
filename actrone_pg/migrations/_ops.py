"""Helpers for the migration scripts: the schema in force and SQL composed with psycopg.sql."""

from __future__ import annotations

from alembic import op
from psycopg import sql

from actrone_pg import sql as sql_files
from actrone_pg.migrations import validate_schema

__all__ = [
    "execute",
    "install_hybrid_search",
    "replace_hybrid_search",
    "reset_hybrid_search_setting",
    "schema_name",
    "template",
    "vector_schema",
]


def schema_name() -> str:
    """The actrone schema being migrated (the version table lives in it)."""
    schema = op.get_context().opts.get("version_table_schema")
    return validate_schema(schema)


def vector_schema() -> str:
    """The schema pgvector is installed in (its types and operators are qualified with it)."""
    name = (
        op.get_bind()
        .exec_driver_sql(
            "SELECT n.nspname FROM pg_extension AS e"
            " JOIN pg_namespace AS n ON n.oid = e.extnamespace WHERE e.extname = 'vector'"
        )
        .scalar()
    )
    if not isinstance(name, str):
        raise RuntimeError("pgvector is not installed in this database")
    return name


def execute(statement: sql.Composable) -> None:
    """Run a composed statement (identifiers quoted by psycopg.sql; no values)."""
    op.get_bind().exec_driver_sql(statement.as_string())


def template(text: str, **identifiers: str) -> sql.Composed:
    """``text`` with each ``{name}`` replaced by the quoted identifier ``identifiers[name]``."""
    return sql.SQL(text).format(**{k: sql.Identifier(v) for k, v in identifiers.items()})


def replace_hybrid_search(previous_arguments: str) -> None:
    """Drop ``hybrid_search`` with the argument types it had, then install the current one.

    For revisions that change its argument list: PostgreSQL would otherwise keep the old one as
    an overload. ``previous_arguments`` may name ``{vector_schema}``.
    """
    schema, vschema = schema_name(), vector_schema()
    execute(
        template(
            "DROP FUNCTION IF EXISTS {schema}.hybrid_search(" + previous_arguments + ")",
            schema=schema,
            vector_schema=vschema,
        )
    )
    install_hybrid_search()


def install_hybrid_search() -> None:
    """CREATE OR REPLACE ``hybrid_search`` from the current ``sql/hybrid_search.sql``.

    For revisions that change only its body or settings (the argument list stays).
    """
    execute(
        template(
            sql_files.load("hybrid_search"), schema=schema_name(), vector_schema=vector_schema()
        )
    )


def reset_hybrid_search_setting(setting: str) -> None:
    """Drop one ``SET`` clause from ``hybrid_search`` (downgrades of revisions that added one).

    By name, without an argument list: the function is never overloaded (see
    :func:`replace_hybrid_search`).
    """
    execute(
        template(
            "ALTER FUNCTION {schema}.hybrid_search RESET {setting}",
            schema=schema_name(),
            setting=setting,
        )
    )
