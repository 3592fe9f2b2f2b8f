"""Ending a call on a frozen server without a cancel request (see ``Database.conn``)."""

from __future__ import annotations

import asyncio
import logging
import os
import select
import socket
from typing import Any

from actrone_pg.errors import MissingDependencyError

try:
    import psycopg
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("postgres", exc.name or "psycopg") from None

__all__ = ["Severance"]

logger = logging.getLogger("actrone_pg.postgres")

#: Seconds after which a deadline that found an answer waiting looks at the socket again, and
#: how many times: a task that has not read its answer by then is not reading (it may be
#: writing, with the server's error waiting unread), and the socket is shut down.
_RECHECK = 0.01
_RECHECKS = 5


class Severance:
    """Shuts a connection's socket down at ``deadline`` (event loop time) unless cancelled.

    ``shutdown`` leaves the descriptor open (the event loop may be watching it) but makes it
    readable at once: libpq reads end-of-file and psycopg raises ``OperationalError`` without
    sending a cancel request, which a frozen server would never answer.

    A socket with an answer waiting in it is not shut down: the server did answer, and the
    deadline came before the waiting task could read it (a busy event loop runs the timer
    and the socket's callback in one pass). Cut off then, the statement had succeeded and
    its connection was handed on shut down ("server closed the connection unexpectedly" from
    a healthy server). The timer looks again ``_RECHECK`` seconds later, a few times, in case
    the answer was only the start of one (the server froze midway) or is not being read.
    """

    def __init__(self, conn: Any, deadline: float) -> None:
        #: The socket was shut down: the call ran out of time.
        self.fired = False
        self._conn = conn
        self._loop = asyncio.get_running_loop()
        self._rechecks = 0
        self._handle = self._loop.call_at(deadline, self._fire)

    def cancel(self) -> None:
        self._handle.cancel()

    def _fire(self) -> None:
        try:
            fd = self._conn.pgconn.socket
        except psycopg.OperationalError:
            self.fired = True
            return  # already closed
        if self._rechecks < _RECHECKS and _readable(fd):
            self._rechecks += 1
            self._handle = self._loop.call_later(_RECHECK, self._fire)
            return
        self.fired = True
        try:
            with socket.socket(fileno=os.dup(fd)) as sock:
                sock.shutdown(socket.SHUT_RDWR)
        except OSError as exc:
            logger.debug("could not shut down a PostgreSQL connection: %s", exc)


def _readable(fd: int) -> bool:
    """Data (or the server's end-of-file) waits in the socket, unread."""
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))
    return bool(select.select([fd], [], [], 0)[0])  # pragma: no cover - Windows
