"""``actrone-pg server status|stop``: see and stop the embedded PostgreSQL.

The embedded server keeps running after the command or program that started it exits, so that
the next start is instant and ``psql "$(actrone-pg dsn)"`` reads the same data. ``status`` shows
it without starting anything; ``stop`` shuts it down cleanly (``pg_ctl stop -m fast``: sessions
end, a checkpoint is written, no recovery on the next start). The next command or
``MemoryManager`` that needs it starts it again.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from actrone_pg.config import MemoryConfig

#: Exit code of ``status`` when no server runs (pg_ctl's and systemctl's convention).
NOT_RUNNING = 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``actrone-pg server``."""
    parser.add_argument(
        "action",
        choices=("status", "stop"),
        help="status: where it is, whether it runs (exit 0) or not (exit 3), its size; "
        "stop: a clean shutdown (the data stays)",
    )
    parser.add_argument(
        "--data-dir",
        default=None,
        help="data directory of the embedded server (default: ACTRONE_POSTGRES_DATA_DIR or "
        "the per-user data directory)",
    )


def run(args: argparse.Namespace) -> int:
    """Report on or stop the embedded server of the data directory."""
    from actrone_pg import _embedded

    overrides = {"postgres_data_dir": args.data_dir} if args.data_dir else {}
    config = MemoryConfig(**overrides)
    data_dir = Path(config.postgres_data_dir).expanduser().resolve()
    status = _embedded.server_status(data_dir)
    if args.action == "stop":
        if _embedded.stop_embedded(data_dir):  # raises if the directory holds no cluster
            print(f"stopped the embedded PostgreSQL in {data_dir} (pid {status.pid})")
        else:
            print(f"the embedded PostgreSQL in {data_dir} was not running")
        return 0
    rows: list[tuple[str, str]] = [("data directory", str(data_dir))]
    if not status.exists:
        rows.append(
            ("cluster", "none (created by the first `actrone-pg migrate` or postgres store)")
        )
    else:
        version = (data_dir / "PG_VERSION").read_text(encoding="utf-8").strip()
        rows.append(("cluster", f"PostgreSQL {version}, {_size(status.size_bytes)} on disk"))
        if status.running:
            rows.append(("server", f"running, pid {status.pid}"))
            rows.append(("socket", f"{status.socket_dir} (port {status.port}, no TCP)"))
            rows.append(("dsn", status.uri or "?"))
        else:
            rows.append(("server", "stopped"))
        if status.shared_buffers:
            rows.append(("shared_buffers", status.shared_buffers))
    if config.postgres_dsn:
        rows.append(("note", "ACTRONE_POSTGRES_DSN is set: stores and commands use that server"))
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    return 0 if status.running else NOT_RUNNING


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"
