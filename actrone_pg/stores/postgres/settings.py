"""What the PostgreSQL store is told, and what it finds at setup: two frozen records, no I/O.

:class:`PostgresSettings` is the store's configuration, one object from
:class:`~actrone_pg.config.MemoryConfig` (:meth:`PostgresSettings.from_config`) through
:class:`~.store.PostgresStore` to :class:`~.connection.Database`, validated once when it is made.
:class:`SchemaFacts` is what :func:`.setup.setup` finds on the server and in the schema; the
connection holds one, replaced once, at setup, and never changed afterwards.
"""

from __future__ import annotations

import re
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from actrone_pg.config import DISTRIBUTE_MODES
from actrone_pg.errors import ConfigurationError
from actrone_pg.ranking import ANALYZERS, DEFAULT_ANALYZER, Analyzer

if TYPE_CHECKING:
    from actrone_pg.config import MemoryConfig

__all__ = ["PostgresSettings", "SchemaFacts"]


@dataclass(frozen=True, slots=True)
class PostgresSettings:
    """The PostgreSQL store's settings (each is ``MemoryConfig.postgres_<name>``, but for the
    two analyzer settings, which every backend shares).

    ``dsn`` is a libpq connection string or URI; ``None`` starts the embedded server in
    ``data_dir`` (the ``[embedded]`` extra; ``None``: the default data directory). The store
    migrates the schema at setup when ``auto_migrate`` is true; otherwise a schema that is
    behind raises :class:`~actrone_pg.errors.SchemaError`. A call waits at most
    ``connect_timeout`` for a connection and ``connect_timeout + statement_timeout`` in all.
    An agent with ``ann_min_memories`` memories or more gets an HNSW index of its own, scanned
    with ``hnsw.ef_search = ann_ef_search`` (0 disables them). ``distribute`` is
    ``MemoryConfig.postgres_distribute`` (docs/scale-out.md). With ``row_security``, every
    connection a call takes serves that call's agent (:meth:`.connection.Database.serving`;
    docs/postgres.md, "Row-level security").

    Made with a bad schema name, text search configuration, distribution mode or analyzer, it
    raises (:class:`~actrone_pg.errors.ValidationError` for the schema,
    :class:`~actrone_pg.errors.ConfigurationError` for the others) before anything connects.
    """

    dsn: str | None = None
    _: KW_ONLY
    schema: str = "actrone"
    auto_migrate: bool = True
    data_dir: str | Path | None = None
    pool_min_size: int = 1
    pool_max_size: int = 10
    connect_timeout: float = 5.0
    statement_timeout: float = 30.0
    text_search_config: str = "simple"
    text_analyzer: str = DEFAULT_ANALYZER
    lexical_dates: bool | None = None
    ann_min_memories: int = 50_000
    ann_ef_search: int = 800
    distribute: str = "auto"
    row_security: bool = False

    def __post_init__(self) -> None:
        from actrone_pg.migrations import validate_schema

        validate_schema(self.schema)
        if not re.fullmatch(r"[a-z_][a-z0-9_]*", self.text_search_config):
            raise ConfigurationError(
                "postgres_text_search_config",
                f"{self.text_search_config!r} is not a plain identifier",
            )
        if self.distribute not in DISTRIBUTE_MODES:
            raise ConfigurationError(
                "postgres_distribute",
                f"unknown mode {self.distribute!r}; choose one of {', '.join(DISTRIBUTE_MODES)}",
            )
        if self.text_analyzer not in ANALYZERS:
            raise ConfigurationError("text_analyzer", f"unknown analyzer {self.text_analyzer!r}")

    @classmethod
    def from_config(cls, config: MemoryConfig) -> PostgresSettings:
        """The settings a :class:`~actrone_pg.config.MemoryConfig` gives the store."""
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
            lexical_dates=config.lexical_dates,
            ann_min_memories=config.postgres_ann_min_memories,
            ann_ef_search=config.postgres_ann_ef_search,
            distribute=config.postgres_distribute,
            row_security=config.postgres_row_security,
        )

    @property
    def op_timeout(self) -> float:
        """The longest a call waits, whatever the network does (connect + statement timeout)."""
        return self.connect_timeout + self.statement_timeout


@dataclass(frozen=True, slots=True)
class SchemaFacts:
    """What setup found: fixed for the store's life (a store opened later finds them again).

    Before setup, the defaults stand: the configured analyzer, pgvector in ``public``, one
    server.
    """

    #: How contents and queries become BM25 terms (under text search configuration 'simple';
    #: any other maps the plain tokens through the server): the configured analyzer, or the
    #: one the schema recorded when ``lexical_dates`` was left unset
    #: (:func:`actrone_pg.ranking.follow_recorded`).
    analyzer: Analyzer
    #: The schema pgvector's type and operators live in.
    vector_schema: str = "public"
    #: The schema's tables are distributed with Citus: per-agent calls then take the forms
    #: Citus runs on one worker (docs/scale-out.md).
    distributed: bool = False
