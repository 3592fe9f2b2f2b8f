"""The functions and views of a schema at head, brought to the text this library ships.

Functions and views are replaceable: unlike the tables, which hold rows and change only by a new
revision, they can be dropped and installed again at any moment without a change to the data. A
schema stamped with the head revision by an earlier build of it (before a release, a baseline
whose ``retrieve`` had another argument list or body) would otherwise keep its old functions
for good: ``migrate`` finds the stamp at head and has nothing to run, while the store calls the
functions as the shipped files write them. So an upgrade that finds the schema at head already
compares its functions and views with the head files (:func:`differences`) and, when they differ,
installs them again (:func:`reinstall`); the tables, their rows and the version row are left as
they are. env.py runs it in the upgrade's transaction, under its advisory lock, whether the
upgrade comes from :func:`actrone_pg.migrations.migrate`, ``actrone-pg migrate`` or the user's
own Alembic setup; a schema of the pre-release revisions is moved to the baseline by the same
:func:`reinstall` (:mod:`actrone_pg.migrations._legacy`).

The comparison is the server's: each head file is installed over the schema inside a savepoint
that is rolled back, and the catalog's definitions (``pg_get_functiondef``, ``pg_get_viewdef``
and the view's options) before and after must be the same; on Citus the trial runs on the
coordinator alone (``citus.enable_ddl_propagation`` off inside the savepoint), so the workers
see nothing of it. An object of the schema that no head file installs (a function of an older
build, an overload left by another argument list) is a difference too. The row-level security's
own functions (``row_security`` files of the manifest) are that feature's: neither compared nor
dropped.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from psycopg import sql

from actrone_pg.migrations import _citus, _files

__all__ = ["differences", "refresh", "reinstall", "shipped"]

logger = logging.getLogger("actrone_pg.migrations")

_OBJECT = re.compile(r"^CREATE OR REPLACE (FUNCTION|VIEW) \{schema\}\.([a-z_]+)", re.M)
# Objects of the extensions that live in the schema are not the schema's own.
_OWN = "NOT EXISTS (SELECT 1 FROM pg_depend AS d WHERE d.objid = {} AND d.deptype = 'e')"


def shipped() -> tuple[dict[str, str], frozenset[str]]:
    """``({object: FUNCTION or VIEW}, row security's functions)`` the manifest installs."""
    objects: dict[str, str] = {}
    guarded: set[str] = set()
    for entry in _files.manifest():
        for filename in entry.objects:
            for kind, name in _OBJECT.findall(_files.read(filename)):
                objects[name] = kind
        for filename in entry.row_security:
            guarded.update(name for _, name in _OBJECT.findall(_files.read(filename)))
    return objects, frozenset(guarded)


def differences(connection: Any, schema: str) -> list[str]:
    """What differs between ``schema``'s functions and views and the head files (empty: none).

    ``connection`` is an open SQLAlchemy connection inside a transaction; the trial install is
    rolled back to a savepoint, so nothing of it stays.
    """
    run = _runner(connection)
    objects, guarded = shipped()
    found = _present(run, schema)
    problems = []
    for name, kind in sorted(found):
        if name in guarded and kind == "FUNCTION":
            continue
        if objects.get(name) != kind:
            problems.append(f"{kind.lower()} {name} is not one the library installs")
    for name, kind in sorted(objects.items()):
        count = found.count((name, kind))
        if count != 1:
            problems.append(f"{kind.lower()} {name}: {count} installed, 1 shipped")
    if problems:
        return problems
    before = _definitions(run, schema, objects)
    citus = _citus.citus_installed(run)
    savepoint = connection.begin_nested()
    try:
        if citus:
            run("SET LOCAL citus.enable_ddl_propagation TO off", ())
        for text in _texts(run, schema):
            _execute(connection, text)
        after = _definitions(run, schema, objects)
    except Exception as exc:  # an object the file cannot replace (another return type)
        savepoint.rollback()
        logger.debug("schema %s: a head file cannot replace its object: %s", schema, exc)
        return [f"a head file cannot replace its object in place: {str(exc).splitlines()[0]}"]
    savepoint.rollback()
    return [
        f"{objects[name].lower()} {name} is not the head file's"
        for name in sorted(objects)
        if before.get(name) != after.get(name)
    ]


def refresh(connection: Any, schema: str) -> list[str]:
    """Install the head files again over ``schema`` if its functions or views differ from them;
    returns the differences found (empty: nothing was changed)."""
    found = differences(connection, schema)
    if found:
        logger.info("schema %s: functions and views installed again (%s)", schema, "; ".join(found))
        reinstall(connection, schema)
    return found


def reinstall(connection: Any, schema: str) -> None:
    """Drop ``schema``'s own views and functions (row security's aside), install the head files'
    again, and on a schema distributed with Citus distribute them as the baseline does."""
    run = _runner(connection)
    _, guarded = shipped()
    views = run(
        "SELECT c.relname::text FROM pg_class AS c JOIN pg_namespace AS n"
        " ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'v' AND "
        + _OWN.format("c.oid"),
        (schema,),
    )
    for (view,) in views:
        run(
            sql.SQL("DROP VIEW IF EXISTS {} CASCADE")
            .format(sql.Identifier(schema, view))
            .as_string(),
            (),
        )
    functions = run(
        "SELECT p.proname::text, pg_get_function_identity_arguments(p.oid) FROM pg_proc AS p"
        " JOIN pg_namespace AS n ON n.oid = p.pronamespace WHERE n.nspname = %s AND "
        + _OWN.format("p.oid"),
        (schema,),
    )
    for name, arguments in functions:
        if name in guarded:
            continue
        # The argument list as the server wrote it (types only, already quoted where needed).
        statement = sql.SQL("DROP FUNCTION IF EXISTS {}({})").format(
            sql.Identifier(schema, name), sql.SQL(arguments)
        )
        run(statement.as_string(), ())
    for text in _texts(run, schema):
        _execute(connection, text)
    if _citus.distributed(run, schema):
        _citus.distribute_schema(run, schema)


def _runner(connection: Any) -> _citus.Run:
    def run(statement: str, params: Any) -> list[tuple[Any, ...]]:
        result = connection.exec_driver_sql(statement, tuple(params))
        return [tuple(r) for r in result] if result.returns_rows else []

    return run


def _execute(connection: Any, text: str) -> None:
    # No parameter list: a % in the file (a PL/pgSQL format()) reaches the server as written.
    connection.exec_driver_sql(text, execution_options={"no_parameters": True})


def _texts(run: _citus.Run, schema: str) -> list[str]:
    """The head files' functions and views, in the manifest's order, filled for ``schema``."""
    rows = run(_files.VECTOR_SCHEMA, ())
    vector_schema = str(rows[0][0])
    return [
        _files.fill(_files.read(name), schema, vector_schema)
        for entry in _files.manifest()
        for name in entry.objects
    ]


def _present(run: _citus.Run, schema: str) -> list[tuple[str, str]]:
    """``(name, FUNCTION or VIEW)`` of each of the schema's own functions (each overload) and
    views."""
    rows = run(
        "SELECT p.proname::text, 'FUNCTION' FROM pg_proc AS p JOIN pg_namespace AS n"
        " ON n.oid = p.pronamespace WHERE n.nspname = %s AND "
        + _OWN.format("p.oid")
        + " UNION ALL SELECT c.relname::text, 'VIEW' FROM pg_class AS c JOIN pg_namespace AS n"
        " ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'v' AND "
        + _OWN.format("c.oid"),
        (schema, schema),
    )
    return [(str(r[0]), str(r[1])) for r in rows]


def _definitions(run: _citus.Run, schema: str, objects: dict[str, str]) -> dict[str, list[str]]:
    """``{object: its definitions}`` as the server prints them (a function's overloads each), of
    the objects the head files name."""
    rows = run(
        "SELECT p.proname::text, pg_get_functiondef(p.oid) FROM pg_proc AS p"
        " JOIN pg_namespace AS n ON n.oid = p.pronamespace WHERE n.nspname = %s"
        " UNION ALL SELECT c.relname::text,"
        " pg_get_viewdef(c.oid) || coalesce(array_to_string(c.reloptions, ','), '')"
        " FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relkind = 'v'",
        (schema, schema),
    )
    found: dict[str, list[str]] = {}
    for name, definition in rows:
        if str(name) in objects:
            found.setdefault(str(name), []).append(str(definition))
    return {name: sorted(definitions) for name, definitions in found.items()}
