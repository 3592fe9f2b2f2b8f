"""The PostgreSQL store: turns, memories, vectors, BM25 statistics and ranking in one database.

psycopg 3 with an async connection pool; pgvector for the vectors; the ranking is one SQL
function (``actrone_pg/sql/hybrid_search.sql``) installed by the Alembic migrations. Every
statement filters on ``agent_id`` first (tenant isolation, and the key a Citus or hash-partitioned
deployment distributes on).

**Candidate search.** A filtered HNSW scan returns a handful of the 500 candidates asked for when
the agent holds 10% of the rows, so the candidates come from an exact scan of the agent's vectors,
read by an index-only scan of the covering index ``ix_memories_candidates (agent_id, embedder)
INCLUDE (created_at, id, embedding)``: the index keeps each agent's vectors together whatever
order the heap rows arrived in. Measured with ``python benchmarks/pg_candidate_strategies.py``
(10 agents x 10,000 memories of 384 dimensions inserted interleaved, top 500 of 200 queries,
embedded PostgreSQL 18.6 + pgvector 0.8.6, this 2-core machine):

    strategy                                                    p50      p99      recall
    exact, heap in arrival order, btree (agent_id, embedder)    15.08 ms 16.75 ms  1.000
    exact, covering btree INCLUDE (embedding), index-only  <--   6.81 ms  7.84 ms  1.000
    exact, heap written agent by agent (as CLUSTER leaves it)    7.09 ms  8.52 ms  1.000
    halfvec covering index top 700, exact float rescore          8.31 ms  9.02 ms  1.000
    HNSW (m 16, ef_search 40) + agent filter (busier run)        2.75 ms 11.96 ms  0.008
    HNSW iterative_scan = relaxed_order, ef_search 200 (busier) 98.37 ms 190 ms    0.789

The covering index matches physically clustered rows without CLUSTER, is exact, and keeps
float32 precision (which parity with the reference ranking needs); see docs/postgres.md.

Statistics for BM25 (per-agent document count and total length, per-agent term document
frequencies) are updated in the same transaction as the memory writes, under a row lock on the
agent's statistics row, so concurrent writers of one agent serialise and never lose an update.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import re
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from actrone_pg.errors import (
    ActroneError,
    ConfigurationError,
    DimensionMismatchError,
    MissingDependencyError,
    SchemaError,
    StoreError,
    StoreUnavailableError,
)
from actrone_pg.models import Explain, Memory, ScoredMemory, SessionInfo, Turn
from actrone_pg.pipeline import explain
from actrone_pg.ranking import term_counts, tokenize
from actrone_pg.stores.base import (
    MemoryRecord,
    PackedSearch,
    SearchRequest,
    check_query_dimensions,
    dimension_mismatch,
)

try:
    import psycopg
    from pgvector.psycopg import register_vector_async
    from psycopg import sql
    from psycopg.rows import TupleRow
    from psycopg.types.json import Jsonb
    from psycopg_pool import AsyncConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("postgres", exc.name or "psycopg") from None

if TYPE_CHECKING:
    from actrone_pg.config import MemoryConfig

__all__ = ["PostgresStore", "from_config"]

logger = logging.getLogger("actrone_pg.postgres")

_Conn = psycopg.AsyncConnection[TupleRow]

# -- L1 statements ({s} is the schema, composed with sql.Identifier) --
DELETE_EXPIRED_SESSION = (
    "DELETE FROM {s}.sessions WHERE agent_id = %s AND session_id = %s"
    " AND last_active_at < now() - make_interval(secs => %s)"
)
UPSERT_SESSION = (
    "INSERT INTO {s}.sessions (agent_id, session_id, created_at, last_active_at, metadata)"
    " VALUES (%s, %s, now(), now(), %s)"
    " ON CONFLICT (agent_id, session_id) DO UPDATE"
    " SET last_active_at = now(), metadata = {s}.sessions.metadata || EXCLUDED.metadata"
)
INSERT_TURN = (
    "INSERT INTO {s}.turns (agent_id, session_id, id, user_message, assistant_message,"
    " tool_results, created_at, token_count) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
    " ON CONFLICT (agent_id, session_id, id) DO NOTHING"
)
TRIM_TURNS = (
    "DELETE FROM {s}.turns WHERE agent_id = %s AND session_id = %s AND seq <= ("
    "SELECT seq FROM {s}.turns WHERE agent_id = %s AND session_id = %s"
    " ORDER BY seq DESC OFFSET %s LIMIT 1)"
)
SELECT_RECENT_TURNS = (
    "SELECT t.id, t.user_message, t.assistant_message, t.tool_results, t.created_at,"
    " t.token_count FROM {s}.turns AS t JOIN {s}.sessions AS x"
    " ON x.agent_id = t.agent_id AND x.session_id = t.session_id"
    " WHERE x.agent_id = %s AND x.session_id = %s"
    " AND x.last_active_at >= now() - make_interval(secs => %s)"
    " ORDER BY t.seq DESC LIMIT %s"
)
SELECT_SESSION = (
    "SELECT x.created_at, x.last_active_at, x.metadata,"
    " (SELECT count(*) FROM {s}.turns AS t WHERE t.agent_id = x.agent_id"
    " AND t.session_id = x.session_id)"
    " FROM {s}.sessions AS x WHERE x.agent_id = %s AND x.session_id = %s"
    " AND x.last_active_at >= now() - make_interval(secs => %s)"
)
DELETE_SESSION = "DELETE FROM {s}.sessions WHERE agent_id = %s AND session_id = %s"
# A session a writer is reviving right now is locked: skipped, and re-checked if it was waited on.
SWEEP_SESSIONS = (
    "DELETE FROM {s}.sessions WHERE (agent_id, session_id) IN ("
    "SELECT x.agent_id, x.session_id FROM {s}.sessions AS x"
    " WHERE x.last_active_at < now() - make_interval(secs => %s)"
    " LIMIT %s FOR UPDATE SKIP LOCKED)"
)
# One atomic statement: insert, or take over a lapsed lock; a live lock (even our own) refuses.
ACQUIRE_LOCK = (
    "INSERT INTO {s}.locks AS l (agent_id, name, holder, expires_at)"
    " VALUES (%s, %s, %s, clock_timestamp() + make_interval(secs => %s))"
    " ON CONFLICT (agent_id, name) DO UPDATE"
    " SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at"
    " WHERE l.expires_at <= clock_timestamp() RETURNING 1"
)
RELEASE_LOCK = (
    "DELETE FROM {s}.locks WHERE agent_id = %s AND name = %s AND holder = %s"
    " AND expires_at > clock_timestamp() RETURNING 1"
)

# -- L2 statements --
REGISTER_EMBEDDERS = (
    "INSERT INTO {s}.embedders (name, dimensions)"
    " SELECT * FROM unnest(%s::text[], %s::int[]) ON CONFLICT (name) DO NOTHING"
)
SELECT_EMBEDDERS = "SELECT name, dimensions FROM {s}.embedders WHERE name = ANY(%s::text[])"
ANALYZE_L2 = "VACUUM (ANALYZE) {s}.memories, {s}.term_stats, {s}.agent_stats"
#: ANALYZE after this many memories written by one store, then after ×ANALYZE_GROWTH as many.
ANALYZE_FIRST = 1_000
ANALYZE_GROWTH = 4
#: Once at least SETTLE_MIN_ROWS memories have been written since the last maintenance and no
#: write has come for SETTLE_SECONDS, the store runs the same maintenance in the background.
SETTLE_SECONDS = 1.0
SETTLE_MIN_ROWS = 1_000
LOCK_AGENT_STATS = (
    "INSERT INTO {s}.agent_stats (agent_id, n_docs, total_length) VALUES (%s, 0, 0)"
    " ON CONFLICT (agent_id) DO UPDATE SET n_docs = {s}.agent_stats.n_docs"
)
DELETE_MEMORIES = (
    "DELETE FROM {s}.memories WHERE agent_id = %s AND id = ANY(%s::text[])"
    " RETURNING doc_len, ARRAY(SELECT jsonb_object_keys(term_freqs))"
)
COPY_MEMORIES = (
    "COPY {s}.memories (agent_id, id, session_id, content, content_type, importance, tags,"
    " source, sensitivity, created_at, metadata, embedder, token_count, doc_len, term_freqs,"
    " embedding) FROM STDIN (FORMAT BINARY)"
)
COPY_TYPES = [
    "text",
    "text",
    "text",
    "text",
    "text",
    "float8",
    "text[]",
    "text",
    "text",
    "timestamptz",
    "jsonb",
    "text",
    "int4",
    "int4",
    "jsonb",
    "vector",
]
UPDATE_TERM_STATS = (
    "INSERT INTO {s}.term_stats AS t (agent_id, term, df)"
    " SELECT %s, u.term, u.delta FROM unnest(%s::text[], %s::int[]) AS u(term, delta)"
    " ON CONFLICT (agent_id, term) DO UPDATE SET df = t.df + EXCLUDED.df"
)
PRUNE_TERM_STATS = "DELETE FROM {s}.term_stats WHERE agent_id = %s AND term = ANY(%s) AND df <= 0"
UPDATE_AGENT_STATS = (
    "UPDATE {s}.agent_stats SET n_docs = n_docs + %s, total_length = total_length + %s"
    " WHERE agent_id = %s RETURNING n_docs"
)
MEMORY_COLUMNS = (
    "m.id, m.session_id, m.content, m.content_type, m.importance, m.tags, m.source,"
    " m.sensitivity, m.created_at, m.metadata, m.embedder, m.token_count"
)
SELECT_MEMORY = (
    "SELECT " + MEMORY_COLUMNS + " FROM {s}.memories AS m WHERE m.agent_id = %s AND m.id = %s"
)
COUNT_MEMORIES = "SELECT count(*) FROM {s}.memories WHERE agent_id = %s"
# hybrid_search returns the ranked memories with their fields, best first. {candidates} is
# NULL (an exact scan) or, for an agent with its own HNSW index, the ids that index finds.
_HYBRID_SEARCH = (
    " FROM {s}.hybrid_search(%s, %s, %s::text[], %s, %s::float8, %s::int, %s::bool, %s::int,"
    " %s::float8[], %s::float8, %s::float8, %s::timestamptz, %s::bool, {candidates}) AS h"
)
_EXPLAIN_COLUMNS = "h.cosine, h.bm25, h.dense_rank, h.lexical_rank, h.recency_rank, h.fused_score"
SEARCH = (
    "SELECT " + _EXPLAIN_COLUMNS + ", h.id, h.session_id, h.content, h.content_type,"
    " h.importance, h.tags, h.source, h.sensitivity, h.created_at, h.metadata::text, h.embedder,"
    " h.token_count" + _HYBRID_SEARCH + " ORDER BY h.position"
)
# The same ranking without the memories' fields (p_content => false), packed into the budget
# by pack_positions() (the greedy packing of budget.pack_costs), then the rows of the few
# chosen: one statement, so one round trip and one snapshot. Always at least one row: the
# number ranked, with NULLs for the memory when none was chosen. retrieve_context 10.54 ->
# 9.74 ms p50 against the two statements in a REPEATABLE READ transaction it replaces (A/B in
# one process, 900 calls each in alternating order, 10 agents x 10,000, 48 of 500 chosen).
SEARCH_PACKED = (
    "WITH h AS MATERIALIZED (SELECT h.position, "
    + _EXPLAIN_COLUMNS
    + ", h.id, h.token_count"
    + _HYBRID_SEARCH
    + "), p AS MATERIALIZED (SELECT {s}.pack_positions(array_agg(h.token_count ORDER BY"
    " h.position), %s::bigint, %s::int) AS taken, count(*)::int AS ranked FROM h),"
    " c AS MATERIALIZED (SELECT h.* FROM h WHERE h.position = ANY ((SELECT p.taken FROM p)::int[]))"
    " SELECT p.ranked, c.cosine, c.bm25, c.dense_rank, c.lexical_rank, c.recency_rank,"
    " c.fused_score, c.id, c.token_count, f.*"
    # One primary-key probe per chosen memory (LATERAL, OFFSET 0 so that it stays a probe):
    # joined as sets, the planner either compared every pair (20 ms for 500 taken) or read
    # all of the agent's rows into a hash table (1.2 ms for 2,000, to keep 49).
    " FROM p LEFT JOIN (c CROSS JOIN LATERAL (SELECT "
    + MEMORY_COLUMNS.replace("m.metadata", "m.metadata::text")
    + " FROM {s}.memories AS m WHERE m.agent_id = %s AND m.id = c.id OFFSET 0) AS f) ON true"
    " ORDER BY c.position"
)

# -- large agents: an HNSW index of their own (docs/postgres.md, "Large agents") --
#: The largest vector an HNSW index on the vector type takes.
ANN_MAX_DIMENSIONS = 2000
#: Seconds a "this agent has no index" answer is trusted before the catalog is asked again
#: (another process may have built one meanwhile).
ANN_RECHECK_SECONDS = 60.0
#: Seconds before a failed build is tried again.
ANN_RETRY_SECONDS = 600.0
#: The index scan fetches this many more ids than the search admits; they are ranked exactly.
ANN_OVERFETCH = 1.2
#: maintenance_work_mem of the session that builds an index.
ANN_BUILD_MEMORY = "512MB"
ANN_INDEX_STATE = (
    "SELECT i.indisvalid FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid"
    " JOIN pg_namespace AS n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s"
)
# One build at a time per schema, across processes: two CREATE INDEX CONCURRENTLY on one table
# (or one and an ANALYZE) each wait for the other's transaction, which PostgreSQL breaks as a
# deadlock by cancelling one of them.
ANN_LOCK = "SELECT pg_try_advisory_lock(hashtextextended(%s, 0))"
ANN_UNLOCK = "SELECT pg_advisory_unlock(hashtextextended(%s, 0))"
VECTOR_SCHEMA = (
    "SELECT n.nspname FROM pg_extension AS e JOIN pg_namespace AS n ON n.oid = e.extnamespace"
    " WHERE e.extname = 'vector'"
)
SELECT_ALL_EMBEDDERS = "SELECT name FROM {s}.embedders"
NO_CANDIDATES = sql.SQL("NULL::text[]")
RECORD_TS_CONFIG = (
    "INSERT INTO {s}.settings (name, value) VALUES ('text_search_config', %s)"
    " ON CONFLICT (name) DO NOTHING"
)
SELECT_TS_CONFIG = "SELECT value FROM {s}.settings WHERE name = 'text_search_config'"
# One lexeme per reference token (the smallest if a dictionary yields several; none for a stop
# word). The configuration name is a bound value cast to regconfig, never spliced into the SQL.
NORMALISE = (
    "SELECT t.token, (SELECT min(u.lexeme) FROM unnest(to_tsvector(%s::regconfig, t.token)) AS u)"
    " FROM unnest(%s::text[]) AS t(token)"
)
ERASE = [
    "DELETE FROM {s}.memories WHERE agent_id = %s",
    "DELETE FROM {s}.term_stats WHERE agent_id = %s",
    "DELETE FROM {s}.agent_stats WHERE agent_id = %s",
    "DELETE FROM {s}.sessions WHERE agent_id = %s",
    "DELETE FROM {s}.locks WHERE agent_id = %s",
]


class PostgresStore:
    """A store in PostgreSQL with pgvector (see the module docstring for the design).

    ``dsn`` is a libpq connection string or URI; ``None`` starts the embedded server in
    ``data_dir`` (the ``[embedded]`` extra). :meth:`setup` connects, and migrates the schema when
    ``auto_migrate`` is true; otherwise a schema that is behind raises :class:`SchemaError`.
    """

    backend = "postgres"

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
        ann_min_memories: int = 50_000,
        ann_ef_search: int = 800,
    ) -> None:
        from actrone_pg.migrations import validate_schema

        self.schema = validate_schema(schema)
        if not re.match(r"^[a-z_][a-z0-9_]*$", text_search_config):
            raise ConfigurationError(
                "postgres_text_search_config", f"{text_search_config!r} is not a plain identifier"
            )
        self._ts_config = text_search_config
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
        self._dimensions: dict[str, int] = {}
        self._sql: dict[str, sql.Composed] = {}
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
        self._ann_ef_search = ann_ef_search
        self._ann_known: dict[tuple[str, str], tuple[bool, float]] = {}
        self._ann_builds: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._ann_failed: dict[tuple[str, str], float] = {}
        self._vector_schema = "public"
        # Index builds and ANALYZE take turns (see ANN_LOCK); an ANALYZE due while a build runs
        # is run by the build when it is done, so that writers never wait for a build.
        self._maintenance = asyncio.Lock()
        self._analyze_pending = False

    @classmethod
    def from_config(cls, config: MemoryConfig) -> PostgresStore:
        """A store built from a :class:`~actrone_pg.config.MemoryConfig` (not yet connected)."""
        return cls(
            config.postgres_dsn,
            schema=config.postgres_schema,
            auto_migrate=config.postgres_auto_migrate,
            data_dir=config.postgres_data_dir,
            pool_min_size=config.postgres_pool_min_size,
            pool_max_size=config.postgres_pool_max_size,
            connect_timeout=config.postgres_connect_timeout,
            statement_timeout=config.postgres_statement_timeout,
            text_search_config=config.postgres_text_search_config,
            ann_min_memories=config.postgres_ann_min_memories,
            ann_ef_search=config.postgres_ann_ef_search,
        )

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
        timeout_ms = max(1, int(self._statement_timeout * 1000))
        pool: AsyncConnectionPool[_Conn] = AsyncConnectionPool(
            self._dsn,
            min_size=self._min_size,
            max_size=self._max_size,
            timeout=self._connect_timeout,
            # A lost server is retried in the background; calls fail fast meanwhile.
            reconnect_timeout=max(60.0, self._connect_timeout),
            kwargs={
                "autocommit": True,
                "connect_timeout": max(1, math.ceil(self._connect_timeout)),
                # JIT compilation costs tens of milliseconds and never pays off here.
                # UTC: timestamps come back in the time zone the library uses.
                "options": f"-c statement_timeout={timeout_ms} -c jit=off -c TimeZone=UTC",
            },
            configure=self._configure,
            check=AsyncConnectionPool.check_connection,
            open=False,
            name=f"actrone-{self.schema}",
        )
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
            async with self._conn() as conn:
                cur = await conn.execute(VECTOR_SCHEMA)
                row = await cur.fetchone()
            self._vector_schema = str(row[0]) if row else "public"
        except BaseException:
            await self.close()
            raise

    async def _configure(self, conn: _Conn) -> None:
        # Once per pooled connection: teach psycopg the vector type (binary, numpy in and out),
        # and set how the HNSW index of a large agent is scanned (strict_order: iterate until
        # the LIMIT is met, in exact distance order; only those indexes are ever scanned).
        await register_vector_async(conn)
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
            await conn.execute(self._q(RECORD_TS_CONFIG), (self._ts_config,))
            cur = await conn.execute(self._q(SELECT_TS_CONFIG))
            row = await cur.fetchone()
        recorded = str(row[0]) if row else self._ts_config
        if recorded != self._ts_config:
            raise ConfigurationError(
                "postgres_text_search_config",
                f"schema {self.schema!r} holds term statistics built with {recorded!r}, not "
                f"{self._ts_config!r}; use {recorded!r}, or another postgres_schema",
            )

    def _prepare_schema(self, dsn: str) -> None:
        from actrone_pg import migrations

        head = migrations.head_revision()
        try:
            current = migrations.current_revision(
                dsn, self.schema, connect_timeout=self._connect_timeout
            )
        except psycopg.OperationalError as exc:
            raise StoreUnavailableError(f"cannot connect to PostgreSQL: {exc}") from None
        except psycopg.Error as exc:
            raise StoreError(f"cannot read the schema version: {exc}") from exc
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
            migrations.migrate(dsn, self.schema)
            return
        state = "has never been migrated" if current is None else f"is at revision {current}"
        raise SchemaError(
            f"schema {self.schema!r} {state}, but this version of actrone_pg needs revision "
            f"{head}; run `actrone-pg migrate --schema {self.schema}` (or set "
            "postgres_auto_migrate=True)"
        )

    async def close(self) -> None:
        """Stop background maintenance and index builds; close the pool (the server stays up)."""
        if self._settle_task is not None:
            self._settle_task.cancel()
            await asyncio.gather(self._settle_task, return_exceptions=True)
            self._settle_task = None
        builds = [t for t in self._ann_builds.values() if not t.done()]
        for task in builds:
            task.cancel()  # an interrupted build leaves an invalid index; the next one drops it
        await asyncio.gather(*builds, return_exceptions=True)
        self._ann_builds.clear()
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    # -- plumbing --
    def _q(self, text: str) -> sql.Composed:
        composed = self._sql.get(text)
        if composed is None:
            composed = sql.SQL(text).format(s=sql.Identifier(self.schema))
            self._sql[text] = composed
        return composed

    @asynccontextmanager
    async def _conn(self) -> AsyncIterator[_Conn]:
        if self._pool is None:
            raise StoreError("the store is not set up (call setup() first) or already closed")
        try:
            async with asyncio.timeout(self._op_timeout):
                async with self._pool.connection() as conn:
                    yield conn
        except PoolTimeout:
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
            raise StoreUnavailableError(f"PostgreSQL connection failed: {exc}") from None
        except psycopg.Error as exc:
            raise StoreError(f"PostgreSQL error: {exc}") from exc

    # -- L1 --
    async def append_turn(self, turn: Turn, *, max_turns: int, ttl_seconds: float) -> None:
        """Append a turn (idempotent by id), trim to ``max_turns``, refresh the expiry."""
        a, s = turn.agent_id, turn.session_id
        tool = Jsonb(turn.tool_results) if turn.tool_results is not None else None
        async with self._conn() as conn, conn.transaction():
            await conn.execute(self._q(DELETE_EXPIRED_SESSION), (a, s, ttl_seconds))
            await conn.execute(self._q(UPSERT_SESSION), (a, s, Jsonb({})))
            await conn.execute(
                self._q(INSERT_TURN),
                (
                    a,
                    s,
                    turn.id,
                    turn.user_message,
                    turn.assistant_message,
                    tool,
                    turn.created_at,
                    turn.token_count,
                ),
            )
            await conn.execute(self._q(TRIM_TURNS), (a, s, a, s, max_turns))

    async def recent_turns(
        self, agent_id: str, session_id: str, *, limit: int, ttl_seconds: float
    ) -> list[Turn]:
        """The newest ``limit`` turns of a live session, oldest first."""
        async with self._conn() as conn:
            cur = await conn.execute(
                self._q(SELECT_RECENT_TURNS), (agent_id, session_id, ttl_seconds, limit)
            )
            rows = await cur.fetchall()
        return _turns(agent_id, session_id, rows)

    async def get_session(
        self, agent_id: str, session_id: str, *, ttl_seconds: float
    ) -> SessionInfo | None:
        """The live session's bookkeeping, or ``None``."""
        async with self._conn() as conn:
            cur = await conn.execute(self._q(SELECT_SESSION), (agent_id, session_id, ttl_seconds))
            row = await cur.fetchone()
        if row is None:
            return None
        return SessionInfo(
            agent_id=agent_id,
            session_id=session_id,
            turn_count=int(row[3]),
            created_at=row[0].astimezone(UTC),
            last_active_at=row[1].astimezone(UTC),
            metadata=dict(row[2]),
        )

    async def set_session_metadata(
        self, agent_id: str, session_id: str, metadata: dict[str, Any], *, ttl_seconds: float
    ) -> None:
        """Merge ``metadata`` into the session's (creating or restarting the session)."""
        async with self._conn() as conn, conn.transaction():
            await conn.execute(self._q(DELETE_EXPIRED_SESSION), (agent_id, session_id, ttl_seconds))
            await conn.execute(self._q(UPSERT_SESSION), (agent_id, session_id, Jsonb(metadata)))

    async def clear_session(self, agent_id: str, session_id: str) -> None:
        """Remove the session and (by cascade) its turns."""
        async with self._conn() as conn:
            await conn.execute(self._q(DELETE_SESSION), (agent_id, session_id))

    async def sweep_expired_sessions(self, *, ttl_seconds: float, limit: int) -> int:
        """Delete up to ``limit`` expired sessions; their turns go by cascade."""
        async with self._conn() as conn:
            cur = await conn.execute(self._q(SWEEP_SESSIONS), (ttl_seconds, limit))
            return max(cur.rowcount, 0)

    async def acquire_lock(self, agent_id: str, name: str, holder: str, ttl_seconds: float) -> bool:
        """Take the lock in one atomic statement, timed by the server's clock."""
        async with self._conn() as conn:
            cur = await conn.execute(self._q(ACQUIRE_LOCK), (agent_id, name, holder, ttl_seconds))
            return await cur.fetchone() is not None

    async def release_lock(self, agent_id: str, name: str, holder: str) -> bool:
        """Release the lock if ``holder`` holds a live one."""
        async with self._conn() as conn:
            cur = await conn.execute(self._q(RELEASE_LOCK), (agent_id, name, holder))
            return await cur.fetchone() is not None

    # -- L2 --
    async def upsert_memories(self, records: Sequence[MemoryRecord]) -> None:
        """Insert or replace memories and their BM25 statistics in one transaction.

        Rows go in through binary COPY; statistics are updated under a lock on each agent's
        statistics row (agents locked in sorted order, so concurrent batches cannot deadlock).
        """
        if not records:
            return
        dims: dict[str, int] = {}
        for rec in records:
            name, size = rec.memory.embedder, int(rec.vector.shape[0])
            if dims.setdefault(name, size) != size:
                raise DimensionMismatchError(
                    f"embedder {name!r}: one batch holds vectors of {dims[name]} and {size} "
                    "dimensions"
                )
        self._check_known_dimensions(dims)
        by_agent: dict[str, list[MemoryRecord]] = defaultdict(list)
        for rec in records:
            by_agent[rec.memory.agent_id].append(rec)
        stored: dict[str, int] = {}
        sizes: dict[str, int] = {}
        async with self._conn() as conn, conn.transaction():
            names = sorted(n for n in dims if n not in self._dimensions)
            if names:
                # Registry rows never change once committed, so known ones need no round trip.
                await conn.execute(self._q(REGISTER_EMBEDDERS), (names, [dims[n] for n in names]))
                cur = await conn.execute(self._q(SELECT_EMBEDDERS), (names,))
                stored = {str(r[0]): int(r[1]) for r in await cur.fetchall()}
                self._check_known_dimensions(dims, stored)
            for agent_id in sorted(by_agent):
                sizes[agent_id] = await self._write_agent(conn, agent_id, by_agent[agent_id])
        # Cached only once committed: a rolled-back registration must not be remembered.
        self._dimensions.update(stored)
        if self._ann_min > 0:
            for agent_id, size in sizes.items():
                if size >= self._ann_min:
                    for name in {r.memory.embedder for r in by_agent[agent_id]}:
                        self._start_ann_build(agent_id, name, dims[name])
        self._written += len(records)
        self._unmaintained += len(records)
        self._last_write = time.monotonic()
        if self._written >= self._next_analyze:
            self._next_analyze = self._written * ANALYZE_GROWTH
            await self._analyze()
        elif self._unmaintained >= SETTLE_MIN_ROWS and (
            self._settle_task is None or self._settle_task.done()
        ):
            self._settle_task = asyncio.create_task(self._settle(), name="actrone-settle")

    async def _analyze(self) -> None:
        """Refresh the planner's statistics of the L2 tables, and their visibility maps.

        Right after a bulk load into fresh tables the planner has no statistics and expects one
        row from every step. ``hybrid_search`` itself is protected from that since migration 0005
        (it plans without nested loops: 248 ms → 5.9 ms p50 at 1 agent × 500 memories, ``actrone-pg
        bench``); this keeps every other statement's estimates current too, without waiting
        about a minute for autovacuum: ``ANALYZE`` runs after the store has written 1,000, 4,000,
        16,000, … memories (each step ×4, so the total cost stays a small fraction of the
        writes). It is ``VACUUM (ANALYZE)``: until a page is marked all-visible, the index-only
        candidate scan visits the heap for each of its rows; right after loading 2 agents ×
        10,000 memories a search took 22.8 ms, 14.5 ms once vacuumed (autovacuum gets there
        within a minute or so). Neither takes a lock that blocks reads or writes.
        """
        if any(not t.done() for t in self._ann_builds.values()):
            self._analyze_pending = True
            return
        async with self._maintenance:
            await self._vacuum_analyze()

    async def _vacuum_analyze(self) -> None:
        """``VACUUM (ANALYZE)`` the L2 tables; the caller holds ``_maintenance``."""
        unmaintained = self._unmaintained
        async with self._conn() as conn:
            await conn.execute(self._q(ANALYZE_L2))
        self._unmaintained -= unmaintained

    async def _settle(self) -> None:
        """Run the maintenance of :meth:`_analyze` once writes have paused.

        The ×4 schedule leaves up to three quarters of a bulk load unvacuumed (100,000 written:
        the last run was at 64,000), so index-only scans visit the heap for those rows until
        autovacuum gets there, and when it does, its throttled pass over the tables competes
        with the searches for a while. Run once no memory has been written for
        ``SETTLE_SECONDS``, the same ``VACUUM (ANALYZE)`` takes about 0.3 s for the last
        36,000 of 100,000 memories and leaves autovacuum nothing to catch up on:
        ``actrone-pg bench`` (searches start right after the load) went from 10.7-11.0 ms p50,
        19.7-20.7 ms p99 for ``retrieve_context`` (three runs) to 9.7-10.2 / 12.6-14.7 ms (two).
        """
        try:
            while (wait := self._last_write + self._settle_seconds - time.monotonic()) > 0:
                await asyncio.sleep(wait)
            if self._unmaintained >= SETTLE_MIN_ROWS and self._pool is not None:
                await self._analyze()
        except ActroneError as exc:  # a background task: nobody else would see it
            logger.warning("maintenance after writes failed (autovacuum will do it): %s", exc)

    # -- large agents --
    def _start_ann_build(self, agent_id: str, embedder: str, dimensions: int) -> None:
        """Build the agent's HNSW index in the background, unless it exists or is being built."""
        key = (agent_id, embedder)
        known = self._ann_known.get(key)
        running = self._ann_builds.get(key)
        failed = self._ann_failed.get(key)
        if (
            dimensions > ANN_MAX_DIMENSIONS
            or (known is not None and known[0])
            or (running is not None and not running.done())
            or (failed is not None and time.monotonic() - failed < ANN_RETRY_SECONDS)
        ):
            return
        self._ann_builds[key] = asyncio.create_task(
            self._build_ann(agent_id, embedder, dimensions), name=f"actrone-ann-{agent_id}"
        )

    async def wait_for_indexes(self) -> None:
        """Wait until the HNSW index builds started by this store have finished."""
        await asyncio.gather(*list(self._ann_builds.values()), return_exceptions=True)

    async def _build_ann(self, agent_id: str, embedder: str, dimensions: int) -> None:
        try:
            async with self._maintenance:
                await self._build_ann_locked(agent_id, embedder, dimensions)
                if self._analyze_pending and self._pool is not None:
                    self._analyze_pending = False
                    await self._vacuum_analyze()
        finally:
            key = (agent_id, embedder)
            if self._ann_builds.get(key) is asyncio.current_task():
                del self._ann_builds[key]

    async def _build_ann_locked(self, agent_id: str, embedder: str, dimensions: int) -> None:
        key = (agent_id, embedder)
        name = ann_index_name(agent_id, embedder)
        lock = f"{self.schema}.ann-build"
        if self._pool is None:
            return
        try:
            # Not through _conn(): a build takes minutes, longer than any call's timeout.
            async with self._pool.connection() as conn:
                await conn.execute("SET statement_timeout = 0")
                # The graph of 100,000 vectors of 384 dimensions takes ~200 MB; with the default
                # 64 MB the build spills and took 107 s instead of 20 s (benchmarks/
                # pg_ann_large_agent.py, docs/postgres.md).
                await conn.execute(f"SET maintenance_work_mem = '{ANN_BUILD_MEMORY}'")
                try:
                    cur = await conn.execute(ANN_LOCK, (lock,))
                    row = await cur.fetchone()
                    if not row or not row[0]:
                        return  # another process is building one; the next write tries again
                    try:
                        state = await self._ann_state(conn, name)
                        if state is False:  # an interrupted build left an invalid index
                            await conn.execute(
                                sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(
                                    sql.Identifier(self.schema, name)
                                )
                            )
                        if state is not True:
                            started = time.monotonic()
                            await conn.execute(self._ann_ddl(name, agent_id, embedder, dimensions))
                            logger.info(
                                "built HNSW index %s for agent %r (%s) in %.1f s",
                                name,
                                agent_id,
                                embedder,
                                time.monotonic() - started,
                            )
                    finally:
                        await conn.execute(ANN_UNLOCK, (lock,))
                finally:
                    await conn.execute("RESET statement_timeout")
                    await conn.execute("RESET maintenance_work_mem")
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the server's refusal, a lost connection, a pool timeout
            self._ann_failed[key] = time.monotonic()
            logger.warning(
                "could not build the HNSW index of agent %r (%s): %s; searches stay exact",
                agent_id,
                embedder,
                exc,
            )
            return
        self._ann_known[key] = (True, time.monotonic())

    async def _ann_state(self, conn: _Conn, name: str) -> bool | None:
        """``True`` for a valid index named ``name``, ``False`` for an invalid one, else None."""
        cur = await conn.execute(ANN_INDEX_STATE, (self.schema, name))
        row = await cur.fetchone()
        return None if row is None else bool(row[0])

    def _ann_ddl(self, name: str, agent_id: str, embedder: str, dimensions: int) -> sql.Composed:
        return sql.SQL(
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {s}.memories USING hnsw"
            " ((embedding::{vs}.vector({d})) {vs}.vector_ip_ops)"
            " WITH (m = 16, ef_construction = 64) WHERE agent_id = {agent} AND embedder = {emb}"
        ).format(
            name=sql.Identifier(name),
            s=sql.Identifier(self.schema),
            vs=sql.Identifier(self._vector_schema),
            d=sql.Literal(int(dimensions)),
            agent=sql.Literal(agent_id),
            emb=sql.Literal(embedder),
        )

    async def _ann_dimensions(self, agent_id: str, embedder: str, dimensions: int) -> int | None:
        """The dimension to scan the agent's own HNSW index with, or ``None`` to scan exactly."""
        if self._ann_min <= 0 or dimensions > ANN_MAX_DIMENSIONS:
            return None
        key = (agent_id, embedder)
        known = self._ann_known.get(key)
        now = time.monotonic()
        if known is None or (not known[0] and now - known[1] > ANN_RECHECK_SECONDS):
            async with self._conn() as conn:
                state = await self._ann_state(conn, ann_index_name(agent_id, embedder))
            known = (state is True, now)
            if len(self._ann_known) >= 100_000:  # one entry per agent searched: bound it
                self._ann_known.clear()
            self._ann_known[key] = known
        return dimensions if known[0] else None

    def _candidates(
        self, agent_id: str, embedder: str, dimensions: int | None, limit: int
    ) -> sql.Composable:
        """``hybrid_search``'s ``p_candidates``: NULL, or the agent's HNSW index scan.

        The index is partial on the agent and embedder, so they are spelled as literals for the
        planner to match its predicate; the query vector is the statement's last parameter.
        """
        if dimensions is None:
            return NO_CANDIDATES
        return sql.SQL(
            "ARRAY(SELECT a.id FROM {s}.memories AS a"
            " WHERE a.agent_id = {agent} AND a.embedder = {emb}"
            " ORDER BY (a.embedding::{vs}.vector({d})) OPERATOR({vs}.<#>) %s::{vs}.vector({d})"
            " LIMIT {k})"
        ).format(
            s=sql.Identifier(self.schema),
            agent=sql.Literal(agent_id),
            emb=sql.Literal(embedder),
            vs=sql.Identifier(self._vector_schema),
            d=sql.Literal(int(dimensions)),
            k=sql.Literal(math.ceil(limit * ANN_OVERFETCH)),
        )

    def _check_known_dimensions(
        self, dims: dict[str, int], registry: dict[str, int] | None = None
    ) -> None:
        registry = self._dimensions if registry is None else registry
        for name, size in dims.items():
            known = registry.get(name)
            if known is not None and known != size:
                raise dimension_mismatch(name, known, size)

    async def _write_agent(self, conn: _Conn, agent_id: str, recs: list[MemoryRecord]) -> int:
        """Write one agent's batch and its statistics; returns the agent's memory count."""
        await conn.execute(self._q(LOCK_AGENT_STATS), (agent_id,))
        ids = [r.memory.id for r in recs]
        cur = await conn.execute(self._q(DELETE_MEMORIES), (agent_id, ids))
        df: Counter[str] = Counter()
        n_delta = 0
        len_delta = 0
        for doc_len, keys in await cur.fetchall():
            n_delta -= 1
            len_delta -= int(doc_len)
            df.subtract(keys)
        rows = []
        for rec in recs:
            m = rec.memory
            tf, length = await self._term_counts(conn, m.content)
            n_delta += 1
            len_delta += length
            df.update(tf.keys())
            rows.append(
                (
                    agent_id,
                    m.id,
                    m.session_id,
                    m.content,
                    m.content_type,
                    float(m.importance),
                    list(m.tags),
                    m.source,
                    m.sensitivity,
                    m.created_at,
                    Jsonb(m.metadata),
                    m.embedder,
                    m.token_count,
                    length,
                    Jsonb(dict(tf)),
                    rec.vector,
                )
            )
        async with conn.cursor().copy(self._q(COPY_MEMORIES)) as copy:
            copy.set_types(COPY_TYPES)
            for row in rows:
                await copy.write_row(row)
        changed = {t: d for t, d in df.items() if d != 0}
        if changed:
            terms = list(changed)
            await conn.execute(
                self._q(UPDATE_TERM_STATS), (agent_id, terms, [changed[t] for t in terms])
            )
            removed = [t for t, d in changed.items() if d < 0]
            if removed:
                await conn.execute(self._q(PRUNE_TERM_STATS), (agent_id, removed))
        cur = await conn.execute(self._q(UPDATE_AGENT_STATS), (n_delta, len_delta, agent_id))
        stats = await cur.fetchone()
        return int(stats[0]) if stats else 0

    async def _term_counts(self, conn: _Conn, text: str) -> tuple[Counter[str], int]:
        if self._ts_config == "simple":
            return term_counts(text)
        lexemes = await self._normalise(conn, tokenize(text))
        kept = [lx for lx in lexemes if lx is not None]
        return Counter(kept), len(kept)

    async def _normalise(self, conn: _Conn, tokens: Sequence[str]) -> list[str | None]:
        """Each reference token's lexeme under the configured text search configuration."""
        known = self._lexemes
        missing = sorted({t for t in tokens if t not in known})
        if not missing:
            return [known[t] for t in tokens]
        cur = await conn.execute(NORMALISE, (self._ts_config, missing))
        found: dict[str, str | None] = {str(r[0]): r[1] for r in await cur.fetchall()}
        out = [found[t] if t in found else known[t] for t in tokens]
        if len(known) + len(found) > 200_000:  # bound the cache; it refills as needed
            known.clear()
        known.update(found)
        return out

    async def _query_terms(self, terms: Sequence[str]) -> list[str]:
        if self._ts_config == "simple":
            return list(terms)
        async with self._conn() as conn:
            lexemes = await self._normalise(conn, terms)
        return list(dict.fromkeys(lx for lx in lexemes if lx is not None))

    async def get_memory(self, agent_id: str, memory_id: str) -> Memory | None:
        """One memory of the agent, or ``None``."""
        async with self._conn() as conn:
            cur = await conn.execute(self._q(SELECT_MEMORY), (agent_id, memory_id))
            row = await cur.fetchone()
        return None if row is None else _memory(agent_id, row)

    async def delete_memory(self, agent_id: str, memory_id: str) -> bool:
        """Delete one memory of the agent and take it out of the BM25 statistics."""
        async with self._conn() as conn, conn.transaction():
            await conn.execute(self._q(LOCK_AGENT_STATS), (agent_id,))
            cur = await conn.execute(self._q(DELETE_MEMORIES), (agent_id, [memory_id]))
            row = await cur.fetchone()
            if row is None:
                return False
            doc_len, keys = row
            if keys:
                await conn.execute(
                    self._q(UPDATE_TERM_STATS), (agent_id, list(keys), [-1] * len(keys))
                )
                await conn.execute(self._q(PRUNE_TERM_STATS), (agent_id, list(keys)))
            await conn.execute(self._q(UPDATE_AGENT_STATS), (-1, -int(doc_len), agent_id))
            return True

    async def count_memories(self, agent_id: str) -> int:
        """How many memories the agent has."""
        async with self._conn() as conn:
            cur = await conn.execute(self._q(COUNT_MEMORIES), (agent_id,))
            row = await cur.fetchone()
        return int(row[0]) if row else 0

    async def erase_agent(self, agent_id: str) -> None:
        """Delete every row of the agent in every table, in one transaction."""
        async with self._conn() as conn, conn.transaction():
            # Take the agent's statistics lock first, as writers do: a batch being written now
            # commits before the deletes start, and each delete (a new snapshot under READ
            # COMMITTED) then sees its rows, so no memory outlives its statistics.
            await conn.execute(self._q(LOCK_AGENT_STATS), (agent_id,))
            for statement in ERASE:
                await conn.execute(self._q(statement), (agent_id,))
        await self._drop_ann_indexes(agent_id)

    async def _drop_ann_indexes(self, agent_id: str) -> None:
        """Drop the agent's HNSW indexes, whatever process built them."""
        stopped = [self._ann_builds.pop(k) for k in list(self._ann_builds) if k[0] == agent_id]
        for task in stopped:
            task.cancel()
        await asyncio.gather(*stopped, return_exceptions=True)  # its index is dropped below
        async with self._conn() as conn:
            cur = await conn.execute(self._q(SELECT_ALL_EMBEDDERS))
            embedders = [str(r[0]) for r in await cur.fetchall()]
            for embedder in embedders:
                self._ann_known.pop((agent_id, embedder), None)
                name = ann_index_name(agent_id, embedder)
                if await self._ann_state(conn, name) is not None:
                    await conn.execute(
                        sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(
                            sql.Identifier(self.schema, name)
                        )
                    )

    async def search(self, request: SearchRequest) -> PackedSearch:
        """Run ``hybrid_search()`` for the agent: every ranked row, or only the rows that fit.

        Without a budget or a hit limit, ``SEARCH`` returns every ranked memory. Otherwise
        ``SEARCH_PACKED`` ranks without the memories' fields, chooses in SQL
        (``pack_positions``) and reads only the rows chosen, in one statement: the rows read are
        the ones ranked, in one snapshot, even while other sessions write.
        """
        packed = request.budget is not None or request.max_hits is not None
        found = await self._search_params(request, content=not packed)
        if found is None:
            return PackedSearch(hits=[], ranked=0, tokens=0)
        candidates, params = found
        async with self._conn() as conn:
            # Binary results: 500 rows parse in ~0.3 ms instead of ~5 ms (cProfile, same bench).
            if packed:
                cur = await conn.execute(
                    self._search_sql(SEARCH_PACKED, candidates),
                    (*params, request.budget, request.max_hits, request.agent_id),
                    binary=True,
                )
                return _packed(request.agent_id, await cur.fetchall())
            cur = await conn.execute(self._search_sql(SEARCH, candidates), params, binary=True)
            rows = await cur.fetchall()
        hits = [_hit(request.agent_id, r, r[6:]) for r in rows]
        tokens = sum(h.memory.token_count for h in hits)
        return PackedSearch(hits=hits, ranked=len(hits), tokens=tokens)

    async def _search_params(
        self, request: SearchRequest, *, content: bool
    ) -> tuple[sql.Composable, tuple[Any, ...]] | None:
        """``p_candidates`` and the other arguments, or ``None`` if the embedder stored nothing."""
        expected = await self._embedder_dimensions(request.embedder)
        if expected is None:
            return None
        check_query_dimensions(request.embedder, expected, request.vector)
        ann = await self._ann_dimensions(request.agent_id, request.embedder, expected)
        candidates = self._candidates(request.agent_id, request.embedder, ann, request.limit)
        p = request.params
        params = (
            request.agent_id,
            request.embedder,
            await self._query_terms(request.terms),
            request.vector,
            float(request.threshold),
            int(request.limit),
            p.hybrid,
            int(p.rrf_k),
            [float(w) for w in p.rrf_weights],
            float(p.relevance_weight),
            float(p.recency_weight),
            request.now,
            content,
        )
        return candidates, params if ann is None else (*params, request.vector)

    def _search_sql(self, text: str, candidates: sql.Composable) -> sql.Composed:
        if candidates is NO_CANDIDATES:  # the usual statement, composed once
            composed = self._sql.get(text)
            if composed is None:
                schema = sql.Identifier(self.schema)
                composed = sql.SQL(text).format(s=schema, candidates=candidates)
                self._sql[text] = composed
            return composed
        return sql.SQL(text).format(s=sql.Identifier(self.schema), candidates=candidates)

    async def _embedder_dimensions(self, name: str) -> int | None:
        known = self._dimensions.get(name)
        if known is not None:
            return known
        async with self._conn() as conn:
            cur = await conn.execute(self._q(SELECT_EMBEDDERS), ([name],))
            row = await cur.fetchone()
        if row is None:
            return None
        self._dimensions[name] = int(row[1])
        return int(row[1])


def ann_index_name(agent_id: str, embedder: str) -> str:
    """The name of an agent's HNSW index for one embedder (any ids give a valid identifier)."""
    digest = hashlib.sha256(f"{agent_id}\x00{embedder}".encode()).hexdigest()
    return f"ix_ann_{digest[:24]}"


def _turns(agent_id: str, session_id: str, rows: Sequence[Sequence[Any]]) -> list[Turn]:
    """SELECT_RECENT_TURNS' rows (newest first) as turns, oldest first."""
    return [
        Turn(
            id=r[0],
            agent_id=agent_id,
            session_id=session_id,
            user_message=r[1],
            assistant_message=r[2],
            tool_results=r[3],
            created_at=r[4].astimezone(UTC),
            token_count=r[5],
        )
        for r in reversed(rows)
    ]


def _packed(agent_id: str, rows: Sequence[Sequence[Any]]) -> PackedSearch:
    """SEARCH_PACKED's rows: (ranked, the six explain columns, id, token_count, MEMORY_COLUMNS)."""
    hits = [_hit(agent_id, r[1:], r[9:]) for r in rows if r[7] is not None]
    return PackedSearch(
        hits=hits, ranked=rows[0][0], tokens=sum(h.memory.token_count for h in hits)
    )


def _hit(agent_id: str, ranked: Sequence[Any], fields: Sequence[Any]) -> ScoredMemory:
    """A hit from a ranked row and the memory's fields (MEMORY_COLUMNS' order).

    The ranked row is one of SEARCH, or of SEARCH_PACKED without its first column.
    """
    explain = _explain(ranked)
    return ScoredMemory(memory=_memory(agent_id, fields, explain), explain=explain)


def _explain(r: Sequence[Any]) -> Explain:
    # The first six columns of SEARCH (after the first, of SEARCH_PACKED).
    return explain(float(r[0]), r[1], r[2], r[3], r[4], float(r[5]))


def _memory(agent_id: str, r: Sequence[Any], explain: Explain | None = None) -> Memory:
    created: datetime = r[8]
    return Memory(
        id=r[0],
        agent_id=agent_id,
        session_id=r[1],
        content=r[2],
        content_type=r[3],
        importance=float(r[4]),
        tags=tuple(r[5]),
        source=r[6],
        sensitivity=r[7],
        created_at=created.astimezone(UTC),
        metadata=_metadata(r[9]),
        embedder=r[10],
        token_count=int(r[11]),
        explain=explain,
    )


def _metadata(value: Any) -> dict[str, Any]:
    # Search reads metadata as text: most memories have none, and skipping the JSON decoder for
    # '{}' saves about 4 ms per 500-row search (cProfile of benchmarks/pg_store_latency.py).
    if isinstance(value, str):
        return {} if value == "{}" else dict(json.loads(value))
    return dict(value)


def from_config(config: MemoryConfig) -> PostgresStore:
    """Factory used by :func:`actrone_pg.stores.create_store`."""
    return PostgresStore.from_config(config)
