"""Migrations: upgrade, downgrade, seeded upgrades, drift, concurrency, and no pgvector.

What each revision pins (its functions and views, step by step up and down) is tested in
``test_pinned.py``.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from actrone_pg import migrations
from actrone_pg.errors import ConfigurationError, SchemaError, ValidationError

pytestmark = pytest.mark.postgres

TABLES = {
    "agent_stats",
    "embedders",
    "locks",
    "memories",
    "sessions",
    "settings",
    "term_stats",
    "turns",
}


def _tables(dsn: str, schema: str) -> set[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s"
            " AND table_type = 'BASE TABLE'",
            (schema,),
        ).fetchall()
    return {r[0] for r in rows} - {migrations.VERSION_TABLE}


def test_upgrade_downgrade_upgrade(postgres_dsn: str, scratch_schema: str) -> None:
    migrations.migrate(postgres_dsn, scratch_schema)
    assert migrations.current_revision(postgres_dsn, scratch_schema) == migrations.head_revision()
    assert _tables(postgres_dsn, scratch_schema) == TABLES
    migrations.downgrade(postgres_dsn, scratch_schema, revision="base")
    assert migrations.current_revision(postgres_dsn, scratch_schema) is None
    assert _tables(postgres_dsn, scratch_schema) == set()
    migrations.migrate(postgres_dsn, scratch_schema)
    assert _tables(postgres_dsn, scratch_schema) == TABLES


def test_upgrade_of_a_seeded_database_keeps_the_data(
    postgres_dsn: str, scratch_schema: str
) -> None:
    migrations.migrate(postgres_dsn, scratch_schema, revision="0001")
    with psycopg.connect(postgres_dsn) as conn:
        s = sql.Identifier(scratch_schema)
        conn.execute(
            sql.SQL("INSERT INTO {}.embedders (name, dimensions) VALUES ('e', 3)").format(s)
        )
        conn.execute(
            sql.SQL(
                "INSERT INTO {}.memories (agent_id, id, content, content_type, importance, tags,"
                " source, sensitivity, created_at, metadata, embedder, token_count, doc_len,"
                " term_freqs, embedding) VALUES ('a', 'm1', 'green tea', 'fact', 0.5, '{{}}',"
                " 'test', 'none', now(), '{{}}', 'e', 3, 2, '{{\"green\": 1, \"tea\": 1}}',"
                " '[1,0,0]')"
            ).format(s)
        )
        conn.execute(
            sql.SQL(
                "INSERT INTO {}.agent_stats VALUES ('a', 1, 2);"
                " INSERT INTO {}.term_stats VALUES ('a', 'green', 1), ('a', 'tea', 1)"
            ).format(s, s)
        )
    # 0002 now builds its index CONCURRENTLY (the table is populated), then 0003 adds the rest.
    migrations.migrate(postgres_dsn, scratch_schema)
    with psycopg.connect(postgres_dsn) as conn:
        s = sql.Identifier(scratch_schema)
        rows = conn.execute(
            sql.SQL(
                "SELECT id, cosine, lexical_rank FROM {}.hybrid_search('a', 'e',"
                " ARRAY['tea'], '[1,0,0]', 0.5)"
            ).format(s)
        ).fetchall()
        valid = conn.execute(
            "SELECT i.indisvalid FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid"
            " JOIN pg_namespace AS n ON n.oid = c.relnamespace"
            " WHERE c.relname = 'ix_memories_candidates' AND n.nspname = %s",
            (scratch_schema,),
        ).fetchone()
    assert rows == [("m1", 1.0, 1)]
    assert valid == (True,)


def test_alembic_check_reports_no_drift(postgres_dsn: str, postgres_schema: str) -> None:
    migrations.check(postgres_dsn, postgres_schema)  # raises on any difference


def test_two_concurrent_migrations_both_succeed(postgres_dsn: str, scratch_schema: str) -> None:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            migrations.migrate(postgres_dsn, scratch_schema)
        except BaseException as exc:  # collected and re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    assert migrations.current_revision(postgres_dsn, scratch_schema) == migrations.head_revision()


def test_schema_injection_is_rejected(postgres_dsn: str) -> None:
    for bad in ('actrone"; DROP SCHEMA public CASCADE; --', "a b", "Actrone", "x.y"):
        with pytest.raises(ValidationError, match="plain identifier"):
            migrations.migrate(postgres_dsn, bad)


def test_runs_from_the_users_own_alembic_setup(
    postgres_dsn: str, scratch_schema: str, tmp_path: Path
) -> None:
    ini = tmp_path / "alembic.ini"
    ini.write_text(
        "[alembic]\nscript_location = app/migrations\n\n"
        "[actrone]\nscript_location = actrone_pg:migrations\n"
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "alembic",
            "-c",
            str(ini),
            "-n",
            "actrone",
            "-x",
            f"schema={scratch_schema}",
            "-x",
            f"dsn={postgres_dsn}",
            "upgrade",
            "head",
        ],
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    assert migrations.current_revision(postgres_dsn, scratch_schema) == migrations.head_revision()


@pytest.fixture
def system_postgres() -> Iterator[str]:
    """The system PostgreSQL 15 (no pgvector) on 127.0.0.1:5432, with a scratch database."""
    admin = "host=127.0.0.1 port=5432 user=postgres dbname=test connect_timeout=3"
    try:
        conn = psycopg.connect(admin, autocommit=True)
    except psycopg.OperationalError:
        pytest.skip("no system PostgreSQL on 127.0.0.1:5432 (scripts/test starts it)")
    name = f"actrone_nopgv_{uuid.uuid4().hex[:8]}"
    with conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield f"host=127.0.0.1 port=5432 user=postgres dbname={name} connect_timeout=3"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))


def test_missing_pgvector_says_how_to_install_it_and_creates_nothing(
    system_postgres: str,
) -> None:
    with pytest.raises(SchemaError, match="pgvector") as info:
        migrations.migrate(system_postgres, "actrone")
    assert "install" in str(info.value).lower()
    with psycopg.connect(system_postgres) as conn:
        schemas = conn.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname = 'actrone'"
        ).fetchone()
        ext = conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'vector'").fetchone()
    assert schemas == (0,)
    assert ext == (0,)


async def test_store_setup_on_a_server_without_pgvector_is_a_schema_error(
    system_postgres: str,
) -> None:
    from actrone_pg.stores.postgres import PostgresStore

    store = PostgresStore(system_postgres)
    with pytest.raises(SchemaError, match="pgvector"):
        await store.setup()
    await store.close()


def test_runs_on_a_connection_the_caller_owns(postgres_dsn: str, scratch_schema: str) -> None:
    import sqlalchemy as sa
    from alembic import command
    from alembic.config import Config

    engine = sa.create_engine(
        "postgresql+psycopg://",
        creator=lambda: psycopg.connect(postgres_dsn),
        poolclass=sa.NullPool,
    )
    cfg = Config(stdout=sys.stdout)
    cfg.set_main_option("script_location", "actrone_pg:migrations")
    cfg.attributes["actrone_schema"] = scratch_schema
    with engine.begin() as connection:
        cfg.attributes["connection"] = connection
        command.upgrade(cfg, "head")
    engine.dispose()
    assert migrations.current_revision(postgres_dsn, scratch_schema) == migrations.head_revision()


@pytest.mark.postgres
def test_an_unknown_text_search_config_creates_nothing(
    postgres_dsn: str, scratch_schema: str
) -> None:
    with pytest.raises(ConfigurationError, match="no text search configuration 'klingon'"):
        migrations.migrate(postgres_dsn, scratch_schema, text_search_config="klingon")
    with psycopg.connect(postgres_dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname = %s", (scratch_schema,)
        ).fetchone()
    assert row == (0,)
    migrations.migrate(postgres_dsn, scratch_schema, text_search_config="english")
    assert migrations.current_revision(postgres_dsn, scratch_schema) == migrations.head_revision()


@pytest.mark.postgres
async def test_store_setup_with_an_unknown_text_search_config_creates_nothing(
    postgres_dsn: str, scratch_schema: str
) -> None:
    from actrone_pg.stores.postgres import PostgresStore

    store = PostgresStore(postgres_dsn, schema=scratch_schema, text_search_config="klingon")
    with pytest.raises(ConfigurationError, match="postgres_text_search_config"):
        await store.setup()
    await store.close()
    async with await psycopg.AsyncConnection.connect(postgres_dsn) as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname = %s", (scratch_schema,)
        )
        assert await cur.fetchone() == (0,)
