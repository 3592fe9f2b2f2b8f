"""The PostgreSQL store: one class holding the database state, each call one module's function.

:class:`PostgresStore` keeps the state (:class:`~.connection.Database`: the connection, with the
settings, the schema's facts and the maintenance beside it) and forwards each method of the
store protocol to the module of its concern, so a traceback names the module that ran:
``setup``, ``sessions`` (L1), ``writes`` (L2 writes), ``search`` (the one read path: L2
search, L1 + L2 in one statement, listing) and ``maintenance``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from actrone_pg._forward import forward
from actrone_pg.ranking import Analyzer
from actrone_pg.stores.postgres import maintenance, search, sessions, setup, writes
from actrone_pg.stores.postgres.connection import Database, serving
from actrone_pg.stores.postgres.settings import PostgresSettings

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    from actrone_pg.config import MemoryConfig
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

    append_turn = serving(sessions.append_turn)
    recent_turns = serving(sessions.recent_turns)
    get_session = serving(sessions.get_session)
    list_sessions = serving(sessions.list_sessions)
    set_session_metadata = serving(sessions.set_session_metadata)
    clear_session = serving(sessions.clear_session)
    sweep_expired_sessions = forward("db", sessions.sweep_expired_sessions)
    expired_sessions = forward("db", sessions.expired_sessions)
    delete_expired_session = serving(sessions.delete_expired_session)
    writer_fence = serving(sessions.writer_fence)
    acquire_lock = serving(sessions.acquire_lock)
    release_lock = serving(sessions.release_lock)

    # -- L2: writes, reads by id, erasure (writes.py) -------------------------------------------

    upsert_memories = forward("db", writes.upsert_memories)
    get_memory = serving(writes.get_memory)
    update_memory = serving(writes.update_memory)
    memory_history = serving(writes.memory_history)
    delete_memory = serving(writes.delete_memory)
    sweep_expired_memories = forward("db", writes.sweep_expired_memories)
    count_memories = serving(writes.count_memories)
    erase_agent = serving(writes.erase_agent)

    # -- L2: listing and search (search.py) ----------------------------------------------------

    list_memories = serving(search.list_memories)
    fetch_context = serving(search.fetch_context)
    # last: the name is the module's above this line, the method's below
    search = serving(search.search)

    # -- read by benchmarks/faults.py and bench/floor.py; use ``db`` and the modules instead --

    def _conn(self) -> AbstractAsyncContextManager[_Conn]:
        return self.db.conn()

    @property
    def _vector_schema(self) -> str:
        return self.db.vector_schema


def from_config(config: MemoryConfig) -> PostgresStore:
    """Factory used by :func:`actrone_pg.stores.create_store`."""
    return PostgresStore.from_config(config)
