"""Helpers for the migration scripts: the schema in force, and SQL composed with psycopg.sql.

Functions and views follow Alembic's "replaceable objects" recipe: a revision that creates or
changes one installs its own pinned copy, ``sql/<revision>_<object>.sql`` beside this module
(:func:`install`), and its downgrade installs the copy of the revision before it, or drops the
object. A copy is never edited once its revision exists: the database at a given revision holds
exactly what that revision was written with, whatever the library's version, and an old
upgrade path keeps working when a later revision changes a function's arguments. Changing a
function or a view means a new revision with a new copy (docs/postgres.md, "Changing a function
or a view").
"""

from __future__ import annotations

import re
from importlib import resources

from alembic import op
from psycopg import sql

from actrone_pg.migrations import validate_schema

__all__ = [
    "drop_function",
    "drop_view",
    "execute",
    "install",
    "pinned",
    "pinned_names",
    "schema_name",
    "template",
    "vector_schema",
]

_PINNED = re.compile(r"^(\d{4})_([a-z_]+)\.sql$")


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


def pinned(revision: str, name: str) -> str:
    """The text of object ``name`` as ``revision`` pinned it (``sql/<revision>_<name>.sql``).

    One ``CREATE OR REPLACE`` statement, whose ``{schema}`` and ``{vector_schema}``
    placeholders :func:`install` fills with quoted identifiers.
    """
    filename = f"{revision}_{name}.sql"
    if not _PINNED.match(filename):
        raise ValueError(f"not a pinned SQL file: {filename!r}")
    return (
        resources.files("actrone_pg.migrations")
        .joinpath("sql", filename)
        .read_text(encoding="utf-8")
    )


def pinned_names() -> list[tuple[str, str]]:
    """Every pinned copy shipped, as ``(revision, object)`` pairs in revision order."""
    folder = resources.files("actrone_pg.migrations").joinpath("sql")
    found = (_PINNED.match(entry.name) for entry in folder.iterdir())
    return sorted((m[1], m[2]) for m in found if m)


def install(revision: str, name: str) -> None:
    """CREATE OR REPLACE object ``name`` from the copy ``revision`` pinned."""
    execute(template(pinned(revision, name), schema=schema_name(), vector_schema=vector_schema()))


def drop_function(name: str, arguments: str) -> None:
    """Drop the function ``name(arguments)``, if there is one.

    ``arguments`` is its argument type list (overloads are told apart by it) and may name
    ``{vector_schema}``. A revision that changes a function's argument list drops the old one
    first: ``CREATE OR REPLACE`` would otherwise keep both as overloads.
    """
    execute(
        template(
            "DROP FUNCTION IF EXISTS {schema}.{name}(" + arguments + ")",
            schema=schema_name(),
            vector_schema=vector_schema(),
            name=name,
        )
    )


def drop_view(name: str) -> None:
    """Drop the view ``name``, if there is one."""
    execute(template("DROP VIEW IF EXISTS {schema}.{name}", schema=schema_name(), name=name))
