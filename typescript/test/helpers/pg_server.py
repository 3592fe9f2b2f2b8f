"""A PostgreSQL server with pgvector for the TypeScript tests: the Python suite's own
(``tests/servers.py``: ``ACTRONE_TEST_POSTGRES_DSN``, else the embedded server). Prints
``DSN <dsn>`` on one line, then serves until its standard input closes."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from tests.servers import postgres_server  # noqa: E402


def main() -> None:
    with postgres_server() as dsn:
        print(f"DSN {dsn}", flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    main()
