"""Ending a call on a frozen server without a cancel request (see ``Database.conn``)."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from typing import Any

from actrone_pg.errors import MissingDependencyError

try:
    import psycopg
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("postgres", exc.name or "psycopg") from None

__all__ = ["Severance"]

logger = logging.getLogger("actrone_pg.postgres")


class Severance:
    """Shuts a connection's socket down at ``deadline`` (event loop time) unless cancelled.

    ``shutdown`` leaves the descriptor open (the event loop may be watching it) but makes it
    readable at once: libpq reads end-of-file and psycopg raises ``OperationalError`` without
    sending a cancel request, which a frozen server would never answer.
    """

    def __init__(self, conn: Any, deadline: float) -> None:
        self.fired = False
        self._conn = conn
        self._handle = asyncio.get_running_loop().call_at(deadline, self._fire)

    def cancel(self) -> None:
        self._handle.cancel()

    def _fire(self) -> None:
        self.fired = True
        try:
            fd = self._conn.pgconn.socket
        except psycopg.OperationalError:
            return  # already closed
        try:
            with socket.socket(fileno=os.dup(fd)) as sock:
                sock.shutdown(socket.SHUT_RDWR)
        except OSError as exc:
            logger.debug("could not shut down a PostgreSQL connection: %s", exc)
