"""A PostgreSQL server with pgvector for the TypeScript tests, the Python suite's own
(``tests/servers.py``: ``ACTRONE_TEST_POSTGRES_DSN``, else the embedded server; with the
argument ``citus``, its Citus coordinator). Prints
``DSN <dsn>`` on one line, then serves until its standard input closes."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from tests.servers import CitusUnavailable, citus_server, postgres_server  # noqa: E402


def main() -> None:
    if sys.argv[1:] == ["citus"]:
        # A Citus coordinator (ACTRONE_TEST_CITUS_DSN, else the local cluster of ../shared/citus).
        try:
            server = citus_server()
            dsn, _ = server.__enter__()
        except CitusUnavailable as exc:
            print(f"UNAVAILABLE {exc}", flush=True)
            return
        try:
            print(f"DSN {dsn}", flush=True)
            sys.stdin.read()
        finally:
            server.__exit__(None, None, None)
        return
    with postgres_server() as dsn:
        print(f"DSN {dsn}", flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    main()
