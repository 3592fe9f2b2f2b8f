"""The PostgreSQL store's connection: the pool, deadlines, and error mapping.

:class:`Database` is the one object the store holds; the package's other modules are functions
that take it. Every call takes its connection through :meth:`Database.conn`, which maps
psycopg's errors and timeouts onto :mod:`actrone_pg.errors`. Its settings and the schema's
facts are :mod:`.settings`'s frozen records; opening it (migration, schema checks) is
:mod:`.setup`; what writes and searches look up is :mod:`.lookups`; the background maintenance
is :mod:`.maintenance`.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
import math
import re
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any, Concatenate, ParamSpec, TypeVar

from actrone_pg.config import redact
from actrone_pg.errors import (
    MissingDependencyError,
    PoolSaturatedError,
    SchemaError,
    StoreError,
    StoreUnavailableError,
)
from actrone_pg.ranking import Analyzer, analyzer
from actrone_pg.stores.postgres.maintenance import Maintenance
from actrone_pg.stores.postgres.rows import jsonb
from actrone_pg.stores.postgres.settings import PostgresSettings, SchemaFacts
from actrone_pg.stores.postgres.severance import Severance
from actrone_pg.stores.postgres.statements import BEGIN_SERVING, SERVE_AGENT, SERVE_AGENT_LOCAL

try:
    import psycopg
    from psycopg import sql
    from psycopg.adapt import AdaptersMap
    from psycopg.pq import TransactionStatus
    from psycopg.rows import TupleRow, dict_row
    from psycopg_pool import AsyncConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("postgres", exc.name or "psycopg") from None

__all__ = ["LEXEME_CACHE_SIZE", "Database", "jsonb", "serving"]

logger = logging.getLogger("actrone_pg.postgres")


class _Connection(psycopg.AsyncConnection[TupleRow]):
    """The store's pooled connection: psycopg's, keeping the binary cursor that
    :meth:`Database.fetch_tuples` reads ``retrieve()``'s rows with. A cursor carries psycopg's
    adaptation context, which makes its parameters' dumpers and its columns' loaders on first
    use: a new cursor per call made them all again on every call (docs/benchmarks.md, "The
    client's CPU per call"). A connection serves one call at a time, so one cursor is enough."""

    #: The cursor of :meth:`Database.fetch_tuples`' reads, made on its first one.
    tuples_cursor: psycopg.AsyncCursor[TupleRow] | None = None


_Conn = _Connection

#: Seconds after a call's deadline at which asyncio cancels it, should severing its connection
#: not have ended it (see Database.conn).
_CANCEL_GRACE = 1.0
#: A connection handed back by a call that succeeded less than this many seconds ago is used
#: without the empty-query check (one round trip of every call, docs/benchmarks.md, "Where one
#: call's time goes"): a server restart takes longer than this, so a connection it left dead has
#: been idle longer. One killed within the window fails its call with StoreUnavailableError, and
#: the next call checks again (see _checkout).
_CHECKED_RECENTLY = 0.25
#: Citus's errors for a worker lost during a call that carry no SQLSTATE of their own (XX000,
#: psycopg's InternalError): the coordinator's failed transaction on that worker; the worker's
#: backend ending (its postmaster gone first under a kill, an administrator's stop, another of
#: its processes crashed), whose FATAL Citus relays without its SQLSTATE (57P01, 57P02 on one
#: server, operational errors there); and libpq's own words for the dropped connection, relayed
#: with the worker in their context. Either may come as libpq's message of the connection, with
#: the worker's severity first. The other errors of a lost worker are 08006 or 58030,
#: OperationalErrors (docs/scale-out.md, "Runbook").
_WORKER_LOST = re.compile(
    r"(?:(?:FATAL|ERROR|WARNING):\s+)?"
    r"(?:failure on connection marked as essential: "
    r"|terminating connection (?:due to unexpected postmaster exit|due to administrator command"
    r"|because of crash of another server process)"
    r"|(?:server closed the connection unexpectedly|could not receive data from server"
    r"|could not send data to server|no connection to the server|connection not open)"
    r".*\bwhile executing command on )",
    re.DOTALL,
)
#: Citus's error (XX000) for a commit that failed on a shard's worker after the coordinator sent
#: it: whether the worker committed is not known.
_COMMIT_UNCERTAIN = re.compile(r"could not commit transaction for shard \d+ on at least one")


#: How many tokens' lexemes a store keeps (a non-'simple' text search configuration maps each
#: token through the server once): the most recently used, about 5 MB at most (docs/reliability.md,
#: "Bounded state"). A vocabulary larger than this costs a round trip for the tokens it misses.
LEXEME_CACHE_SIZE = 20_000


#: The agent the running call serves (:meth:`Database.serving`), under row-level security.
_SERVING: contextvars.ContextVar[str] = contextvars.ContextVar("actrone_serving", default="")


P = ParamSpec("P")
R = TypeVar("R")


def serving(
    method: Callable[Concatenate[Database, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]:
    """``forward("db", method)`` for a call of one agent: run within :meth:`Database.serving`
    of that agent, the first argument after the state (an agent id, or an object carrying
    ``agent_id``: a turn, a search request), so that under row-level security every connection
    the call takes serves it. It forwards as :func:`~actrone_pg._forward.forward` does, in the
    same coroutine (one layer less on every call of the store)."""
    from actrone_pg._forward import bound

    async def call(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        first: Any = args[0] if args else kwargs.get("agent_id", "")
        agent = first if isinstance(first, str) else str(getattr(first, "agent_id", ""))
        # Database.serving's work, without a generator-based context manager on every call.
        token = _SERVING.set(agent)
        try:
            return await bound(method, self.db, *args, **kwargs)
        finally:
            _SERVING.reset(token)

    functools.update_wrapper(call, method)
    return call


def _worker_lost(exc: psycopg.Error) -> str | None:
    """What a Citus coordinator's error says of a worker that died or dropped the connection
    mid-call, for the message of a StoreUnavailableError; None if it is not such an error."""
    if exc.sqlstate != "XX000":
        return None
    if _COMMIT_UNCERTAIN.match(str(exc)):
        return (
            "a Citus worker was lost while committing; the write may or may not have been "
            f"committed: retry it with the same id (writes are idempotent by id): {exc}"
        )
    if _WORKER_LOST.match(str(exc)):
        return f"a Citus worker was lost during the call: {exc}"
    return None


class Database:
    """The PostgreSQL store's connection: the pool and its recovery, each call's deadlines, the
    mapping of psycopg's errors, and what this process caches about the database.

    Beside it, each with its own lifetime: :attr:`settings` (told, frozen),
    :attr:`facts` (found at setup, frozen, replaced once by :func:`.setup.setup`) and
    :attr:`maintenance` (the counters and background tasks of :mod:`.maintenance`, which alone
    changes them). :class:`~actrone_pg.stores.postgres.PostgresStore` holds one; the functions
    of the package's other modules take it as their first argument. Every call takes its
    connection through :meth:`conn`.
    """

    def __init__(self, settings: PostgresSettings) -> None:
        self.settings = settings
        self.facts = SchemaFacts(
            analyzer=analyzer(settings.text_analyzer, dates=settings.lexical_dates)
        )
        self.maintenance = Maintenance()
        #: The server's connection string (the embedded server's is known at setup).
        self.dsn = settings.dsn
        self.pool: AsyncConnectionPool[_Conn] | None = None
        # psycopg's adapters with pgvector's type, made at setup (setup._vector_adapters).
        self.adapters: AdaptersMap | None = None
        # A call could not reach the server: the next one first checks that it answers and, if
        # the pool has nothing to give, replaces the pool (see _recover). Calls recover one at
        # a time. Connections in use, and the old pools being closed after a replacement:
        self.server_lost = False
        self.recovery = asyncio.Lock()
        self.in_use = 0
        self.retired: set[asyncio.Future[None]] = set()
        # Connections taken from the pool and not yet given back (calls, checks, index builds).
        self.taken = 0
        # When a call or a check last ended well (event loop time): the server answers.
        self.answered_at = -math.inf
        # Each pooled connection's last successful use (event loop time), for _checkout.
        self.used_at: weakref.WeakKeyDictionary[_Conn, float] = weakref.WeakKeyDictionary()
        # -- caches of what never changes in the database once written (see lookups.py) --
        # embedder -> its registered dimension
        self.dimensions: dict[str, int] = {}
        # token -> its lexeme under a non-'simple' configuration (None for a stop word), the
        # LEXEME_CACHE_SIZE most recently used (lookups.normalise)
        self.lexemes: OrderedDict[str, str | None] = OrderedDict()
        # statement text -> the statement with the schema composed in (see compose)
        self.composed: dict[str, sql.Composed] = {}
        # (encoding, each column's name as the server sent it) -> the names decoded, for the
        # few column lists fetch_tuples reads (retrieve()'s): decoded once, not on every call.
        self.column_names: dict[tuple[str, tuple[bytes | None, ...]], tuple[str, ...]] = {}

    # -- what the statement modules read, whether told or found --------------------------------

    @property
    def schema(self) -> str:
        """The schema holding the store's tables (validated)."""
        return self.settings.schema

    @property
    def ts_config(self) -> str:
        """The text search configuration of the lexical index (``simple``: the analyzer's)."""
        return self.settings.text_search_config

    @property
    def ann_ef_search(self) -> int:
        """``hnsw.ef_search`` for the scan of an agent's own HNSW index."""
        return self.settings.ann_ef_search

    @property
    def analyzer(self) -> Analyzer:
        """How contents and queries become BM25 terms (:attr:`SchemaFacts.analyzer`)."""
        return self.facts.analyzer

    @property
    def vector_schema(self) -> str:
        """The schema of pgvector's type (:attr:`SchemaFacts.vector_schema`)."""
        return self.facts.vector_schema

    @property
    def distributed(self) -> bool:
        """The tables are distributed with Citus (:attr:`SchemaFacts.distributed`)."""
        return self.facts.distributed

    async def close(self) -> None:
        """Close the pool (the server stays up). Calling it twice is harmless."""
        pool, self.pool = self.pool, None
        if pool is not None:
            await pool.close()
        if self.retired:
            await asyncio.gather(*self.retired, return_exceptions=True)

    @contextmanager
    def serving(self, agent_id: str) -> Iterator[None]:
        """Within it, every connection :meth:`conn` hands out serves ``agent_id`` (row-level
        security: :meth:`serve`). The store's methods wrap their call in it; a call of no agent
        (the sweeps' listing, setup) serves none."""
        token = _SERVING.set(agent_id)
        try:
            yield
        finally:
            _SERVING.reset(token)

    async def serve(self, conn: _Conn, agent_id: str, *, alone: bool = False) -> None:
        """Under row-level security (``settings.row_security``), make ``conn`` serve
        ``agent_id``: the setting ``actrone.agent_id`` the policies read. On one server for the
        session (the store's connections are autocommit, so a transaction-local setting would
        end with the statement), replaced at each checkout. On Citus the policies are checked
        on the workers, which receive a setting only as a SET LOCAL of a transaction block with
        ``citus.propagate_set_commands = 'local'``: the call becomes one transaction that starts
        so, which :meth:`conn` ends (docs/postgres.md, "On Citus"). A batch of several agents
        switches between them in its transaction with it. Nothing without row security."""
        if not self.settings.row_security:
            return
        if not self.distributed:
            await conn.execute(self.compose(SERVE_AGENT), (agent_id,))
            return
        if alone:
            return  # a statement no transaction block may hold (conn(alone=True)): no agent
        # Citus relays a SET LOCAL as the text it came in: one statement each, pipelined.
        serve = sql.SQL(SERVE_AGENT_LOCAL).format(sql.Literal(agent_id))
        if conn.info.transaction_status != TransactionStatus.IDLE:
            await conn.execute(serve)  # a batch of several agents, at its next agent
            return
        async with conn.pipeline():
            for statement in BEGIN_SERVING:
                await conn.execute(statement)
            await conn.execute(serve)

    def in_call_transaction(self, conn: _Conn) -> bool:
        """Row security on Citus: :meth:`serve` opened a transaction around the call, which
        :meth:`conn` commits (or rolls back) when the call ends."""
        return (
            self.settings.row_security
            and self.distributed
            and conn.info.transaction_status != TransactionStatus.IDLE
        )

    def compose(self, text: str) -> sql.Composed:
        composed = self.composed.get(text)
        if composed is None:
            composed = sql.SQL(text).format(s=sql.Identifier(self.schema))
            self.composed[text] = composed
        return composed

    @asynccontextmanager
    async def conn(self, *, alone: bool = False) -> AsyncIterator[_Conn]:
        """A connection for one call, within the call's bounds, psycopg's errors mapped.

        ``alone``: for statements that no transaction block may hold (``VACUUM``, ``DROP INDEX
        CONCURRENTLY``), which read no agent's rows: under row security on Citus, where every
        other call is a transaction that carries its agent (:meth:`serve`), none is opened.
        """
        # The bound: connect timeout to take a connection, connect + statement timeout for all.
        # A server that stops answering (frozen, or a network that drops packets) cannot enforce
        # its statement_timeout, and cancelling the task mid-statement makes psycopg send a
        # cancel request and wait for it (up to 10 s more against a frozen server). So at the
        # deadline the connection's socket is shut down instead (Severance): the statement
        # fails at once, and the pool replaces the connection. asyncio's cancellation stays as
        # a backstop only.
        if self.pool is None:
            raise StoreError("the store is not set up (call setup() first) or already closed")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.op_timeout
        severance: Severance | None = None
        try:
            async with asyncio.timeout_at(deadline + _CANCEL_GRACE):
                pool, conn = await self._checkout(
                    loop.time() + self.settings.connect_timeout, deadline
                )
                self.in_use += 1
                severance = Severance(conn, deadline)
                try:
                    # Every checkout: a pooled connection never keeps the last call's agent.
                    if self.settings.row_security:
                        await self.serve(conn, _SERVING.get(), alone=alone)
                    yield conn
                    if self.in_call_transaction(conn):
                        await conn.execute("COMMIT")
                    if not severance.fired:
                        self.used_at[conn] = self.answered_at = loop.time()
                except BaseException as exc:
                    if self.in_call_transaction(conn) and not conn.closed and not conn.broken:
                        # The call's transaction (row security on Citus): nothing of it stays.
                        with contextlib.suppress(psycopg.Error):
                            await conn.execute("ROLLBACK")
                    if not isinstance(exc, psycopg.Error):
                        raise
                    if self.distributed and not isinstance(exc, psycopg.OperationalError):
                        # Citus 13-14: after an error raised while planning, a session never
                        # delegates a function again (docs/scale-out.md). Closed, the connection
                        # is replaced by the pool instead of serving searches undelegated.
                        await conn.close()
                    raise
                finally:
                    severance.cancel()
                    self.in_use -= 1
                    await self._putconn(pool, conn, severance)
        except PoolTimeout:
            self.server_lost = True
            raise StoreUnavailableError(
                f"no PostgreSQL connection within {self.settings.connect_timeout} s "
                "(postgres_connect_timeout); the server may be down"
            ) from None
        except TimeoutError:
            raise StoreUnavailableError(
                f"PostgreSQL did not answer within {self.settings.op_timeout} s"
            ) from None
        except psycopg.errors.UndefinedTable as exc:
            raise SchemaError(
                f"the schema {self.schema!r} is missing a table ({exc}); run `actrone-pg migrate`"
            ) from None
        except psycopg.errors.UndefinedFunction as exc:
            raise SchemaError(
                f"the schema {self.schema!r} is missing a function ({exc}); "
                "run `actrone-pg migrate`"
            ) from None
        except psycopg.errors.QueryCanceled:
            raise StoreUnavailableError(
                f"a statement ran longer than {self.settings.statement_timeout} s "
                "(postgres_statement_timeout) and was cancelled"
            ) from None
        except psycopg.OperationalError as exc:
            self.server_lost = True
            if severance is not None and severance.fired:
                raise StoreUnavailableError(
                    f"PostgreSQL did not answer within {self.settings.op_timeout:g} s "
                    "(postgres_connect_timeout + postgres_statement_timeout); the connection "
                    "was closed"
                ) from None
            raise StoreUnavailableError(redact(f"PostgreSQL connection failed: {exc}")) from None
        except psycopg.Error as exc:
            lost = _worker_lost(exc)
            if lost is not None:
                raise StoreUnavailableError(redact(lost)) from None
            raise StoreError(redact(f"PostgreSQL error: {exc}")) from exc

    async def _checkout(
        self, by: float, deadline: float
    ) -> tuple[AsyncConnectionPool[_Conn], _Conn]:
        """A connection that answers, and its pool: taken from the pool by ``by``, checked by
        the call's ``deadline`` at the latest (event loop times).

        Each connection is checked (an empty query) before it is used, unless a call used it
        successfully within the last ``_CHECKED_RECENTLY`` seconds; one that fails goes back to
        the pool, which replaces it at once, and the next is tried without a pause. (The pool's
        own check paused a second after the second failure in a row: after a restart, with a
        few dead connections pooled, the first call ran out of time although the server
        answered.) The check has the connect timeout of its own: one taken from a busy pool
        just before ``by`` would otherwise be cut off although the server answers, its
        connection severed and the server taken for lost.

        A pool whose every connection stays in use until ``by`` raises
        :class:`PoolSaturatedError`: load, not an outage (the server is not marked lost).
        """
        loop = asyncio.get_running_loop()
        while True:
            if self.server_lost:
                await self._recover(by)
            pool = self.pool
            if pool is None:
                raise StoreError("the store is not set up (call setup() first) or already closed")
            conn = await self._getconn(pool, by)
            used = self.used_at.pop(conn, None)
            if (
                used is not None
                and loop.time() - used < _CHECKED_RECENTLY
                and not self.server_lost
                and not conn.broken
            ):
                return pool, conn
            severance = Severance(conn, min(deadline, loop.time() + self.settings.connect_timeout))
            try:
                await conn.execute("")
            except psycopg.Error as exc:
                logger.info("discarded a PostgreSQL connection that failed its check: %s", exc)
                await self._putconn(pool, conn, severance)
                if severance.fired:  # the server did not answer in time
                    raise PoolTimeout() from None
                continue
            except BaseException:
                await self._putconn(pool, conn, severance)
                raise
            finally:
                severance.cancel()
            if severance.fired:
                # The answer and the deadline came in one pass of the event loop: the check
                # succeeded, but the socket is shut down. Never handed out.
                await self._putconn(pool, conn, severance)
                raise PoolTimeout()
            self.answered_at = loop.time()
            return pool, conn

    async def _getconn(self, pool: AsyncConnectionPool[_Conn], by: float) -> _Conn:
        """A connection from ``pool`` by ``by``, counted in :attr:`taken` until
        :meth:`_putconn`: :class:`PoolSaturatedError` if the wait times out while the pool is
        busy with calls the server answers, ``PoolTimeout`` if it could not open connections."""
        loop = asyncio.get_running_loop()
        waited_from = loop.time()
        try:
            conn = await pool.getconn(timeout=max(0.0, by - waited_from))
        except PoolTimeout:
            # Saturated: the server answered other calls meanwhile (a connection they give
            # back goes straight to a waiting call, so some are always between two calls and
            # not counted as taken), or every connection was taken throughout (long
            # statements). Otherwise the pool could not open connections: the server is lost.
            if self.answered_at >= waited_from or self.taken >= pool.max_size:
                raise PoolSaturatedError(
                    f"the PostgreSQL connection pool is saturated: all {pool.max_size} of its "
                    "connections (postgres_pool_max_size) stayed in use by other calls for "
                    f"{self.settings.connect_timeout:g} s (postgres_connect_timeout); this is "
                    "load, not an outage: retry later, send fewer concurrent calls, or raise "
                    "postgres_pool_max_size"
                ) from None
            raise
        self.taken += 1
        return conn

    async def _putconn(
        self, pool: AsyncConnectionPool[_Conn], conn: _Conn, severance: Severance | None
    ) -> None:
        """Give ``conn`` back to ``pool``. One whose socket ``severance`` shut down is closed
        first, so that the pool replaces it: its status still reads idle until it is used, and
        the pool would hand it to the next call ("server closed the connection unexpectedly"
        from a healthy server)."""
        self.taken -= 1
        if severance is not None and severance.fired and not conn.closed:
            await conn.close()
        await pool.putconn(conn)

    @asynccontextmanager
    async def unbounded_conn(self) -> AsyncIterator[_Conn]:
        """A pooled connection without a call's deadline or error mapping (an index build
        takes minutes), taken within the connect timeout and counted as taken like a call's."""
        pool = self.pool
        if pool is None:
            raise StoreError("the store is not set up (call setup() first) or already closed")
        conn = await self._getconn(
            pool, asyncio.get_running_loop().time() + self.settings.connect_timeout
        )
        try:
            yield conn
        finally:
            await self._putconn(pool, conn, None)

    async def _recover(self, by: float) -> None:
        """After a call could not reach the server: does it answer now? (by ``by``)

        If not, the call fails at once. If it does and the pool has no connection to give (its
        reconnection attempts back off exponentially, up to 30 s apart after a long outage), a
        fresh pool replaces it, so that the first call after the server is back succeeds; the
        old pool is closed in the background.
        """
        assert self.dsn is not None
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout_at(by):
                async with self.recovery:
                    if not self.server_lost:
                        return  # another call recovered meanwhile
                    probe = await psycopg.AsyncConnection.connect(
                        self.dsn,
                        autocommit=True,
                        connect_timeout=max(1, math.ceil(by - loop.time())),
                    )
                    await probe.close()
                    self.server_lost = False
                    pool = self.pool
                    if (
                        pool is not None
                        and self.in_use == 0
                        and pool.get_stats().get("pool_available", 0) == 0
                    ):
                        await self._replace_pool(pool)
        except TimeoutError:
            raise StoreUnavailableError(
                f"PostgreSQL did not accept a connection within {self.settings.connect_timeout} s "
                "(postgres_connect_timeout); the server may be down"
            ) from None
        except psycopg.OperationalError as exc:
            raise StoreUnavailableError(redact(f"PostgreSQL connection failed: {exc}")) from None

    async def _replace_pool(self, old: AsyncConnectionPool[_Conn]) -> None:
        assert self.dsn is not None
        pool = self.new_pool(self.dsn)
        await pool.open()  # connects in the background; a call waits for its connection
        self.pool = pool
        logger.warning(
            "PostgreSQL answers again; replaced the connection pool %s, whose reconnection "
            "attempts were backing off",
            old.name,
        )
        task = asyncio.ensure_future(old.close())
        self.retired.add(task)
        task.add_done_callback(self.retired.discard)

    def new_pool(self, dsn: str) -> AsyncConnectionPool[_Conn]:
        timeout_ms = max(1, int(self.settings.statement_timeout * 1000))
        return AsyncConnectionPool(
            dsn,
            min_size=self.settings.pool_min_size,
            max_size=self.settings.pool_max_size,
            timeout=self.settings.connect_timeout,
            # A lost server is retried in the background; calls fail fast meanwhile.
            reconnect_timeout=max(60.0, self.settings.connect_timeout),
            connection_class=_Connection,
            kwargs={
                "autocommit": True,
                # Every connection's adapters start from this map (vector included): see
                # _vector_adapters.
                "context": self.adapters,
                "connect_timeout": max(1, math.ceil(self.settings.connect_timeout)),
                # JIT compilation costs tens of milliseconds and never pays off here.
                # UTC: timestamps come back in the time zone the library uses.
                "options": f"-c statement_timeout={timeout_ms} -c jit=off -c TimeZone=UTC",
            },
            configure=self._configure,
            # No check callback: _checkout checks each connection itself (see there).
            open=False,
            name=f"actrone-{self.schema}",
        )

    async def _configure(self, conn: _Conn) -> None:
        # Once per pooled connection (the vector type comes with its adapters, see
        # _vector_adapters): how the HNSW index of a large agent is scanned (strict_order:
        # iterate until the LIMIT is met, in exact distance order; only those indexes are ever
        # scanned).
        await conn.execute(
            sql.SQL("SET hnsw.ef_search = {}").format(sql.Literal(self.ann_ef_search))
        )
        await conn.execute("SET hnsw.iterative_scan = strict_order")

    async def fetch(
        self,
        conn: _Conn,
        statement: sql.Composed | str,
        params: Sequence[Any] | Mapping[str, Any],
        *,
        binary: bool = False,
        prepare: bool | None = None,
    ) -> list[dict[str, Any]]:
        """Run ``statement`` and return its rows as dicts, to be read by column name.

        ``prepare=False`` keeps psycopg from preparing it (each run is then planned for its
        values); ``None``, psycopg's default, prepares a statement run often."""
        cur = conn.cursor(row_factory=dict_row, binary=binary)
        await cur.execute(statement, params, prepare=prepare)
        return await cur.fetchall()

    async def fetch_tuples(
        self,
        conn: _Conn,
        statement: sql.Composed | str,
        params: Sequence[Any] | Mapping[str, Any],
    ) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
        """Run ``statement`` and return its column names and its rows as tuples, for a decoder
        that finds each column by its name once per column list (:func:`.rows.retrieved`).
        The rows come in binary, which parses an order of magnitude faster than text
        (docs/benchmarks.md), through the connection's own cursor (:class:`_Connection`); the
        names of a column list seen before are its decoded names of then
        (:attr:`column_names`)."""
        cur = conn.tuples_cursor
        if cur is None or cur.closed:
            cur = conn.tuples_cursor = conn.cursor(binary=True)
        await cur.execute(statement, params)
        found = await cur.fetchall()
        result = cur.pgresult
        if result is None:  # pragma: no cover - a statement that returns no rows
            return (), found
        encoding = conn.info.encoding
        raw = tuple([result.fname(i) for i in range(result.nfields)])
        names = self.column_names.get((encoding, raw))
        if names is None:
            names = tuple((n or b"").decode(encoding) for n in raw)
            self.column_names[encoding, raw] = names
        return names, found
