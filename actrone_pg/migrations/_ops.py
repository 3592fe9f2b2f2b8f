"""Helpers for the migration scripts: the schema in force, and SQL composed with psycopg.sql.

Functions and views follow Alembic's "replaceable objects" recipe: a revision that creates or
changes one installs its own pinned copy, ``sql/<revision>_<object>.sql`` beside this module
(:func:`install`), and its downgrade installs the copy of the revision before it, or drops the
object. A copy is never edited once its revision exists: the database at a given revision holds
exactly what that revision was written with, whatever the library's version, and an old
upgrade path keeps working when a later revision changes a function's arguments. Changing a
function or a view means a new revision with a new copy (docs/postgres.md, "Changing a function
or a view").

A copy may take another copy's body instead of repeating it: a line ``{{body <rev>_<name>}}``
stands for the body of that pinned copy (its text between ``AS $$`` and ``$$``), verbatim; only
a copy of the same revision or an older one, so that it never changes either. That is how the
ranking has one text: ``agent_retrieve`` (0017) runs ``hybrid_search``'s statement (0016) in
PL/pgSQL, which Citus can plan, instead of a copy of it (docs/scale-out.md). A later revision
may install an older copy with such a line standing for a newer copy's body instead
(:func:`install`'s ``bodies``): a change of the ranking alone is then one new copy of
``hybrid_search`` (docs/architecture.md, "A new ranking channel").
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

from alembic import op
from psycopg import sql

from actrone_pg.errors import SchemaError
from actrone_pg.migrations import _citus, validate_schema

__all__ = [
    "distribute_function",
    "distribute_mode",
    "distribute_schema",
    "drop_function",
    "drop_view",
    "execute",
    "run",
    "install",
    "pinned",
    "pinned_body",
    "pinned_names",
    "replace_function",
    "schema_name",
    "template",
    "vector_schema",
    "with_bodies",
]

logger = logging.getLogger("actrone_pg.migrations")

_PINNED = re.compile(r"^(\d{4})_([a-z_]+)\.sql$")
#: A line standing for another pinned copy's body (see the module's docstring).
_BODY = re.compile(r"^\{\{body (\d{4})_([a-z_]+)\}\}$", re.M)
#: A statement of a PL/pgSQL copy that the copy also prepares (see :func:`prepared`), where it
#: runs as written; ``{{prepared}}`` stands for its ``PREPARE`` text, quoted for ``format()``.
_STATEMENT = re.compile(r"^\{\{statement\n(.*?)\n\}\}", re.M | re.S)
_PREPARED = "{{prepared}}"
#: Where the copy names the prepared statement: a prefix, ``actrone_<digest of its text>_``.
_PREPARED_NAME = "{{prepared_name}}"
#: Where the copy writes the ``EXECUTE`` of it: a ``format()`` call, with the name in the
#: variable the placeholder names and the call's values in the ``$n`` order (:func:`execute_call`).
_PREPARED_EXECUTE = re.compile(r"\{\{prepared_execute (v_[a-z_]+)\}\}")


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
    """Run a composed statement (identifiers quoted by psycopg.sql; no values).

    Sent without a parameter list, so that a ``%`` in it (a PL/pgSQL ``format()``) reaches the
    server as written instead of being read as a placeholder by the driver.
    """
    op.get_bind().exec_driver_sql(statement.as_string(), execution_options={"no_parameters": True})


def template(text: str, **identifiers: str) -> sql.Composed:
    """``text`` with each ``{name}`` replaced by the quoted identifier ``identifiers[name]``."""
    return sql.SQL(text).format(**{k: sql.Identifier(v) for k, v in identifiers.items()})


def pinned(revision: str, name: str, bodies: Mapping[str, str] | None = None) -> str:
    """The text of object ``name`` as ``revision`` pinned it (``sql/<revision>_<name>.sql``).

    One ``CREATE OR REPLACE`` statement, whose ``{schema}`` and ``{vector_schema}``
    placeholders :func:`install` fills with quoted identifiers; each ``{{body <rev>_<name>}}``
    line is replaced by that copy's body (:func:`pinned_body`), or for an object ``bodies``
    names (``{object: revision}``) by the body of that revision's copy of it.
    """
    filename = f"{revision}_{name}.sql"
    if not _PINNED.match(filename):
        raise ValueError(f"not a pinned SQL file: {filename!r}")
    text = (
        resources.files("actrone_pg.migrations")
        .joinpath("sql", filename)
        .read_text(encoding="utf-8")
    )
    return with_bodies(revision, name, text, bodies)


def with_bodies(
    revision: str, name: str, text: str, bodies: Mapping[str, str] | None = None
) -> str:
    """``text``, the copy ``revision`` pinned of ``name``, with each ``{{body <rev>_<name>}}``
    line replaced by that copy's body; a body of a later copy, or of itself, is an error.

    ``bodies`` (``{object: revision}``) redirects the lines of the objects it names to those
    revisions' copies, later ones included: how a later revision installs ``revision``'s copy
    around its own body. Naming an object ``text`` has no line of is an error.
    """
    redirect = dict(bodies or {})
    missing = set(redirect)

    def body(found: re.Match[str]) -> str:
        source = redirect.get(found[2])
        if source is not None:
            missing.discard(found[2])
            return pinned_body(source, found[2])
        if found[1] > revision or (found[1], found[2]) == (revision, name):
            raise ValueError(f"{revision}_{name}.sql takes the body of a later copy, or its own")
        return pinned_body(found[1], found[2])

    replaced = _BODY.sub(body, text)
    if missing:
        raise ValueError(f"{revision}_{name}.sql takes no body of {', '.join(sorted(missing))}")
    statements = _STATEMENT.findall(replaced)
    marks = (replaced.count(_PREPARED), replaced.count(_PREPARED_NAME))
    calls = len(_PREPARED_EXECUTE.findall(replaced))
    if len(statements) > 1 or marks != ((len(statements),) * 2) or calls > len(statements):
        raise ValueError(
            f"{revision}_{name}.sql: at most one {{{{statement block, prepared at one "
            f"{_PREPARED}, named by one {_PREPARED_NAME} and executed by at most one "
            "{{prepared_execute v_...}}"
        )
    if not statements:
        return replaced
    text = prepared(replaced, statements[0])
    # Named by its text: a session still holding the statement of an earlier text (a worker
    # connection Citus keeps open across a migration that changes the ranking) prepares the new
    # one instead of running the old.
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    replaced = _STATEMENT.sub(lambda found: found[1], replaced)
    replaced = replaced.replace(_PREPARED, text)
    replaced = _PREPARED_EXECUTE.sub(lambda found: execute_call(replaced, found[1]), replaced)
    return replaced.replace(_PREPARED_NAME, f"actrone_{digest}_")


#: The tables a ``{{statement`` block names by their shard on the node (format()'s arguments
#: 2 to 7, in this order; argument 1 is the prepared statement's name).
PREPARED_TABLES = ("memories", "turns", "sessions", "agent_stats", "term_stats", "embedders")


def prepared(function: str, statement: str) -> str:
    """The ``{{statement ... }}`` block of ``function`` (a pinned ``CREATE FUNCTION`` in
    PL/pgSQL), ``statement``, as the text of a ``PREPARE`` quoted for ``format()``: what the
    function's ``{{prepared}}`` stands for (the block itself stays where it is, as written).

    Each of the function's parameters and ``p_`` variables (its ``DECLARE``, in order) becomes
    the prepared statement's ``$n`` (parameters first), with its type; each of
    :data:`PREPARED_TABLES`, ``{schema}.<table>``, becomes the ``format()`` argument the
    function passes for it (the name of that table's shard on the node); the statement's name is
    argument 1. So one statement is written once, and runs both over the distributed tables and on
    a worker's shard tables (migration 0020, docs/scale-out.md).
    """
    declared = _declared(function)
    if "%" in statement or "$prepare$" in statement:
        raise ValueError("a prepared statement holds no % and no $prepare$")
    for number, (variable, _) in sorted(enumerate(declared, 1), key=lambda item: -len(item[1][0])):
        statement = re.sub(rf"\b{variable}\b", f"${number}", statement)
    left = re.findall(r"\bp_[a-z0-9_]+\b", statement)
    if left:
        raise ValueError(f"a prepared statement names what the function does not declare: {left}")
    for number, table in enumerate(PREPARED_TABLES, 2):
        statement = re.sub(rf"\{{schema\}}\.{table}\b(?!\()", f"%{number}$s", statement)
    tables = re.findall(r"\{schema\}\.([a-z_]+)\b(?!\()", statement)
    if tables:
        raise ValueError(f"a prepared statement reads tables it has no shard name of: {tables}")
    types = ", ".join(kind for _, kind in declared)
    return f"$prepare$PREPARE %1$I ({types}) AS\n{statement}\n$prepare$"


def execute_call(function: str, name: str) -> str:
    """What ``{{prepared_execute <name>}}`` stands for in ``function``: the ``format()`` call
    whose value is the ``EXECUTE`` of the prepared statement named by variable ``name``, with
    each of the function's parameters and ``p_`` variables as a literal, in the ``$n`` order
    :func:`prepared` gives them (so the two never disagree)."""
    declared = [variable for variable, _ in _declared(function)]
    placeholders = ", ".join(["%L"] * len(declared))
    arguments = ", ".join([name, *declared])
    return f"format('EXECUTE %I({placeholders})', {arguments})"


def _declared(function: str) -> list[tuple[str, str]]:
    """The parameters, then the ``p_`` variables, of a pinned PL/pgSQL function, with types."""
    arguments = function[function.index("(") : function.index("\nRETURNS")]
    declare = function[function.index("\nDECLARE\n") : function.index("\nBEGIN\n")]
    found = re.findall(r"^\s+(p_[a-z0-9_]+) ([^,:;\n]+?)\s*(?:,|;|:=|\n|$)", arguments, re.M)
    found += re.findall(r"^\s+(p_[a-z0-9_]+) ([^,:;\n]+?)\s*(?:;|:=)", declare, re.M)
    return [(name, kind.strip()) for name, kind in found]


def pinned_body(revision: str, name: str) -> str:
    """The body of pinned function ``name`` of ``revision``: its text between ``AS $$`` (or
    another dollar quote, ``AS $fn$``) and the closing quote, without the line breaks around
    it."""
    text = pinned(revision, name)
    opening = re.search(r"\nAS (\$\w*\$)\n", text)
    end = text.rfind("\n" + opening[1]) if opening else -1
    if opening is None or end <= opening.end():
        raise ValueError(f"{revision}_{name}.sql has no body between AS $$ and $$")
    return text[opening.end() : end]


def pinned_names() -> list[tuple[str, str]]:
    """Every pinned copy shipped, as ``(revision, object)`` pairs in revision order."""
    folder = resources.files("actrone_pg.migrations").joinpath("sql")
    found = (_PINNED.match(entry.name) for entry in folder.iterdir())
    return sorted((m[1], m[2]) for m in found if m)


def install(revision: str, name: str, bodies: Mapping[str, str] | None = None) -> None:
    """CREATE OR REPLACE object ``name`` from the copy ``revision`` pinned, its body lines
    redirected as ``bodies`` says (:func:`pinned`)."""
    text = pinned(revision, name, bodies)
    execute(template(text, schema=schema_name(), vector_schema=vector_schema()))


def replace_function(revision: str, name: str, arguments: str) -> None:
    """Replace the function ``name(arguments)`` by ``revision``'s copy when its result type
    changes, which ``CREATE OR REPLACE`` refuses: drop it, install the copy, and distribute it
    again by its first argument if Citus had it so (``arguments`` as :func:`drop_function`
    takes them)."""
    signature = f"{name}({arguments})"
    was_distributed = _distributed_by_agent(signature)
    drop_function(name, arguments)
    install(revision, name)
    if was_distributed:
        distribute_function(signature)


def _distributed_by_agent(signature: str) -> bool:
    if not _citus.citus_installed(run):
        return False
    qualified = _qualified(signature)
    rows = run(
        "SELECT EXISTS (SELECT 1 FROM pg_dist_object AS o WHERE o.classid = 'pg_proc'::regclass"
        " AND o.objid = to_regprocedure(%s) AND o.distribution_argument_index IS NOT NULL)",
        (qualified,),
    )
    return bool(rows and rows[0][0])


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


def distribute_schema() -> bool:
    """Distribute the schema's tables and functions with Citus if ``postgres_distribute`` says so.

    "off": never. "citus": always (a server without the citus extension is an error). "auto":
    when the server has Citus, unless the schema already holds memories: moving a populated
    schema's rows is left to ``actrone-pg migrate --distribute``, which says so
    (docs/scale-out.md, "From one server"). Returns whether the schema is distributed after.
    """
    mode = distribute_mode()
    schema = schema_name()
    if mode == "off":
        return False
    if not _citus.citus_installed(run):
        if mode == "citus":
            raise SchemaError(
                "postgres_distribute='citus', but this server has no citus extension: run the "
                "migrations on a Citus coordinator (docs/scale-out.md), or set "
                "postgres_distribute='auto' or 'off'"
            )
        return False
    if mode == "auto" and not _citus.distributed(run, schema):
        populated = run(
            template("SELECT EXISTS (SELECT 1 FROM {s}.memories)", s=schema).as_string()
        )
        if populated and populated[0][0]:
            logger.warning(
                "schema %s holds memories: its tables stay on the coordinator; run "
                "`actrone-pg migrate --distribute` to distribute them with their rows",
                schema,
            )
            return False
    _citus.distribute_schema(run, schema)
    return True


def distribute_function(signature: str, *, force_delegation: bool = False) -> bool:
    """Distribute the schema's function ``signature`` by its first argument (``agent_id``).

    ``signature`` is the function's name and argument types, unqualified and may name
    ``{vector_schema}``, as :func:`drop_function` takes them: ``"f(text, {vector_schema}.vector)"``.
    Colocated with ``memories``, so that ``SELECT * FROM f(agent, ...)`` called alone runs whole
    on the worker holding that agent's shards. A no-op (``False``) unless the schema is
    distributed (off Citus, with ``postgres_distribute="off"``, before ``migrate --distribute``).
    A revision that installs a per-agent function calls this right after installing it.
    """
    return _citus.distribute_function(
        run, schema_name(), _qualified(signature), force_delegation=force_delegation
    )


def _qualified(signature: str) -> str:
    """``"f(text, ...)"`` as ``"schema".f(text, ...)``, ``{vector_schema}`` filled in."""
    name, _, arguments = signature.partition("(")
    return template(
        "{schema}.{name}(" + arguments,
        schema=schema_name(),
        vector_schema=vector_schema(),
        name=name.strip(),
    ).as_string()
