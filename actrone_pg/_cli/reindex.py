"""``actrone-pg reindex``: rebuild a store's BM25 terms with the configured text analyzer.

A store records the analyzer (``text_analyzer``, and ``lexical_dates``: ``english+dates``) its
terms were built with and refuses to start under another (``ConfigurationError: text_analyzer:
schema 'actrone' holds BM25 terms built by the analyzer 'simple' ...``): stores written before
analyzers were recorded hold plain tokens, 'simple', while the default is 'english'. This command
rewrites every memory's terms and the statistics with the analyzer asked for and records it. It
uses the configured backend (``ACTRONE_BACKEND`` and the other ``ACTRONE_*`` settings, or the
options below); it creates no embedded cluster and migrates nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
from typing import Any

from actrone_pg._cli._store import add_store_arguments, store_config
from actrone_pg.ranking import ANALYZERS, DEFAULT_LEXICAL_DATES


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``actrone-pg reindex``."""
    add_store_arguments(parser, backend_help="store to re-index")
    parser.add_argument(
        "--text-analyzer",
        choices=ANALYZERS,
        help="analyzer to rebuild with (default: ACTRONE_TEXT_ANALYZER, else 'english')",
    )
    parser.add_argument(
        "--lexical-dates",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="index each memory's date among its terms, or not (default: "
        "ACTRONE_LEXICAL_DATES, else on)",
    )


def run(args: argparse.Namespace) -> int:
    """Re-index; print how many memories were."""
    overrides: dict[str, Any] = {}
    if args.text_analyzer:
        overrides["text_analyzer"] = args.text_analyzer
    if args.lexical_dates is not None:
        overrides["lexical_dates"] = args.lexical_dates
    config = store_config(
        args,
        memory_refusal="the memory backend indexes inside one process and keeps nothing to "
        "re-index; name the store: --backend postgres or --backend redis_qdrant, or set "
        "ACTRONE_BACKEND",
        **overrides,
    )
    if config.lexical_dates is None:
        # Unset, a store follows what it recorded; a rebuild takes the default for new terms.
        config = dataclasses.replace(config, lexical_dates=DEFAULT_LEXICAL_DATES)
    if config.backend == "postgres":
        from actrone_pg._cli._pg import connection_errors
        from actrone_pg.stores.postgres.reindex import reindex

        dsn = config.postgres_dsn
        assert dsn is not None  # store_config resolved it
        with connection_errors(dsn):
            count = reindex(
                dsn,
                config.postgres_schema,
                config.text_analyzer,
                lexical_dates=config.lexical_dates,
            )
        where = f"schema {config.postgres_schema}"
    else:
        from actrone_pg.stores.redis_qdrant import RedisQdrantStore
        from actrone_pg.stores.redis_qdrant.store import from_config

        store: RedisQdrantStore = from_config(config)
        count = asyncio.run(store.reindex())
        where = f"prefix {config.qdrant_collection_prefix}"
    dates = ", with date terms" if config.lexical_dates else ""
    print(
        f"{where}: re-indexed {count:,} memories with the analyzer {config.text_analyzer!r}{dates}"
    )
    return 0
