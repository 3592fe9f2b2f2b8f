"""Write ``src/stores/postgres/generated.ts``: the SQL of the Python package, for the TypeScript
PostgreSQL store. Run by ``npm run build`` (``scripts/generate.mjs``) with the repository's
Python: ``python generate_sql.py OUT_FILE``.

Nothing in it is a hand copy. The statements are :mod:`actrone_pg.stores.postgres.statements`'
constants (``RETRIEVE``, every search's one call, is ``actrone_pg/sql/retrieve.sql``), the
filter conditions :mod:`actrone_pg.filters`' ``sql``, the memory columns
:data:`actrone_pg.models.STORED_MEMORY_FIELDS`, and the schema the migrations' manifest and SQL
files (:mod:`actrone_pg.migrations._files`), each revision's files in the order they run. The
file records a digest of its inputs; when they have not changed it is kept.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
# The statements of statements.py the TypeScript store sends, by name. RETRIEVE, every search's
# one call of retrieve(), is actrone_pg/sql/retrieve.sql's text (statements.py loads it).
STATEMENTS = (
    "DELETE_EXPIRED_SESSION",
    "UPSERT_SESSION",
    "INSERT_TURN",
    "TRIM_TURNS",
    "SELECT_RECENT_TURNS",
    "DELETE_SESSION",
    "SERVER_CLOCK",
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
    "RETRIEVE",
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


def ts_type(value: Any) -> str:
    """The TypeScript type of a JSON value (objects by their keys, arrays by their first item)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "string | null"
    if isinstance(value, list):
        return f"readonly {ts_type(value[0]) if value else 'string'}[]"
    fields = "; ".join(f"readonly {k}: {_nullable(k, v)}" for k, v in value.items())
    return "{ " + fields + " }"


def _nullable(key: str, value: Any) -> str:
    return "string | null" if key == "down_revision" else ts_type(value)


def main() -> None:
    out = Path(sys.argv[1])
    digest = inputs_digest()
    if out.exists() and f'INPUTS_DIGEST = "{digest}"' in out.read_text(encoding="utf-8"):
        return
    from actrone_pg import migrations
    from actrone_pg.filters import FILTERS
    from actrone_pg.migrations import _files
    from actrone_pg.migrations._legacy import LEGACY_HEAD
    from actrone_pg.stores.postgres import statements

    manifest = [
        {
            "revision": r.revision,
            "down_revision": r.down_revision,
            "tables": [_files.read(f) for f in r.tables],
            "objects": [_files.read(f) for f in r.objects],
            "citus": [_files.read(f) for f in r.citus],
        }
        for r in _files.manifest()
    ]
    data: dict[str, Any] = {
        "HEAD_REVISION": migrations.head_revision(),
        "KNOWN_REVISIONS": sorted(migrations.known_revisions()),
        # What `actrone-pg migrate` takes to head: those, and the last pre-release revision.
        "UPGRADABLE_REVISIONS": sorted(
            r for r in {*migrations.known_revisions(), LEGACY_HEAD} if migrations.upgradable(r)
        ),
        "VERSION_TABLE": migrations.VERSION_TABLE,
        "MEMORY_FIELDS": list(statements.MEMORY_FIELDS),
        "COPY_COLUMNS": list(statements.COPY_COLUMNS),
        "COPY_TYPES": list(statements.COPY_TYPES),
        "FILTER_SQL": {name: key.sql for name, key in FILTERS.items()},
        "STATEMENTS": {name: getattr(statements, name) for name in STATEMENTS},
        "MANIFEST": manifest,
    }
    lines = [
        "// Generated by scripts/generate_sql.py from the Python package: never edit by hand.",
        "/* eslint-disable */",
        f'export const INPUTS_DIGEST = "{digest}";',
    ]
    for name, value in data.items():
        # Declared by type, not as a literal: the declarations then hold no SQL text.
        lines.append(
            f"export const {name}: {ts_type(value)} = {json.dumps(value, ensure_ascii=False)};"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
