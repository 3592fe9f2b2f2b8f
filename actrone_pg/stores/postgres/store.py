"""The PostgreSQL store: its layers put together."""

from __future__ import annotations

from typing import TYPE_CHECKING

from actrone_pg.stores.postgres.context import Context
from actrone_pg.stores.postgres.writes import Writes

if TYPE_CHECKING:
    from actrone_pg.config import MemoryConfig

__all__ = ["PostgresStore", "from_config"]


class PostgresStore(Writes, Context):
    """A store in PostgreSQL with pgvector (see :mod:`actrone_pg.stores.postgres`).

    ``dsn`` is a libpq connection string or URI; ``None`` starts the embedded server in
    ``data_dir`` (the ``[embedded]`` extra). :meth:`setup` connects, and migrates the schema when
    ``auto_migrate`` is true; otherwise a schema that is behind raises :class:`SchemaError`.
    An agent with ``ann_min_memories`` memories or more gets an HNSW index of its own, scanned
    with ``hnsw.ef_search = ann_ef_search`` (0 disables them).
    """

    backend = "postgres"

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
            text_analyzer=config.text_analyzer,
            ann_min_memories=config.postgres_ann_min_memories,
            ann_ef_search=config.postgres_ann_ef_search,
            distribute=config.postgres_distribute,
        )


def from_config(config: MemoryConfig) -> PostgresStore:
    """Factory used by :func:`actrone_pg.stores.create_store`."""
    return PostgresStore.from_config(config)
