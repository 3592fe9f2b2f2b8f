"""The PostgreSQL store's state: configuration, the pool, and error mapping.

:class:`Database` is the one object the store holds; the package's other modules are functions
that take it. Every call takes its connection through :meth:`Database.conn`, which maps
psycopg's errors and timeouts onto :mod:`actrone_pg.errors`. Opening it (migration, schema
checks) is :mod:`.setup`; what writes and searches look up is :mod:`.lookups`.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import weakref
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from actrone_pg.config import redact
from actrone_pg.errors import (
    ConfigurationError,
    MissingDependencyError,
    SchemaError,
    StoreError,
    StoreUnavailableError,
)
from actrone_pg.ranking import (
    ANALYZERS,
    DEFAULT_ANALYZER,
    analyzer,
)
from actrone_pg.stores.postgres.rows import jsonb
from actrone_pg.stores.postgres.severance import Severance
from actrone_pg.stores.postgres.statements import (
    ANALYZE_FIRST,
    SETTLE_SECONDS,
)

try:
    import psycopg
    from psycopg import sql
    from psycopg.adapt import AdaptersMap
    from psycopg.rows import TupleRow, dict_row
    from psycopg_pool import AsyncConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("postgres", exc.name or "psycopg") from None

__all__ = ["Database", "jsonb"]

logger = logging.getLogger("actrone_pg.postgres")

_Conn = psycopg.AsyncConnection[TupleRow]

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
    """The PostgreSQL store's state: its configuration, the pool and what this process caches
    about the server, and the mapping of psycopg's errors.

    :class:`~actrone_pg.stores.postgres.PostgresStore` holds one (its constructor's parameters
    are described there); the functions of the package's other modules take it as their first
    argument. Every call takes its connection through :meth:`conn`.
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        schema: str = "actrone",
        auto_migrate: bool = True,
        data_dir: str | Path | None = None,
        pool_min_size: int = 1,
        pool_max_size: int = 10,
        connect_timeout: float = 5.0,
        statement_timeout: float = 30.0,
        text_search_config: str = "simple",
        text_analyzer: str = DEFAULT_ANALYZER,
        lexical_dates: bool | None = None,
        ann_min_memories: int = 50_000,
        ann_ef_search: int = 800,
        distribute: str = "auto",
    ) -> None:
        from actrone_pg.config import DISTRIBUTE_MODES
        from actrone_pg.migrations import validate_schema

        self.schema = validate_schema(schema)
        if not re.fullmatch(r"[a-z_][a-z0-9_]*", text_search_config):
            raise ConfigurationError(
                "postgres_text_search_config", f"{text_search_config!r} is not a plain identifier"
            )
        self.ts_config = text_search_config
        if distribute not in DISTRIBUTE_MODES:
            raise ConfigurationError(
                "postgres_distribute",
                f"unknown mode {distribute!r}; choose one of {', '.join(DISTRIBUTE_MODES)}",
            )
        self.distribute = distribute
        #: The schema's tables are distributed with Citus (found at setup): per-agent calls then
        #: take the forms Citus runs on one worker (docs/scale-out.md).
        self.distributed = False
        #: Batches are written by migration 0022's agent_write and a COPY (set at setup where the
        #: schema is distributed; on one server, the tests that hold it to the statements set it).
        self.write_by_call = False
        if text_analyzer not in ANALYZERS:
            raise ConfigurationError("text_analyzer", f"unknown analyzer {text_analyzer!r}")
        #: How contents and queries become BM25 terms (under postgres_text_search_config
        #: 'simple'; any other configuration maps the plain tokens through the server instead).
        self.analyzer = analyzer(text_analyzer, dates=lexical_dates)
        #: lexical_dates was set: a store recorded otherwise is then an error, not followed
        #: (ranking.follow_recorded).
        self.dates_given = lexical_dates is not None
        # token -> its lexeme under a non-'simple' configuration (None for a stop word)
        self.lexemes: dict[str, str | None] = {}
        self.dsn = dsn
        self.auto_migrate = auto_migrate
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.min_size = pool_min_size
        self.max_size = pool_max_size
        self.connect_timeout = connect_timeout
        self.statement_timeout = statement_timeout
        # A call never waits longer than this, whatever the network does.
        self.op_timeout = connect_timeout + statement_timeout
        self.pool: AsyncConnectionPool[_Conn] | None = None
        # A call could not reach the server: the next one first checks that it answers and, if
        # the pool has nothing to give, replaces the pool (see _recover). Calls recover one at
        # a time. Connections in use, and the old pools being closed after a replacement:
        self.server_lost = False
        self.recovery = asyncio.Lock()
        self.in_use = 0
        self.retired: set[asyncio.Future[None]] = set()
        # Each pooled connection's last successful use (event loop time), for _checkout.
        self.used_at: weakref.WeakKeyDictionary[_Conn, float] = weakref.WeakKeyDictionary()
        self.dimensions: dict[str, int] = {}
        self.composed: dict[str, sql.Composed] = {}
        self.ann_ef_search = ann_ef_search
        # -- the maintenance layer's state (maintenance.py) --
        # Memories written by this store, and the count at which it next runs ANALYZE.
        self.written = 0
        self.next_analyze = ANALYZE_FIRST
        # Memories written since the last maintenance, when the last write ended, and the task
        # that runs the maintenance once writes pause (see maintenance.settle).
        self.unmaintained = 0
        self.last_write = 0.0
        self.settle_seconds = SETTLE_SECONDS
        self.settle_task: asyncio.Task[None] | None = None
        # Large agents' HNSW indexes: (agent, embedder) -> (has a valid one, when last checked),
        # the builds running in the background, and when a build last failed.
        self.ann_min = ann_min_memories
        self.ann_known: dict[tuple[str, str], tuple[bool, float]] = {}
        self.ann_builds: dict[tuple[str, str], asyncio.Task[None]] = {}
        self.ann_failed: dict[tuple[str, str], float] = {}
        # Index builds and ANALYZE take turns (see ANN_LOCK); an ANALYZE due while a build runs
        # is run by the build when it is done, so that writers never wait for a build.
        self.maintenance = asyncio.Lock()
        self.analyze_pending = False
        self.vector_schema = "public"
        self.adapters: AdaptersMap | None = None

    async def close(self) -> None:
        """Close the pool (the server stays up). Calling it twice is harmless."""
        pool, self.pool = self.pool, None
        if pool is not None:
            await pool.close()
        if self.retired:
            await asyncio.gather(*self.retired, return_exceptions=True)

    def compose(self, text: str) -> sql.Composed:
        composed = self.composed.get(text)
        if composed is None:
            composed = sql.SQL(text).format(s=sql.Identifier(self.schema))
            self.composed[text] = composed
        return composed

    @asynccontextmanager
    async def conn(self) -> AsyncIterator[_Conn]:
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
        deadline = loop.time() + self.op_timeout
        severance: Severance | None = None
        try:
            async with asyncio.timeout_at(deadline + _CANCEL_GRACE):
                pool, conn = await self._checkout(loop.time() + self.connect_timeout)
                self.in_use += 1
                severance = Severance(conn, deadline)
                try:
                    yield conn
                    self.used_at[conn] = loop.time()
                except psycopg.Error as exc:
                    if self.distributed and not isinstance(exc, psycopg.OperationalError):
                        # Citus 13-14: after an error raised while planning, a session never
                        # delegates a function again (docs/scale-out.md). Closed, the connection
                        # is replaced by the pool instead of serving searches undelegated.
                        await conn.close()
                    raise
                finally:
                    severance.cancel()
                    self.in_use -= 1
                    await pool.putconn(conn)
        except PoolTimeout:
            self.server_lost = True
            raise StoreUnavailableError(
                f"no PostgreSQL connection within {self.connect_timeout} s "
                "(postgres_connect_timeout); the server may be down"
            ) from None
        except TimeoutError:
            raise StoreUnavailableError(
                f"PostgreSQL did not answer within {self.op_timeout} s"
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
                f"a statement ran longer than {self.statement_timeout} s "
                "(postgres_statement_timeout) and was cancelled"
            ) from None
        except psycopg.OperationalError as exc:
            self.server_lost = True
            if severance is not None and severance.fired:
                raise StoreUnavailableError(
                    f"PostgreSQL did not answer within {self.op_timeout:g} s "
                    "(postgres_connect_timeout + postgres_statement_timeout); the connection "
                    "was closed"
                ) from None
            raise StoreUnavailableError(redact(f"PostgreSQL connection failed: {exc}")) from None
        except psycopg.Error as exc:
            lost = _worker_lost(exc)
            if lost is not None:
                raise StoreUnavailableError(redact(lost)) from None
            raise StoreError(redact(f"PostgreSQL error: {exc}")) from exc

    async def _checkout(self, by: float) -> tuple[AsyncConnectionPool[_Conn], _Conn]:
        """A connection that answers, and its pool, by ``by`` (event loop time).

        Each connection is checked (an empty query, cut off at ``by``) before it is used, unless
        a call used it successfully within the last ``_CHECKED_RECENTLY`` seconds; one that
        fails goes back to the pool, which replaces it at once, and the next is tried without a
        pause. (The pool's own check paused a second after the second failure in a
        row: after a restart, with a few dead connections pooled, the first call ran out of
        time although the server answered.)
        """
        loop = asyncio.get_running_loop()
        while True:
            if self.server_lost:
                await self._recover(by)
            pool = self.pool
            if pool is None:
                raise StoreError("the store is not set up (call setup() first) or already closed")
            conn = await pool.getconn(timeout=max(0.0, by - loop.time()))
            used = self.used_at.pop(conn, None)
            if (
                used is not None
                and loop.time() - used < _CHECKED_RECENTLY
                and not self.server_lost
                and not conn.broken
            ):
                return pool, conn
            severance = Severance(conn, by)
            try:
                await conn.execute("")
            except psycopg.Error as exc:
                logger.info("discarded a PostgreSQL connection that failed its check: %s", exc)
                await pool.putconn(conn)
                if severance.fired:  # the server did not answer in time
                    raise PoolTimeout() from None
                continue
            except BaseException:
                await pool.putconn(conn)
                raise
            finally:
                severance.cancel()
            return pool, conn

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
                f"PostgreSQL did not accept a connection within {self.connect_timeout} s "
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
        timeout_ms = max(1, int(self.statement_timeout * 1000))
        return AsyncConnectionPool(
            dsn,
            min_size=self.min_size,
            max_size=self.max_size,
            timeout=self.connect_timeout,
            # A lost server is retried in the background; calls fail fast meanwhile.
            reconnect_timeout=max(60.0, self.connect_timeout),
            kwargs={
                "autocommit": True,
                # Every connection's adapters start from this map (vector included): see
                # _vector_adapters.
                "context": self.adapters,
                "connect_timeout": max(1, math.ceil(self.connect_timeout)),
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
