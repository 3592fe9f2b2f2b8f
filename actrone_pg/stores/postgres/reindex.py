"""Rebuild a schema's BM25 terms with another analyzer or date rule: ``actrone-pg reindex``.

``term_freqs``, ``doc_len`` and the statistics (``term_stats``, ``agent_stats``) hold the terms of
the analyzer the schema recorded in ``settings`` (its index name: ``english``, or
``english+dates`` with ``lexical_dates``); a store configured otherwise refuses to start
(``ranking.analyzer_mismatch``). :func:`reindex` recomputes every memory's terms in Python with
the analyzer asked for (``Analyzer.document_counts``, the code every backend indexes with),
rebuilds the statistics from them and records the analyzer, in one transaction: searches keep
reading the old terms until it commits, writes wait for it.
"""

from __future__ import annotations

from actrone_pg.errors import ConfigurationError, MissingDependencyError
from actrone_pg.migrations import _citus
from actrone_pg.ranking import ANALYZERS, analyzer
from actrone_pg.stores.postgres.statements import (
    REINDEX_LOCK,
    REINDEX_LOCK_SHARDS,
    REINDEX_READ,
    REINDEX_STATS,
    REINDEX_WRITE,
    SELECT_TS_CONFIG,
    SET_ANALYZER,
)

try:
    import psycopg
    from psycopg import sql
    from psycopg.types.json import Jsonb
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("postgres", exc.name or "psycopg") from None

__all__ = ["reindex"]

#: Memories read and rewritten per round trip.
_BATCH = 1000


def reindex(dsn: str, schema: str, text_analyzer: str, *, lexical_dates: bool | None = None) -> int:
    """Rewrite the terms of every memory in ``schema`` with ``text_analyzer`` (and, with
    ``lexical_dates``, the terms of each memory's date); returns how many.

    The schema must be migrated and use the text search configuration ``simple`` (any other
    maps tokens through the server, and no analyzer applies).
    """
    if text_analyzer not in ANALYZERS:
        raise ConfigurationError(
            "text_analyzer", f"unknown analyzer {text_analyzer!r}; choose {' or '.join(ANALYZERS)}"
        )
    terms = analyzer(text_analyzer, dates=lexical_dates)

    def q(text: str) -> sql.Composed:
        return sql.SQL(text).format(s=sql.Identifier(schema))

    count = 0
    with psycopg.connect(dsn) as conn, conn.transaction():
        row = conn.execute(q(SELECT_TS_CONFIG)).fetchone()
        if row is not None and row[0] != "simple":
            raise ConfigurationError(
                "postgres_text_search_config",
                f"schema {schema!r} maps its terms through the text search configuration "
                f"{row[0]!r}, not an analyzer; there is nothing to re-index",
            )
        if _citus.distributed(_citus.runner(conn), schema):
            conn.execute(REINDEX_LOCK_SHARDS, (schema,))
        conn.execute(q(REINDEX_LOCK))
        with conn.cursor(name="actrone_reindex") as read, conn.cursor() as write:
            read.execute(q(REINDEX_READ))
            while rows := read.fetchmany(_BATCH):
                updates = []
                for agent_id, memory_id, content, created_at in rows:
                    tf, length = terms.document_counts(content, created_at)
                    updates.append(
                        {
                            "term_freqs": Jsonb(dict(tf)),
                            "doc_len": length,
                            "agent": agent_id,
                            "id": memory_id,
                        }
                    )
                write.executemany(q(REINDEX_WRITE), updates)
                count += len(rows)
        for statement in REINDEX_STATS:
            conn.execute(q(statement))
        conn.execute(q(SET_ANALYZER), (terms.index_name,))
    return count
