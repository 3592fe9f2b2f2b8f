"""Helpers for the migration scripts: the schema in force, and SQL composed with psycopg.sql.

Functions and views follow Alembic's "replaceable objects" recipe: a revision that creates or
changes one installs its own copy, a plain SQL file ``sql/<revision>_<object>.sql`` beside this
module (:func:`install`; the files and ``manifest.json`` are described in
:mod:`actrone_pg.migrations._files`), and its downgrade installs the copy of the revision before
it, or drops the object. A copy is never edited once its revision is released: the database at a
given revision holds exactly what that revision was written with, whatever the library's
version (docs/postgres.md, "Changing a function or a view").
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from alembic import op
from psycopg import sql

from actrone_pg.errors import SchemaError
from actrone_pg.migrations import _citus, _files, validate_schema

__all__ = [
    "distribute_function",
    "distribute_mode",
    "distributes",
    "drop_function",
    "drop_view",
    "execute",
    "install",
    "run",
    "schema_name",
    "template",
    "vector_schema",
]

logger = logging.getLogger("actrone_pg.migrations")


def schema_name() -> str:
    """The actrone schema being migrated (the version table lives in it)."""
    schema = op.get_context().opts.get("version_table_schema")
    return validate_schema(schema)


def vector_schema() -> str:
    """The schema pgvector is installed in (its types and operators are qualified with it)."""
    rows = run(_files.VECTOR_SCHEMA)
    if not rows or not isinstance(rows[0][0], str):
        raise RuntimeError("pgvector is not installed in this database")
    return rows[0][0]


def execute(statement: sql.Composable | str) -> None:
    """Run a composed statement, or several as text (identifiers quoted already; no values).

    Sent without a parameter list, so that a ``%`` in it (a PL/pgSQL ``format()``) reaches the
    server as written instead of being read as a placeholder by the driver.
    """
    text = statement if isinstance(statement, str) else statement.as_string()
    op.get_bind().exec_driver_sql(text, execution_options={"no_parameters": True})


def template(text: str, **identifiers: str) -> sql.Composed:
    """``text`` with each ``{name}`` replaced by the quoted identifier ``identifiers[name]``."""
    return sql.SQL(text).format(**{k: sql.Identifier(v) for k, v in identifiers.items()})


def install(filename: str) -> None:
    """Run ``sql/<filename>`` with the schema's and pgvector's schema names filled in."""
    execute(_files.fill(_files.read(filename), schema_name(), vector_schema()))


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


def run(statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """Run ``statement`` with bound ``params`` on the migration's connection; its rows."""
    result = op.get_bind().exec_driver_sql(statement, tuple(params))
    return [tuple(r) for r in result] if result.returns_rows else []


def distribute_mode() -> str:
    """``postgres_distribute`` for this run (env.py resolves it: "auto", "citus" or "off")."""
    mode = op.get_context().opts.get("actrone_distribute") or "auto"
    return str(mode)


def distributes() -> bool:
    """Whether this run distributes a new schema with Citus, as ``postgres_distribute`` says.

    "off": never. "citus": always (a server without the citus extension is an error). "auto":
    when the server has Citus. A schema migrated without it is distributed, with its rows, by
    ``actrone-pg migrate --distribute`` (docs/scale-out.md, "From one server").
    """
    mode = distribute_mode()
    if mode == "off":
        return False
    if _citus.citus_installed(run):
        return True
    if mode == "citus":
        raise SchemaError(
            "postgres_distribute='citus', but this server has no citus extension: run the "
            "migrations on a Citus coordinator (docs/scale-out.md), or set "
            "postgres_distribute='auto' or 'off'"
        )
    return False


def distribute_function(signature: str, *, force_delegation: bool = False) -> bool:
    """Distribute the schema's function ``signature`` by its first argument (``agent_id``).

    ``signature`` is the function's name and argument types, unqualified and may name
    ``{vector_schema}``, as :func:`drop_function` takes them: ``"f(text, {vector_schema}.vector)"``.
    Colocated with ``memories``, so that ``SELECT * FROM f(agent, ...)`` called alone runs whole
    on the worker holding that agent's shards. A no-op (``False``) unless the schema is
    distributed (off Citus, with ``postgres_distribute="off"``, before ``migrate --distribute``).
    A later revision that installs a per-agent function calls this right after installing it.
    """
    name, _, arguments = signature.partition("(")
    qualified = template(
        "{schema}.{name}(" + arguments,
        schema=schema_name(),
        vector_schema=vector_schema(),
        name=name.strip(),
    ).as_string()
    return _citus.distribute_function(
        run, schema_name(), qualified, force_delegation=force_delegation
    )
