"""The PostgreSQL store's base layer: configuration, the pool, error mapping, the schema check.

Every call takes its connection through :meth:`Connection._conn`, which maps psycopg's errors
and timeouts onto :mod:`actrone_pg.errors`. Text search normalisation (a configuration other than
``simple`` turns tokens into lexemes) and the embedder registry are here too: both writes and
search need them.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import weakref
from collections import Counter
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
    analyzer_mismatch,
    tokenize,
)
from actrone_pg.stores.base import Fence, dimension_mismatch, lock_lost
from actrone_pg.stores.postgres import rows
from actrone_pg.stores.postgres.rows import jsonb
from actrone_pg.stores.postgres.severance import Severance
from actrone_pg.stores.postgres.statements import (
    ANALYZE_FIRST,
    CITUS_INSTALLED,
    DISTRIBUTED,
    HOLDS_LOCK,
    NORMALISE,
    RECORD_ANALYZER,
    RECORD_TS_CONFIG,
    SELECT_ANALYZER,
    SELECT_EMBEDDERS,
    SELECT_TS_CONFIG,
    SETTLE_SECONDS,
    VECTOR_SCHEMA,
)

try:
    import psycopg
    from pgvector.psycopg.vector import register_vector_info
    from psycopg import sql
    from psycopg.adapt import AdaptersMap
    from psycopg.rows import TupleRow, dict_row
    from psycopg.types import TypeInfo
    from psycopg_pool import AsyncConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("postgres", exc.name or "psycopg") from None

__all__ = ["Connection", "jsonb"]

logger = logging.getLogger("actrone_pg.postgres")

_Conn = psycopg.AsyncConnection[TupleRow]

#: Seconds after a call's deadline at which asyncio cancels it, should severing its connection
#: not have ended it (see _conn).
_CANCEL_GRACE = 1.0
#: A connection handed back by a call that succeeded less than this many seconds ago is used
#: without the empty-query check (one round trip of every call, docs/benchmarks.md, "Where one
#: call's time goes"): a server restart takes longer than this, so a connection it left dead has
#: been idle longer. One killed within the window fails its call with StoreUnavailableError, and
#: the next call checks again (see _checkout).
_CHECKED_RECENTLY = 0.25


class Connection:
    """The store's configuration and state, its pool, and the errors it maps.

    The other layers of :class:`~actrone_pg.stores.postgres.PostgresStore` build on this one;
    its constructor is the store's (the parameters are described there).
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
        self._ts_config = text_search_config
        if distribute not in DISTRIBUTE_MODES:
            raise ConfigurationError(
                "postgres_distribute",
                f"unknown mode {distribute!r}; choose one of {', '.join(DISTRIBUTE_MODES)}",
            )
        self._distribute = distribute
        #: The schema's tables are distributed with Citus (found at setup): per-agent calls then
        #: take the forms Citus runs on one worker (docs/scale-out.md).
        self.distributed = False
        if text_analyzer not in ANALYZERS:
            raise ConfigurationError("text_analyzer", f"unknown analyzer {text_analyzer!r}")
        #: How contents and queries become BM25 terms (under postgres_text_search_config
        #: 'simple'; any other configuration maps the plain tokens through the server instead).
        self.analyzer = analyzer(text_analyzer)
        # token -> its lexeme under a non-'simple' configuration (None for a stop word)
        self._lexemes: dict[str, str | None] = {}
        self._dsn = dsn
        self._auto_migrate = auto_migrate
        self._data_dir = Path(data_dir) if data_dir is not None else None
        self._min_size = pool_min_size
        self._max_size = pool_max_size
        self._connect_timeout = connect_timeout
        self._statement_timeout = statement_timeout
        # A call never waits longer than this, whatever the network does.
        self._op_timeout = connect_timeout + statement_timeout
        self._pool: AsyncConnectionPool[_Conn] | None = None
        # A call could not reach the server: the next one first checks that it answers and, if
        # the pool has nothing to give, replaces the pool (see _recover). Calls recover one at
        # a time. Connections in use, and the old pools being closed after a replacement:
        self._server_lost = False
        self._recovery = asyncio.Lock()
        self._in_use = 0
        self._retired: set[asyncio.Future[None]] = set()
        # Each pooled connection's last successful use (event loop time), for _checkout.
        self._used_at: weakref.WeakKeyDictionary[_Conn, float] = weakref.WeakKeyDictionary()
        self._dimensions: dict[str, int] = {}
        self._sql: dict[str, sql.Composed] = {}
        self._ann_ef_search = ann_ef_search
        # -- the maintenance layer's state (maintenance.py) --
        # Memories written by this store, and the count at which it next runs ANALYZE.
        self._written = 0
        self._next_analyze = ANALYZE_FIRST
        # Memories written since the last maintenance, when the last write ended, and the task
        # that runs the maintenance once writes pause (see _settle).
        self._unmaintained = 0
        self._last_write = 0.0
        self._settle_seconds = SETTLE_SECONDS
        self._settle_task: asyncio.Task[None] | None = None
        # Large agents' HNSW indexes: (agent, embedder) -> (has a valid one, when last checked),
        # the builds running in the background, and when a build last failed.
        self._ann_min = ann_min_memories
        self._ann_known: dict[tuple[str, str], tuple[bool, float]] = {}
        self._ann_builds: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._ann_failed: dict[tuple[str, str], float] = {}
        # Index builds and ANALYZE take turns (see ANN_LOCK); an ANALYZE due while a build runs
        # is run by the build when it is done, so that writers never wait for a build.
        self._maintenance = asyncio.Lock()
        self._analyze_pending = False
        self._vector_schema = "public"
        self._adapters: AdaptersMap | None = None

    @property
    def dsn(self) -> str | None:
        """The server's connection string (for the embedded server, known after setup)."""
        return self._dsn

    # -- lifecycle --
    async def setup(self) -> None:
        """Start the embedded server if needed, migrate (or check the schema), open the pool."""
        if self._pool is not None:
            return
        if self._dsn is None:
            from actrone_pg._embedded import embedded_dsn

            if self._data_dir is None:
                from actrone_pg.config import default_data_dir

                self._data_dir = Path(default_data_dir())
            self._dsn = await asyncio.to_thread(embedded_dsn, self._data_dir)
        await asyncio.to_thread(self._prepare_schema, self._dsn)
        if self._adapters is None:
            self._adapters = await self._vector_adapters(self._dsn)
        pool = self._new_pool(self._dsn)
        try:
            await pool.open(wait=True, timeout=self._connect_timeout)
        except PoolTimeout:
            await pool.close()
            raise StoreUnavailableError(
                f"could not connect to PostgreSQL within {self._connect_timeout} s "
                "(postgres_connect_timeout); is the server running and the DSN right?"
            ) from None
        self._pool = pool
        try:
            await self._check_text_search_config()
            await self._check_text_analyzer()
            async with self._conn() as conn:
                cur = await conn.execute(VECTOR_SCHEMA)
                row = await cur.fetchone()
                self._vector_schema = str(row[0]) if row else "public"
                cur = await conn.execute(CITUS_INSTALLED)
                citus = bool((await cur.fetchone() or (False,))[0])
                distributed = False
                if citus:
                    cur = await conn.execute(
                        DISTRIBUTED, (sql.Identifier(self.schema, "memories").as_string(),)
                    )
                    distributed = bool((await cur.fetchone() or (False,))[0])
            self._check_distribution(citus, distributed)
        except BaseException:
            await self.close()
            raise

    async def _vector_adapters(self, dsn: str) -> AdaptersMap:
        """psycopg's adapters with pgvector's vector type, for every connection of this store.

        pgvector's registration makes new dumper classes on each call, and psycopg caches every
        class it has seen in a class-level map that is never emptied: registering per
        connection grew the process by ~25 KB per new connection (the pool replaces them
        hourly and after outages). So the type is looked up once (its OID is the database's)
        and registered once, on a map each pooled connection starts from (``context=``).
        """
        try:
            async with await psycopg.AsyncConnection.connect(
                dsn, autocommit=True, connect_timeout=max(1, math.ceil(self._connect_timeout))
            ) as conn:
                info = await TypeInfo.fetch(conn, "vector")
        except psycopg.OperationalError as exc:
            raise StoreUnavailableError(redact(f"cannot connect to PostgreSQL: {exc}")) from None
        if info is None:
            raise SchemaError(
                "the database has no 'vector' type: pgvector is not installed in it "
                "(run `actrone-pg migrate`, which installs it)"
            )
        adapters = AdaptersMap(psycopg.adapters)
        register_vector_info(adapters, info)  # type: ignore[arg-type]  # an AdaptContext too
        return adapters

    def _check_distribution(self, citus: bool, distributed: bool) -> None:
        """Record whether the schema is distributed; ``postgres_distribute="citus"`` requires it."""
        self.distributed = distributed
        if self._distribute != "citus" or distributed:
            return
        if not citus:
            raise ConfigurationError(
                "postgres_distribute",
                "'citus' needs a Citus coordinator, and this server has no citus extension; "
                "connect to the coordinator, or set postgres_distribute='auto' (docs/scale-out.md)",
            )
        raise SchemaError(
            f"schema {self.schema!r} is not distributed with Citus (it was migrated on one "
            f"server, or with postgres_distribute='off'); run `actrone-pg migrate --distribute "
            f"--schema {self.schema}` on the coordinator (docs/scale-out.md, 'From one server')"
        )

    def _new_pool(self, dsn: str) -> AsyncConnectionPool[_Conn]:
        timeout_ms = max(1, int(self._statement_timeout * 1000))
        return AsyncConnectionPool(
            dsn,
            min_size=self._min_size,
            max_size=self._max_size,
            timeout=self._connect_timeout,
            # A lost server is retried in the background; calls fail fast meanwhile.
            reconnect_timeout=max(60.0, self._connect_timeout),
            kwargs={
                "autocommit": True,
                # Every connection's adapters start from this map (vector included): see
                # _vector_adapters.
                "context": self._adapters,
                "connect_timeout": max(1, math.ceil(self._connect_timeout)),
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
            sql.SQL("SET hnsw.ef_search = {}").format(sql.Literal(self._ann_ef_search))
        )
        await conn.execute("SET hnsw.iterative_scan = strict_order")

    async def _check_text_search_config(self) -> None:
        # The term statistics are only meaningful under the configuration that built them: the
        # first store to write a schema records it, and a store configured otherwise refuses.
        async with self._conn() as conn:
            if self._ts_config != "simple":
                cur = await conn.execute(
                    "SELECT count(*) FROM pg_ts_config WHERE cfgname = %s", (self._ts_config,)
                )
                row = await cur.fetchone()
                if not row or not row[0]:
                    raise ConfigurationError(
                        "postgres_text_search_config",
                        f"the server has no text search configuration {self._ts_config!r} "
                        "(see \\dF in psql)",
                    )
            await conn.execute(self._compose(RECORD_TS_CONFIG), (self._ts_config,))
            cur = await conn.execute(self._compose(SELECT_TS_CONFIG))
            row = await cur.fetchone()
        recorded = str(row[0]) if row else self._ts_config
        if recorded != self._ts_config:
            raise ConfigurationError(
                "postgres_text_search_config",
                f"schema {self.schema!r} holds term statistics built with {recorded!r}, not "
                f"{self._ts_config!r}; use {recorded!r}, or another postgres_schema",
            )

    async def _check_text_analyzer(self) -> None:
        # Like the configuration: term_freqs, doc_len and the statistics hold the analyzer's
        # terms, so the schema records it and a store configured otherwise refuses to write
        # (`actrone-pg reindex` rebuilds them). A schema written before analyzers were recorded
        # holds plain tokens: it is recorded as 'simple'.
        if self._ts_config != "simple":
            return
        async with self._conn() as conn:
            await conn.execute(self._compose(RECORD_ANALYZER), (self.analyzer.name,))
            cur = await conn.execute(self._compose(SELECT_ANALYZER))
            row = await cur.fetchone()
        recorded = str(row[0]) if row else self.analyzer.name
        if recorded != self.analyzer.name:
            raise analyzer_mismatch(f"schema {self.schema!r}", recorded, self.analyzer.name)

    def _prepare_schema(self, dsn: str) -> None:
        from actrone_pg import migrations

        head = migrations.head_revision()
        try:
            current = migrations.current_revision(
                dsn, self.schema, connect_timeout=self._connect_timeout
            )
        except psycopg.OperationalError as exc:
            raise StoreUnavailableError(redact(f"cannot connect to PostgreSQL: {exc}")) from None
        except psycopg.Error as exc:
            raise StoreError(redact(f"cannot read the schema version: {exc}")) from exc
        if current == head:
            return
        if current is not None and current not in migrations.known_revisions():
            raise SchemaError(
                f"schema {self.schema!r} is at revision {current}, which this version of "
                f"actrone_pg does not know (its newest is {head}): the database was migrated by "
                "a newer release; upgrade actrone-pg"
            )
        if self._auto_migrate:
            logger.info("migrating schema %s from %s to %s", self.schema, current, head)
            migrations.migrate(
                dsn, self.schema, text_search_config=self._ts_config, distribute=self._distribute
            )
            return
        state = "has never been migrated" if current is None else f"is at revision {current}"
        raise SchemaError(
            f"schema {self.schema!r} {state}, but this version of actrone_pg needs revision "
            f"{head}; run `actrone-pg migrate --schema {self.schema}` (or set "
            "postgres_auto_migrate=True)"
        )

    async def close(self) -> None:
        """Close the pool (the server stays up). Calling it twice is harmless."""
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()
        if self._retired:
            await asyncio.gather(*self._retired, return_exceptions=True)

    # -- plumbing --
    def _compose(self, text: str) -> sql.Composed:
        composed = self._sql.get(text)
        if composed is None:
            composed = sql.SQL(text).format(s=sql.Identifier(self.schema))
            self._sql[text] = composed
        return composed

    @asynccontextmanager
    async def _conn(self) -> AsyncIterator[_Conn]:
        # The bound: connect timeout to take a connection, connect + statement timeout for all.
        # A server that stops answering (frozen, or a network that drops packets) cannot enforce
        # its statement_timeout, and cancelling the task mid-statement makes psycopg send a
        # cancel request and wait for it (up to 10 s more against a frozen server). So at the
        # deadline the connection's socket is shut down instead (Severance): the statement
        # fails at once, and the pool replaces the connection. asyncio's cancellation stays as
        # a backstop only.
        if self._pool is None:
            raise StoreError("the store is not set up (call setup() first) or already closed")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._op_timeout
        severance: Severance | None = None
        try:
            async with asyncio.timeout_at(deadline + _CANCEL_GRACE):
                pool, conn = await self._checkout(loop.time() + self._connect_timeout)
                self._in_use += 1
                severance = Severance(conn, deadline)
                try:
                    yield conn
                    self._used_at[conn] = loop.time()
                except psycopg.Error as exc:
                    if self.distributed and not isinstance(exc, psycopg.OperationalError):
                        # Citus 13-14: after an error raised while planning, a session never
                        # delegates a function again (docs/scale-out.md). Closed, the connection
                        # is replaced by the pool instead of serving searches undelegated.
                        await conn.close()
                    raise
                finally:
                    severance.cancel()
                    self._in_use -= 1
                    await pool.putconn(conn)
        except PoolTimeout:
            self._server_lost = True
            raise StoreUnavailableError(
                f"no PostgreSQL connection within {self._connect_timeout} s "
                "(postgres_connect_timeout); the server may be down"
            ) from None
        except TimeoutError:
            raise StoreUnavailableError(
                f"PostgreSQL did not answer within {self._op_timeout} s"
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
                f"a statement ran longer than {self._statement_timeout} s "
                "(postgres_statement_timeout) and was cancelled"
            ) from None
        except psycopg.OperationalError as exc:
            self._server_lost = True
            if severance is not None and severance.fired:
                raise StoreUnavailableError(
                    f"PostgreSQL did not answer within {self._op_timeout:g} s "
                    "(postgres_connect_timeout + postgres_statement_timeout); the connection "
                    "was closed"
                ) from None
            raise StoreUnavailableError(redact(f"PostgreSQL connection failed: {exc}")) from None
        except psycopg.Error as exc:
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
            if self._server_lost:
                await self._recover(by)
            pool = self._pool
            if pool is None:
                raise StoreError("the store is not set up (call setup() first) or already closed")
            conn = await pool.getconn(timeout=max(0.0, by - loop.time()))
            used = self._used_at.pop(conn, None)
            if (
                used is not None
                and loop.time() - used < _CHECKED_RECENTLY
                and not self._server_lost
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
        assert self._dsn is not None
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout_at(by):
                async with self._recovery:
                    if not self._server_lost:
                        return  # another call recovered meanwhile
                    probe = await psycopg.AsyncConnection.connect(
                        self._dsn,
                        autocommit=True,
                        connect_timeout=max(1, math.ceil(by - loop.time())),
                    )
                    await probe.close()
                    self._server_lost = False
                    pool = self._pool
                    if (
                        pool is not None
                        and self._in_use == 0
                        and pool.get_stats().get("pool_available", 0) == 0
                    ):
                        await self._replace_pool(pool)
        except TimeoutError:
            raise StoreUnavailableError(
                f"PostgreSQL did not accept a connection within {self._connect_timeout} s "
                "(postgres_connect_timeout); the server may be down"
            ) from None
        except psycopg.OperationalError as exc:
            raise StoreUnavailableError(redact(f"PostgreSQL connection failed: {exc}")) from None

    async def _replace_pool(self, old: AsyncConnectionPool[_Conn]) -> None:
        assert self._dsn is not None
        pool = self._new_pool(self._dsn)
        await pool.open()  # connects in the background; a call waits for its connection
        self._pool = pool
        logger.warning(
            "PostgreSQL answers again; replaced the connection pool %s, whose reconnection "
            "attempts were backing off",
            old.name,
        )
        task = asyncio.ensure_future(old.close())
        self._retired.add(task)
        task.add_done_callback(self._retired.discard)

    async def _fetch(
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

    async def _check_fence(self, conn: _Conn, agent_id: str, fence: Fence | None) -> None:
        """In the caller's transaction: refuse the write unless ``fence``'s lock is held (and
        keep its row share-locked to the commit). The caller holds the agent's statistics row
        first, as erase_agent does, so an erase and a fenced write never interleave."""
        if fence is not None:
            cur = await conn.execute(
                self._compose(HOLDS_LOCK), (agent_id, fence.name, fence.holder)
            )
            if await cur.fetchone() is None:
                raise lock_lost(agent_id, fence)

    # -- text search: the lexemes of the configured text search configuration --
    async def _term_counts(self, conn: _Conn, text: str) -> tuple[Counter[str], int]:
        if self._ts_config == "simple":
            return self.analyzer.term_counts(text)
        lexemes = await self._normalise(conn, tokenize(text))
        kept = [lx for lx in lexemes if lx is not None]
        return Counter(kept), len(kept)

    async def _normalise(self, conn: _Conn, tokens: Sequence[str]) -> list[str | None]:
        """Each reference token's lexeme under the configured text search configuration."""
        known = self._lexemes
        missing = sorted({t for t in tokens if t not in known})
        if not missing:
            return [known[t] for t in tokens]
        found = rows.lexemes(await self._fetch(conn, NORMALISE, (self._ts_config, missing)))
        out = [found[t] if t in found else known[t] for t in tokens]
        if len(known) + len(found) > 200_000:  # bound the cache; it refills as needed
            known.clear()
        known.update(found)
        return out

    async def _query_terms(self, query: str, terms: Sequence[str]) -> list[str]:
        """``terms`` (the analyzer's, from the manager), or the query's plain tokens mapped
        through a non-'simple' text search configuration."""
        if self._ts_config == "simple":
            return list(terms)
        async with self._conn() as conn:
            lexemes = await self._normalise(conn, list(dict.fromkeys(tokenize(query))))
        return list(dict.fromkeys(lx for lx in lexemes if lx is not None))

    # -- the embedder registry: each embedder's dimension, fixed by its first write --
    def _check_known_dimensions(
        self, dims: dict[str, int], registry: dict[str, int] | None = None
    ) -> None:
        registry = self._dimensions if registry is None else registry
        for name, size in dims.items():
            known = registry.get(name)
            if known is not None and known != size:
                raise dimension_mismatch(name, known, size)

    async def _embedder_dimensions(self, name: str) -> int | None:
        known = self._dimensions.get(name)
        if known is not None:
            return known
        async with self._conn() as conn:
            found = rows.dimensions(
                await self._fetch(conn, self._compose(SELECT_EMBEDDERS), ([name],))
            )
        if name not in found:
            return None
        self._dimensions[name] = found[name]
        return found[name]
