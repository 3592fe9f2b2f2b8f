"""What a new user sees from ``actrone-pg`` with a wrong setting: one line, a non-zero exit.

None of these needs a server: a refused port is refused by the kernel, and the directory and
backend checks come before anything connects. The ones that need a server are in
test_pg_commands.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from actrone_pg.cli import main

REFUSED = "postgresql://app:hunter2@127.0.0.1:1/mem"  # port 1: nothing listens there


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("command", ["migrate", "inspect"])
def test_a_refused_connection_is_one_line_without_the_password(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command, "--dsn", REFUSED]) == 2
    line = _one_line(capsys.readouterr().err)
    assert line.startswith(f"actrone-pg {command}: StoreUnavailableError: cannot connect")
    assert "postgresql://app:***@127.0.0.1:1/mem" in line
    assert "Connection refused" in line and "--dsn or ACTRONE_POSTGRES_DSN" in line
    assert "hunter2" not in line


def test_a_refused_connection_in_any_command_is_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # libpq's message for a refused connection has a second line, a hint; the bench passes it on.
    bench = ["bench", "--backend", "postgres", "--dsn", REFUSED, "--agents", "1", "--queries", "2"]
    assert main([*bench, "--per-agent", "10"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert line.startswith("actrone-pg bench: StoreUnavailableError: cannot connect")
    assert "Connection refused" in line and "Is the server running" in line
    assert "hunter2" not in line


def test_a_host_alone_is_refused_as_a_dsn_saying_what_one_looks_like(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ACTRONE_POSTGRES_DSN", "localhost")
    for command in (["migrate"], ["inspect"], ["dsn"], ["sweep", "--backend", "postgres"]):
        assert main(command) == 2
        line = _one_line(capsys.readouterr().err)
        assert "ConfigurationError: postgres_dsn: 'localhost' is not a PostgreSQL" in line
        assert "postgresql://user:password@localhost:5432/dbname" in line


def test_downgrade_needs_a_revision(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["migrate", "--downgrade", "--dsn", REFUSED])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "--downgrade needs --revision: 'base' removes every actrone table" in err


@pytest.mark.parametrize("backend", [None, "memory"])
def test_sweep_refuses_the_in_process_store(
    backend: str | None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # nothing configured and no embedded server installed: the rule falls back to memory
    monkeypatch.setattr("actrone_pg._cli._store.embedded_installed", lambda: False)
    assert main(["sweep", *(["--backend", backend] if backend else [])]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "ConfigurationError: backend: the memory backend keeps sessions inside one" in line
    assert "--backend postgres" in line


@pytest.mark.parametrize(
    "command",
    [
        ["inspect"],
        ["dsn"],
        ["sweep", "--backend", "postgres"],
        ["server", "stop"],
        ["migrate", "--check"],
        ["migrate", "--downgrade", "--revision", "base"],
    ],
)
def test_read_only_commands_do_not_create_a_cluster_in_a_mistyped_directory(
    command: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("ACTRONE_POSTGRES_DSN", raising=False)
    typo = tmp_path / "pgdtaa"
    assert main([*command, "--data-dir", str(typo)]) == 2
    line = _one_line(capsys.readouterr().err)
    assert f"postgres_data_dir: {typo} holds no embedded PostgreSQL" in line
    assert f"`actrone-pg migrate --data-dir {typo}`" in line
    assert not typo.exists()


def test_server_status_of_a_directory_without_a_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["server", "status", "--data-dir", str(tmp_path / "none")]) == 3
    out = capsys.readouterr().out
    assert f"data directory  {tmp_path / 'none'}" in out
    assert "cluster         none" in out
    assert not (tmp_path / "none").exists()


def test_an_unknown_revision_is_refused_before_a_cluster_is_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ACTRONE_POSTGRES_DSN", raising=False)
    new = tmp_path / "pgdata"
    assert main(["migrate", "--data-dir", str(new), "--revision", "12"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "ConfigurationError: --revision: '12': Can't locate revision identified by '12'" in line
    assert not new.exists()


def test_a_bad_sweep_batch_exits_2_naming_the_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", "--backend", "postgres", "--dsn", REFUSED, "--batch", "0"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == "actrone-pg sweep: ValidationError: --batch must be at least 1"
