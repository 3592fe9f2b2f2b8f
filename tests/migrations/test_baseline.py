"""The baseline, 0024: what it builds, how a schema of the pre-release revisions becomes it, and
its manifest, run without Python's migrations (as the TypeScript package runs it).

A schema at 0023 comes from ``data/schema_0023.sql``, a dump of one built by the pre-release
revisions themselves (its header says how it was made).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from actrone_pg import migrations
from actrone_pg.errors import SchemaError
from actrone_pg.migrations import _files

pytestmark = pytest.mark.postgres

SCHEMA_0023 = Path(__file__).parent / "data" / "schema_0023.sql"


def vector_schema(conn: psycopg.Connection[Any]) -> str:
    row = conn.execute(
        "SELECT n.nspname FROM pg_extension AS e JOIN pg_namespace AS n"
        " ON n.oid = e.extnamespace WHERE e.extname = 'vector'"
    ).fetchone()
    assert row is not None
    return str(row[0])


def load_0023(dsn: str, schema: str) -> None:
    """Create ``schema`` as the pre-release revisions left it at 0023 (no rows).

    On a Citus coordinator, on the coordinator alone, as the revisions created it before 0014
    distributed it (Citus cannot create the dump's form of session_overview on the workers).
    """
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        if conn.execute("SELECT current_setting('citus.version', true)").fetchone() != (None,):
            conn.execute("SET citus.enable_ddl_propagation TO off")
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        text = _files.fill(SCHEMA_0023.read_text(encoding="utf-8"), schema, vector_schema(conn))
        conn.execute(text.encode())


def catalog(dsn: str, schema: str) -> dict[str, list[tuple[Any, ...]]]:
    """What the server holds for ``schema``, by kind, its name written as SCHEMA: columns,
    constraints, indexes, table options, functions (whole definitions) and views."""
    queries = {
        "columns": "SELECT c.relname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod),"
        " a.attnotnull, pg_get_expr(d.adbin, d.adrelid), l.collname, a.attidentity"
        " FROM pg_attribute AS a JOIN pg_class AS c ON c.oid = a.attrelid"
        " JOIN pg_namespace AS n ON n.oid = c.relnamespace"
        " LEFT JOIN pg_attrdef AS d ON d.adrelid = a.attrelid AND d.adnum = a.attnum"
        " LEFT JOIN pg_collation AS l ON l.oid = a.attcollation AND a.attcollation <> 100"
        " WHERE n.nspname = %s AND a.attnum > 0 AND NOT a.attisdropped"
        " AND c.relkind IN ('r', 'v') ORDER BY 1, 2",
        "constraints": "SELECT t.relname, o.conname, pg_get_constraintdef(o.oid)"
        " FROM pg_constraint AS o JOIN pg_class AS t ON t.oid = o.conrelid"
        " JOIN pg_namespace AS n ON n.oid = t.relnamespace WHERE n.nspname = %s ORDER BY 1, 2",
        "indexes": "SELECT c.relname, pg_get_indexdef(c.oid) FROM pg_class AS c"
        " JOIN pg_namespace AS n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relkind = 'i' ORDER BY 1",
        "tables": "SELECT c.relname, c.relkind::text, c.reloptions FROM pg_class AS c"
        " JOIN pg_namespace AS n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relkind IN ('r', 'v', 'S') ORDER BY 1",
        "functions": "SELECT p.proname, pg_get_functiondef(p.oid) FROM pg_proc AS p"
        " JOIN pg_namespace AS n ON n.oid = p.pronamespace WHERE n.nspname = %s ORDER BY 1",
        "views": "SELECT c.relname, pg_get_viewdef(c.oid) FROM pg_class AS c"
        " JOIN pg_namespace AS n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relkind = 'v' ORDER BY 1",
    }
    name = re.compile(rf'"{schema}"|\b{schema}\b')
    found = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for kind, query in queries.items():
            rows = conn.execute(query, (schema,)).fetchall()
            found[kind] = [
                tuple(name.sub("SCHEMA", v) if isinstance(v, str) else v for v in row)
                for row in rows
            ]
    return found


#: A row for each table, written through the 0023 schema: (table, columns, values).
ROWS = [
    ("embedders", "name, dimensions", "'e', 3"),
    ("settings", "name, value", "'text_search_config', 'simple'"),
    ("sessions", "agent_id, session_id, metadata", "'a', 's', '{\"k\": 1}'"),
    (
        "turns",
        "agent_id, session_id, id, user_message, assistant_message, created_at, token_count",
        "'a', 's', 't1', 'hello', 'hi', '2026-12-01 10:00+00', 2",
    ),
    (
        "memories",
        "agent_id, id, session_id, content, content_type, importance, tags, source, sensitivity,"
        " created_at, metadata, embedder, token_count, doc_len, term_freqs, embedding,"
        " source_turn_ids, version",
        "'a', 'm1', 's', 'green tea', 'fact', 0.5, '{drink}', 'test', 'none',"
        " '2026-12-01 10:00+00', '{\"k\": 1}', 'e', 3, 2, '{\"green\": 1, \"tea\": 1}',"
        " '[1,0,0]', '{t1}', 2",
    ),
    (
        "memory_history",
        "agent_id, id, version, content, content_type, importance, tags, source, sensitivity,"
        " created_at, metadata, embedder, token_count, source_turn_ids, valid_to",
        "'a', 'm1', 1, 'tea', 'fact', 0.5, '{}', 'test', 'none', '2026-11-30 10:00+00', '{}',"
        " 'e', 1, '{}', '2026-12-01 10:00+00'",
    ),
    ("term_stats", "agent_id, term, df", "'a', 'green', 1"),
    ("agent_stats", "agent_id, n_docs, total_length", "'a', 1, 2"),
    ("locks", "agent_id, name, holder, expires_at", "'a', 'writer', 'me', '2030-01-01 00:00+00'"),
]


def seed(dsn: str, schema: str) -> None:
    with psycopg.connect(dsn) as conn:
        for table, columns, values in ROWS:
            target = sql.SQL("INSERT INTO {} ").format(sql.Identifier(schema, table))
            conn.execute(target + sql.SQL(f"({columns}) VALUES ({values})"))  # type: ignore[arg-type]


def contents(dsn: str, schema: str) -> dict[str, list[str]]:
    """Every row of every table, as text."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return {
            table: [
                str(r[0])
                for r in conn.execute(
                    sql.SQL("SELECT t::text FROM {} AS t ORDER BY 1").format(
                        sql.Identifier(schema, table)
                    )
                ).fetchall()
            ]
            for table, _, _ in ROWS
        }


def test_a_schema_built_by_0023_becomes_the_baseline_with_its_rows(
    postgres_dsn: str, scratch_schema: str, postgres_schema: str
) -> None:
    load_0023(postgres_dsn, scratch_schema)
    seed(postgres_dsn, scratch_schema)
    before = contents(postgres_dsn, scratch_schema)
    assert all(len(rows) == 1 for rows in before.values())
    assert migrations.current_revision(postgres_dsn, scratch_schema) == "0023"
    assert migrations.upgradable("0023") and not migrations.upgradable("0022")

    migrations.migrate(postgres_dsn, scratch_schema)

    assert migrations.current_revision(postgres_dsn, scratch_schema) == migrations.head_revision()
    assert contents(postgres_dsn, scratch_schema) == before
    migrations.check(postgres_dsn, scratch_schema)
    # The same catalog as a schema the baseline built, functions and views included.
    assert catalog(postgres_dsn, scratch_schema) == catalog(postgres_dsn, postgres_schema)
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        rows = conn.execute(
            sql.SQL(
                "SELECT kind, id, content FROM {}.retrieve('a', 's', 5, 86400, 'e',"
                " ARRAY['tea'], '[1,0,0]', 0.5, 500, true, 60, ARRAY[1, 1, 0.3], 0.7, 0.3,"
                " '2026-12-02 00:00+00', 1.2, 0.3, 1000, NULL, NULL, 800)"
            ).format(sql.Identifier(scratch_schema))
        ).fetchall()
    assert rows == [("turn", "t1", None), ("memory", "m1", "green tea")]


def test_the_0023_dump_differs_from_the_baseline_only_in_functions(
    postgres_dsn: str, scratch_schema: str, postgres_schema: str
) -> None:
    # What the adoption leaves alone (tables, columns, indexes, constraints) is already the
    # baseline's; what it installs again (the functions' text, and the views' option
    # security_invoker, for row-level security) is not: so the comparison above sees both.
    load_0023(postgres_dsn, scratch_schema)
    old, new = catalog(postgres_dsn, scratch_schema), catalog(postgres_dsn, postgres_schema)
    assert {kind for kind in old if old[kind] != new[kind]} == {"functions", "tables"}
    changed = [row for row in new["tables"] if row not in old["tables"]]
    assert changed == [
        (view, "v", ["security_invoker=true"])
        for view in ("memory_lineage", "memory_overview", "memory_versions")
        + ("recent_turns", "session_overview")
    ]


def test_a_schema_at_an_earlier_pre_release_revision_is_refused(
    postgres_dsn: str, scratch_schema: str
) -> None:
    load_0023(postgres_dsn, scratch_schema)
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("UPDATE {} SET version_num = '0022'").format(
                sql.Identifier(scratch_schema, migrations.VERSION_TABLE)
            )
        )
    before = catalog(postgres_dsn, scratch_schema)
    with pytest.raises(SchemaError, match="pre-release revision 0022"):
        migrations.migrate(postgres_dsn, scratch_schema)
    assert migrations.current_revision(postgres_dsn, scratch_schema) == "0022"
    assert catalog(postgres_dsn, scratch_schema) == before


def apply_manifest(dsn: str, schema: str) -> None:
    """Build ``schema`` at head from manifest.json alone, as a program outside Python does."""
    with psycopg.connect(dsn) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        vectors = vector_schema(conn)
        for entry in _files.manifest():
            for name in entry.tables + entry.objects:
                conn.execute(_files.fill(_files.read(name), schema, vectors).encode())
        conn.execute(
            sql.SQL(
                "CREATE TABLE {} (version_num varchar(32) NOT NULL,"
                " CONSTRAINT actrone_alembic_version_pkc PRIMARY KEY (version_num))"
            ).format(sql.Identifier(schema, migrations.VERSION_TABLE))
        )
        conn.execute(
            sql.SQL("INSERT INTO {} VALUES (%s)").format(
                sql.Identifier(schema, migrations.VERSION_TABLE)
            ),
            (_files.manifest()[-1].revision,),
        )


def test_the_manifest_alone_builds_what_the_migrations_build(
    postgres_dsn: str, scratch_schema: str, postgres_schema: str
) -> None:
    apply_manifest(postgres_dsn, scratch_schema)
    assert migrations.current_revision(postgres_dsn, scratch_schema) == migrations.head_revision()
    migrations.check(postgres_dsn, scratch_schema)
    assert catalog(postgres_dsn, scratch_schema) == catalog(postgres_dsn, postgres_schema)
    migrations.migrate(postgres_dsn, scratch_schema)  # at head: nothing to do
    migrations.downgrade(postgres_dsn, scratch_schema)
    assert migrations.current_revision(postgres_dsn, scratch_schema) is None


def test_the_manifest_lists_every_file_once_in_revision_order() -> None:
    from importlib import resources

    folder = resources.files("actrone_pg.migrations").joinpath("sql")
    shipped = {e.name for e in folder.iterdir() if e.name.endswith(".sql")}
    entries = _files.manifest()
    listed = [
        n
        for e in entries
        for n in e.tables + e.objects + e.citus + e.row_security + e.row_security_off
    ]
    assert sorted(listed) == sorted(set(listed)) and set(listed) == shipped
    assert [e.down_revision for e in entries] == [None, *(e.revision for e in entries[:-1])]
    assert entries[-1].revision == migrations.head_revision()
    assert {e.revision for e in entries} == migrations.known_revisions()
    for entry in entries:
        for name in (
            entry.tables + entry.objects + entry.citus + entry.row_security + entry.row_security_off
        ):
            assert name.startswith(entry.revision + "_"), name
            # Placeholders are the two identifiers, nothing else in braces is one.
            text = _files.read(name)
            assert set(re.findall(r"\{[a-z_]+\}", text)) <= {"{schema}", "{vector_schema}"}, name


def test_fill_replaces_the_two_identifiers_and_nothing_else() -> None:
    text = "SELECT '{}'::jsonb, '{{x}}', {schema}.f({vector_schema}.vector), '{other}'"
    assert _files.fill(text, "my schema", "public") == (
        "SELECT '{}'::jsonb, '{{x}}', \"my schema\".f(\"public\".vector), '{other}'"
    )
