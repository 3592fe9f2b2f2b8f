"""A schema built by the pre-release revisions (0001 to 0023), moved to the baseline, 0024.

Revisions 0001 to 0023 were squashed into the baseline, 0024, before release 0.1.0: 0024 creates
the tables 0023 left, column for column, index for index (tests/migrations/test_baseline.py
compares the two catalogs). So a schema stamped 0023 is taken as it is: its tables and rows are
left untouched, its functions and views are dropped and installed again from the baseline's
files (and, on a schema distributed with Citus, distributed again as the baseline distributes
them), and its version row is stamped 0024; the upgrade then goes on from there. A schema at an
earlier pre-release revision is refused: upgrade it to 0023 with a release of before the
baseline, or create it again.

:func:`adopt` runs in env.py, in the migration's transaction and under its advisory lock,
before Alembic reads the version table (which otherwise stops at a revision it does not know).
"""

from __future__ import annotations

import logging
from typing import Any

from psycopg import sql

from actrone_pg.errors import SchemaError
from actrone_pg.migrations import VERSION_TABLE, _objects

__all__ = ["BASELINE", "LEGACY_HEAD", "adopt"]

logger = logging.getLogger("actrone_pg.migrations")

#: The last pre-release revision, whose schema the baseline creates.
LEGACY_HEAD = "0023"
#: The baseline revision a schema at LEGACY_HEAD is stamped with.
BASELINE = "0024"
_PRE_RELEASE = frozenset(f"{n:04d}" for n in range(1, 24))


def adopt(connection: Any, schema: str) -> bool:
    """Move ``schema`` from revision 0023 to 0024 on an open SQLAlchemy ``connection``.

    Returns whether it did. A schema at another pre-release revision raises
    :class:`SchemaError`; any other schema (new, or at 0024 or later) is left alone.
    """

    def run(statement: str, params: Any = ()) -> list[tuple[Any, ...]]:
        result = connection.exec_driver_sql(statement, tuple(params))
        return [tuple(r) for r in result] if result.returns_rows else []

    table = sql.Identifier(schema, VERSION_TABLE)
    found = run("SELECT to_regclass(%s) IS NOT NULL", (table.as_string(),))
    if not found or not found[0][0]:
        return False
    select = sql.SQL("SELECT version_num FROM {}").format(table)
    versions = [str(r[0]) for r in run(select.as_string())]
    if not versions or versions[0] not in _PRE_RELEASE:
        return False
    if versions != [LEGACY_HEAD]:
        raise SchemaError(
            f"schema {schema!r} is at pre-release revision {', '.join(versions)}, which this "
            f"version of actrone_pg cannot upgrade: only {LEGACY_HEAD}, the last one, moves to "
            f"the baseline. Upgrade it to {LEGACY_HEAD} with the pre-release that has it, or "
            "create the schema again"
        )
    _objects.reinstall(connection, schema)
    run(sql.SQL("UPDATE {} SET version_num = %s").format(table).as_string(), (BASELINE,))
    logger.info("schema %s: revision %s taken as the baseline, %s", schema, LEGACY_HEAD, BASELINE)
    return True
