"""The SQL the migrations install, as plain files, and the manifest that orders them.

``actrone_pg/migrations/sql/`` holds, for each revision, the SQL it installs, as the server
stores it: ``<revision>_<name>.sql``. A file is plain SQL, one or more statements, whose only
placeholders are ``{schema}`` (the actrone schema) and ``{vector_schema}`` (the schema of the
``vector`` extension); each stands for that name as a double-quoted identifier
(``"actrone"``, an inner ``"`` doubled: :func:`fill`), and nothing else in a file is
interpreted, so what ``\\sf {schema}.retrieve`` shows in psql is the file's text from
``AS $fn$`` on, the two identifiers aside (tests/sql/test_installed.py holds them equal). A file
is never edited once its revision is released: a change is a new revision with its own copy
(docs/postgres.md, "Changing a function or a view").

``manifest.json`` lists, for each revision in order, what a program outside Python (the
TypeScript package) runs to build the same schema and record the same stamp::

    {"version_table": "actrone_alembic_version",
     "revisions": [{"revision": "0024", "down_revision": null,
                    "tables": [...], "objects": [...], "citus": [...]}]}

To create the schema at head: ``CREATE SCHEMA IF NOT EXISTS {schema}``, ``CREATE EXTENSION IF
NOT EXISTS vector`` (its schema is ``{vector_schema}``), then for each revision in order, in one
transaction, each file of ``tables`` then of ``objects``, each as one simple-protocol query with
the placeholders filled; then, where the schema is distributed (``postgres_distribute``
"citus", or "auto" on a server with the ``citus`` extension; docs/scale-out.md), each file of
``citus``, while the new tables are still empty. The stamp is
Alembic's version table, ``{schema}.actrone_alembic_version (version_num varchar(32) NOT NULL,
CONSTRAINT actrone_alembic_version_pkc PRIMARY KEY (version_num))``, holding the last
revision's id in its one row. Where row-level security is on (``postgres_row_security``;
docs/postgres.md, "Row-level security per agent"), each file of ``row_security`` then runs, as
the tables' owner; ``row_security_off`` removes it. ``objects`` are the functions and views,
all of them ``CREATE OR REPLACE``: running them again over a schema at that revision changes
nothing.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable

from psycopg import sql

__all__ = ["VECTOR_SCHEMA", "Revision", "fill", "manifest", "read", "revision"]

PLACEHOLDERS = ("{schema}", "{vector_schema}")
#: The schema pgvector is installed in, what ``{vector_schema}`` is filled with (no row: pgvector
#: is not installed).
VECTOR_SCHEMA = (
    "SELECT n.nspname FROM pg_extension AS e JOIN pg_namespace AS n ON n.oid = e.extnamespace"
    " WHERE e.extname = 'vector'"
)


@dataclass(frozen=True)
class Revision:
    """One revision's entry in ``manifest.json``: its files, in the order they run."""

    revision: str
    down_revision: str | None
    tables: tuple[str, ...]
    objects: tuple[str, ...]
    citus: tuple[str, ...]
    row_security: tuple[str, ...] = ()
    row_security_off: tuple[str, ...] = ()


@functools.cache
def manifest() -> tuple[Revision, ...]:
    """The revisions of ``manifest.json``, oldest first."""
    data = json.loads(_folder().joinpath("manifest.json").read_text(encoding="utf-8"))
    return tuple(
        Revision(
            revision=entry["revision"],
            down_revision=entry["down_revision"],
            tables=tuple(entry["tables"]),
            objects=tuple(entry["objects"]),
            citus=tuple(entry["citus"]),
            row_security=tuple(entry.get("row_security", ())),
            row_security_off=tuple(entry.get("row_security_off", ())),
        )
        for entry in data["revisions"]
    )


def revision(name: str) -> Revision:
    """The manifest's entry of revision ``name``."""
    for entry in manifest():
        if entry.revision == name:
            return entry
    raise KeyError(f"manifest.json has no revision {name!r}")


def read(filename: str) -> str:
    """The text of ``sql/<filename>``, placeholders unfilled."""
    if "/" in filename or not filename.endswith(".sql"):
        raise ValueError(f"not a SQL file of the migrations: {filename!r}")
    return _folder().joinpath(filename).read_text(encoding="utf-8")


def fill(text: str, schema: str, vector_schema: str) -> str:
    """``text`` with ``{schema}`` and ``{vector_schema}`` replaced by those quoted identifiers.

    Plain replacement of the two tokens: every other character reaches the server as written.
    """
    return text.replace("{schema}", sql.Identifier(schema).as_string()).replace(
        "{vector_schema}", sql.Identifier(vector_schema).as_string()
    )


def statements(text: str) -> list[str]:
    """``text``'s statements, one by one: split after each ``;`` that ends a line outside a
    dollar-quoted body, whole-line comments dropped.

    For files Citus must see statement by statement: it relays a ``CREATE POLICY`` to the
    workers as the text it was sent in, and a worker refuses several commands in one
    ("cannot insert multiple commands into a prepared statement").
    """
    found: list[str] = []
    current: list[str] = []
    quote: str | None = None
    for line in text.splitlines():
        if quote is None and line.lstrip().startswith("--"):
            continue
        current.append(line)
        for tag in _DOLLAR_QUOTE.findall(line):
            if quote is None:
                quote = tag
            elif tag == quote:
                quote = None
        if quote is None and line.rstrip().endswith(";"):
            statement = "\n".join(current).strip()
            if statement.rstrip(";").strip():
                found.append(statement)
            current = []
    rest = "\n".join(current).strip()
    if rest:
        found.append(rest)
    return found


_DOLLAR_QUOTE = re.compile(r"\$[A-Za-z_]*\$")


def _folder() -> Traversable:
    return resources.files("actrone_pg.migrations").joinpath("sql")
