"""The PostgreSQL store: one class holding the database state, each call one module's function.

:class:`PostgresStore` keeps the state (:class:`~.connection.Database`: the connection, with the
settings, the schema's facts and the maintenance beside it) and forwards each method of the
store protocol to the module of its concern, so a traceback names the module that ran:
``setup``, ``sessions`` (L1), ``writes`` (L2 writes), ``search`` (L2 search, listing),
``context`` (L1 + L2 in one statement) and ``maintenance``.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from actrone_pg.models import Memory, SessionInfo, Turn
from actrone_pg.ranking import Analyzer
from actrone_pg.stores.postgres import context, maintenance, search, sessions, setup, writes
from actrone_pg.stores.postgres.connection import Database
from actrone_pg.stores.postgres.settings import PostgresSettings

if TYPE_CHECKING:
    from collections.abc import Sequence
    from contextlib import AbstractAsyncContextManager

    from actrone_pg.config import MemoryConfig
    from actrone_pg.filters import MemoryFilter
    from actrone_pg.pipeline import PackedSearch, SearchRequest
    from actrone_pg.stores.base import BuildVersion, Fence, MemoryRecord
    from actrone_pg.stores.postgres.connection import _Conn

__all__ = ["PostgresStore", "from_config"]


class PostgresStore:
    """A store in PostgreSQL with pgvector (see :mod:`actrone_pg.stores.postgres`).

    ``settings`` (:class:`~.settings.PostgresSettings`, the defaults if ``None``) says which
    server and schema, and how; :meth:`from_config` makes them from a
    :class:`~actrone_pg.config.MemoryConfig`. :meth:`setup` connects, and migrates the schema
    when ``settings.auto_migrate`` is true.
    """

    backend = "postgres"

    def __init__(self, settings: PostgresSettings | None = None) -> None:
        #: The connection (with the settings, the schema's facts and the maintenance) every
        #: function of the package is given.
        self.db = Database(settings if settings is not None else PostgresSettings())

    @classmethod
    def from_config(cls, config: MemoryConfig) -> PostgresStore:
        """A store built from a :class:`~actrone_pg.config.MemoryConfig` (not yet connected)."""
        return cls(PostgresSettings.from_config(config))

    @property
    def settings(self) -> PostgresSettings:
        """The store's settings (frozen)."""
        return self.db.settings

    @property
    def schema(self) -> str:
        """The schema holding the store's tables (validated)."""
        return self.db.schema

    @property
    def dsn(self) -> str | None:
        """The server's connection string (for the embedded server, known after setup)."""
        return self.db.dsn

    @property
    def distributed(self) -> bool:
        """The schema's tables are distributed with Citus (found at setup; docs/scale-out.md)."""
        return self.db.distributed

    @property
    def analyzer(self) -> Analyzer:
        """How contents and queries become BM25 terms (``MemoryConfig.text_analyzer`` and
        ``lexical_dates``)."""
        return self.db.analyzer

    # -- lifecycle ------------------------------------------------------------------------------

    async def setup(self) -> None:
        """Start the embedded server if needed, migrate (or check the schema), open the pool."""
        await setup.setup(self.db)

    async def close(self) -> None:
        """Stop background maintenance and index builds, then close the pool (twice is fine)."""
        await maintenance.stop(self.db)
        await self.db.close()

    async def wait_for_indexes(self) -> None:
        """Wait until the HNSW index builds started by this store have finished."""
        await maintenance.wait_for_indexes(self.db)

    # -- L1: sessions, turns, locks (sessions.py) -----------------------------------------------

    async def append_turn(
        self, turn: Turn, *, max_turns: int, ttl_seconds: float, fence: Fence | None = None
    ) -> None:
        """Append the turn (idempotent by id), trim the session and refresh its expiry."""
        with self.db.serving(turn.agent_id):
            await sessions.append_turn(
                self.db, turn, max_turns=max_turns, ttl_seconds=ttl_seconds, fence=fence
            )

    async def recent_turns(
        self, agent_id: str, session_id: str, *, limit: int, ttl_seconds: float
    ) -> list[Turn]:
        """The newest ``limit`` turns of a live session, oldest first."""
        with self.db.serving(agent_id):
            return await sessions.recent_turns(
                self.db, agent_id, session_id, limit=limit, ttl_seconds=ttl_seconds
            )

    async def get_session(
        self, agent_id: str, session_id: str, *, ttl_seconds: float
    ) -> SessionInfo | None:
        """A live session's turn count, creation, last activity and metadata."""
        with self.db.serving(agent_id):
            return await sessions.get_session(
                self.db, agent_id, session_id, ttl_seconds=ttl_seconds
            )

    async def list_sessions(self, agent_id: str, *, ttl_seconds: float) -> list[SessionInfo]:
        """The agent's live sessions, by id."""
        with self.db.serving(agent_id):
            return await sessions.list_sessions(self.db, agent_id, ttl_seconds=ttl_seconds)

    async def set_session_metadata(
        self,
        agent_id: str,
        session_id: str,
        metadata: dict[str, Any],
        *,
        ttl_seconds: float,
        fence: Fence | None = None,
    ) -> None:
        """Merge ``metadata`` into the session, creating it if needed."""
        with self.db.serving(agent_id):
            await sessions.set_session_metadata(
                self.db, agent_id, session_id, metadata, ttl_seconds=ttl_seconds, fence=fence
            )

    async def clear_session(self, agent_id: str, session_id: str) -> None:
        """Delete the session and its turns."""
        with self.db.serving(agent_id):
            await sessions.clear_session(self.db, agent_id, session_id)

    async def sweep_expired_sessions(self, *, ttl_seconds: float, limit: int) -> int:
        """Delete up to ``limit`` sessions idle longer than ``ttl_seconds``."""
        return await sessions.sweep_expired_sessions(self.db, ttl_seconds=ttl_seconds, limit=limit)

    async def expired_sessions(self, *, ttl_seconds: float, limit: int) -> list[tuple[str, str]]:
        """Up to ``limit`` sessions idle longer than ``ttl_seconds``, longest idle first."""
        return await sessions.expired_sessions(self.db, ttl_seconds=ttl_seconds, limit=limit)

    async def delete_expired_session(
        self, agent_id: str, session_id: str, *, ttl_seconds: float
    ) -> bool:
        """Delete the session if it is still idle past the TTL."""
        with self.db.serving(agent_id):
            return await sessions.delete_expired_session(
                self.db, agent_id, session_id, ttl_seconds=ttl_seconds
            )

    async def writer_fence(self, agent_id: str) -> Fence:
        """The agent's write generation (created if it has none; waits for an erase)."""
        with self.db.serving(agent_id):
            return await sessions.writer_fence(self.db, agent_id)

    async def acquire_lock(self, agent_id: str, name: str, holder: str, ttl_seconds: float) -> bool:
        """Take the lock in one atomic statement, timed by the server's clock."""
        with self.db.serving(agent_id):
            return await sessions.acquire_lock(self.db, agent_id, name, holder, ttl_seconds)

    async def release_lock(self, agent_id: str, name: str, holder: str) -> bool:
        """Release the lock if ``holder`` holds a live one."""
        with self.db.serving(agent_id):
            return await sessions.release_lock(self.db, agent_id, name, holder)

    # -- L2: writes, reads by id, erasure (writes.py) -------------------------------------------

    async def upsert_memories(
        self, records: Sequence[MemoryRecord], *, fence: Fence | None = None
    ) -> None:
        """Insert or replace, all or none, in one transaction (:func:`.writes.upsert_memories`)."""
        await writes.upsert_memories(self.db, records, fence=fence)

    async def get_memory(self, agent_id: str, memory_id: str) -> Memory | None:
        """The agent's current memory ``memory_id``, or ``None``."""
        with self.db.serving(agent_id):
            return await writes.get_memory(self.db, agent_id, memory_id)

    async def update_memory(
        self,
        agent_id: str,
        memory_id: str,
        build: BuildVersion,
        *,
        fence: Fence | None = None,
    ) -> Memory | None:
        """The new version built from the current one (:func:`.writes.update_memory`)."""
        with self.db.serving(agent_id):
            return await writes.update_memory(self.db, agent_id, memory_id, build, fence=fence)

    async def memory_history(self, agent_id: str, memory_id: str) -> list[Memory]:
        """Every version of the memory, oldest first."""
        with self.db.serving(agent_id):
            return await writes.memory_history(self.db, agent_id, memory_id)

    async def delete_memory(self, agent_id: str, memory_id: str) -> bool:
        """Delete the agent's memory; ``False`` if it had none of that id."""
        with self.db.serving(agent_id):
            return await writes.delete_memory(self.db, agent_id, memory_id)

    async def sweep_expired_memories(self, *, limit: int) -> int:
        """Delete up to ``limit`` expired memories, of every agent."""
        return await writes.sweep_expired_memories(self.db, limit=limit)

    async def count_memories(self, agent_id: str) -> int:
        """How many current memories the agent has."""
        with self.db.serving(agent_id):
            return await writes.count_memories(self.db, agent_id)

    async def erase_agent(self, agent_id: str) -> None:
        """Delete every row of the agent, and nothing of any other."""
        with self.db.serving(agent_id):
            await writes.erase_agent(self.db, agent_id)

    # -- L2: search and listing (context.py, search.py) -----------------------------------------

    async def search(self, request: SearchRequest) -> PackedSearch:
        """The ranked memories of ``request`` (:func:`.context.search`)."""
        with self.db.serving(request.agent_id):
            return await context.search(self.db, request)

    async def fetch_context(
        self,
        agent_id: str,
        session_id: str,
        *,
        limit: int,
        ttl_seconds: float,
        request: SearchRequest,
    ) -> tuple[list[Turn], PackedSearch]:
        """The session's recent turns and ``request``'s packed search, in one round trip where
        the search allows it (:func:`.context.fetch_context`)."""
        with self.db.serving(agent_id):
            return await context.fetch_context(
                self.db, agent_id, session_id, limit=limit, ttl_seconds=ttl_seconds, request=request
            )

    async def list_memories(
        self,
        agent_id: str,
        *,
        now: datetime,
        limit: int,
        after: tuple[datetime, str] | None = None,
        filter: MemoryFilter | None = None,
    ) -> list[Memory]:
        """A keyset page of the agent's live memories, newest first, filtered in SQL."""
        with self.db.serving(agent_id):
            return await search.list_memories(
                self.db, agent_id, now=now, limit=limit, after=after, filter=filter
            )

    # -- read by benchmarks/faults.py and bench/floor.py; use ``db`` and the modules instead --

    def _conn(self) -> AbstractAsyncContextManager[_Conn]:
        return self.db.conn()

    @property
    def _vector_schema(self) -> str:
        return self.db.vector_schema


def from_config(config: MemoryConfig) -> PostgresStore:
    """Factory used by :func:`actrone_pg.stores.create_store`."""
    return PostgresStore.from_config(config)
