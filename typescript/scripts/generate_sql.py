"""Write ``src/stores/postgres/generated.ts``: the SQL of the Python package, for the TypeScript
PostgreSQL store. Run by ``npm run build`` (``scripts/generate.mjs``) with the repository's
Python: ``python generate_sql.py OUT_FILE``.

Nothing in it is a hand copy. The statements are :mod:`actrone_pg.stores.postgres.statements`'
constants, the filter conditions :mod:`actrone_pg.filters`' ``sql``, the memory columns
:data:`actrone_pg.models.STORED_MEMORY_FIELDS`. The DDL that creates a schema at head is what
Alembic executes when it migrates an empty schema: the migrations run on a scratch schema of a
PostgreSQL server (``ACTRONE_TEST_POSTGRES_DSN``, else the embedded one of the test suite) and
every statement they send is recorded, values inlined, the scratch schema's name replaced by a
placeholder. The file records a digest of its inputs; when they have not changed it is kept.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
TEMPLATE_SCHEMA = "actrone_ts_template_schema"
PLACEHOLDER = "{schema}"
# The statements of statements.py the TypeScript store sends, by name.
STATEMENTS = (
    "DELETE_EXPIRED_SESSION",
    "UPSERT_SESSION",
    "INSERT_TURN",
    "TRIM_TURNS",
    "SELECT_RECENT_TURNS",
    "DELETE_SESSION",
    "REGISTER_EMBEDDERS",
    "SELECT_EMBEDDERS",
    "LOCK_AGENT_STATS",
    "DELETE_MEMORIES",
    "DELETE_HISTORY",
    "UPDATE_TERM_STATS",
    "PRUNE_TERM_STATS",
    "UPDATE_AGENT_STATS",
    "UPDATE_AGENT_STATS_ANALYZER",
    "SELECT_MEMORY",
    "SELECT_MEMORY_FOR_UPDATE",
    "COUNT_MEMORIES",
    "ARCHIVE_MEMORY",
    "SELECT_HISTORY",
    "SELECT_EXPIRED",
    "DELETE_EXPIRED",
    "LIST_MEMORIES",
    "LIST_AFTER",
    "SEARCH",
    "SEARCH_PACKED",
    "UNFILTERED",
    "FILTERED",
    "FILTERED_CANDIDATES",
    "FILTERED_STATS",
    "FILTERED_INPUTS",
    "ANN_CANDIDATES",
    "ANN_IDS",
    "RETRIEVE",
    "AGENT_RETRIEVE",
    "AGENT_WRITE",
    "LOCK_SHARD_METADATA",
    "CITUS_INSTALLED",
    "DISTRIBUTED",
    "ANN_INDEX_STATE",
    "VECTOR_SCHEMA",
    "RECORD_TS_CONFIG",
    "SELECT_TS_CONFIG",
    "RECORD_ANALYZER",
    "SELECT_ANALYZER",
    "ERASE_CLAIM_LOCK",
    "ERASE",
    "SELECT_ALL_EMBEDDERS",
)
SETTINGS = (
    "FILTER_PROBE_SAMPLE",
    "FILTER_BROAD_DIVISOR",
    "FILTER_MOST_DIVISOR",
    "ANN_OVERFETCH",
    "ANN_MAX_DIMENSIONS",
)


def inputs_digest() -> str:
    """A digest of every file the output depends on."""
    h = hashlib.sha256()
    roots = [
        REPO / "actrone_pg" / "migrations",
        REPO / "actrone_pg" / "sql",
        REPO / "actrone_pg" / "stores" / "postgres" / "statements.py",
        REPO / "actrone_pg" / "filters.py",
        REPO / "actrone_pg" / "models.py",
        Path(__file__),
    ]
    for root in roots:
        files = sorted(root.rglob("*")) if root.is_dir() else [root]
        for f in files:
            if f.is_file() and f.suffix in {".py", ".sql", ".mako"}:
                h.update(str(f.relative_to(REPO)).encode())
                h.update(f.read_bytes())
    return h.hexdigest()


def capture_ddl(dsn: str) -> list[str]:
    """Every statement Alembic sends to migrate an empty scratch schema to head, values
    inlined, the scratch schema's name replaced by ``{schema}``; the scratch schema is dropped."""
    import psycopg
    import sqlalchemy as sa
    from alembic import command
    from sqlalchemy import event

    from actrone_pg import migrations

    recorded: list[str] = []

    def connect() -> Any:
        return psycopg.connect(dsn, connect_timeout=10)

    engine = sa.create_engine("postgresql+psycopg://", creator=connect, poolclass=sa.NullPool)
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f'DROP SCHEMA IF EXISTS "{TEMPLATE_SCHEMA}" CASCADE')
    try:

        def before(conn: Any, cursor: Any, statement: str, params: Any, *rest: Any) -> None:
            raw = cursor.connection
            text = psycopg.ClientCursor(raw).mogrify(statement, params or None)
            recorded.append(text)

        with engine.connect() as connection:
            event.listen(connection, "before_cursor_execute", before)
            cfg = migrations.make_config(dsn, TEMPLATE_SCHEMA, distribute="off")
            cfg.attributes["connection"] = connection
            command.upgrade(cfg, "head")
            connection.commit()
    finally:
        engine.dispose()
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA IF EXISTS "{TEMPLATE_SCHEMA}" CASCADE')
    out = []
    for text in recorded:
        if "pg_advisory_xact_lock" in text:
            continue  # the lock of the scratch schema's key: the caller takes its schema's
        if re.match(r"\s*(SELECT|select)\b", text) and "CREATE" not in text.upper():
            continue  # the migrations' catalogue reads: nothing to replay
        out.append(text.replace(TEMPLATE_SCHEMA, PLACEHOLDER))
    return out


def vector_schema(dsn: str) -> str:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT n.nspname FROM pg_extension AS e JOIN pg_namespace AS n"
            " ON n.oid = e.extnamespace WHERE e.extname = 'vector'"
        ).fetchone()
    return str(row[0]) if row else "public"


def server_dsn() -> Any:
    import os
    from contextlib import nullcontext

    given = os.environ.get("ACTRONE_TEST_POSTGRES_DSN")
    if given:
        return nullcontext(given)
    sys.path.insert(0, str(REPO))
    from tests.servers import postgres_server

    return postgres_server()


def main() -> None:
    out = Path(sys.argv[1])
    digest = inputs_digest()
    if out.exists() and f'INPUTS_DIGEST = "{digest}"' in out.read_text(encoding="utf-8"):
        return
    from actrone_pg import migrations
    from actrone_pg.filters import FILTERS
    from actrone_pg.stores.postgres import statements

    with server_dsn() as dsn:
        ddl = capture_ddl(dsn)
        vschema = vector_schema(dsn)
    data: dict[str, Any] = {
        "HEAD_REVISION": migrations.head_revision(),
        "KNOWN_REVISIONS": sorted(migrations.known_revisions()),
        "VERSION_TABLE": migrations.VERSION_TABLE,
        "DDL_VECTOR_SCHEMA": vschema,
        "MEMORY_FIELDS": list(statements.MEMORY_FIELDS),
        "COPY_COLUMNS": list(statements.COPY_COLUMNS),
        "COPY_TYPES": list(statements.COPY_TYPES),
        "FILTER_SQL": {name: key.sql for name, key in FILTERS.items()},
        "FILTER_INDEXED": {name: key.sql_indexed for name, key in FILTERS.items()},
        "STATEMENTS": {name: getattr(statements, name) for name in STATEMENTS},
        "SETTINGS": {name: getattr(statements, name) for name in SETTINGS},
        "DDL": ddl,
    }
    lines = [
        "// Generated by scripts/generate_sql.py from the Python package: never edit by hand.",
        "/* eslint-disable */",
        f'export const INPUTS_DIGEST = "{digest}";',
    ]
    for name, value in data.items():
        lines.append(f"export const {name} = {json.dumps(value, ensure_ascii=False)} as const;")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
