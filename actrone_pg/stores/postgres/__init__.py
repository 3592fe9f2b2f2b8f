"""The PostgreSQL store: turns, memories, vectors, BM25 statistics and ranking in one database.

psycopg 3 with an async connection pool; pgvector for the vectors; the ranking is one SQL
function, ``hybrid_search``, installed by the Alembic migrations (each revision's copy in
``actrone_pg/migrations/sql/``), the SQL rendering of :mod:`actrone_pg.pipeline` (the parity
tests pin the two together). Every
statement filters on ``agent_id`` first (tenant isolation, and the key a Citus or hash-partitioned
deployment distributes on).

**Candidate search.** A filtered HNSW scan returns a handful of the 500 candidates asked for when
the agent holds 10% of the rows, so the candidates come from an exact scan of the agent's vectors,
read by an index-only scan of the covering index ``ix_memories_candidates (agent_id, embedder)
INCLUDE (created_at, id, embedding)``: the index keeps each agent's vectors together whatever
order the heap rows arrived in. It is exact, keeps float32 precision (which parity with the
reference ranking needs), and measured faster than HNSW and the other exact layouts: the table,
with its command, is in docs/postgres.md, "Candidate search: complete under the tenant filter".

Statistics for BM25 (per-agent document count and total length, per-agent term document
frequencies) are updated in the same transaction as the memory writes, under a row lock on the
agent's statistics row, so concurrent writers of one agent serialise and never lose an update.

The package is cut by concern. ``store`` holds :class:`PostgresStore`, the one class: it keeps a
:class:`~.connection.Database` (the pool, deadlines, error mapping, caches; ``connection``),
which carries three parts of other lifetimes: the :class:`PostgresSettings` it was made with and
the ``SchemaFacts`` setup found (both frozen, ``settings``), and the ``Maintenance`` state
(``maintenance``). The store forwards each call to a module of functions that take it:

* ``sessions`` (L1), ``writes`` (L2 writes and BM25 statistics), ``search`` (the one read
  path: every search, with L1 or without, is one call of ``retrieve()``, which plans it; the
  listing);
* ``maintenance`` — ``VACUUM (ANALYZE)`` after bulk writes, and large agents' HNSW indexes,
  with their counters and tasks;
* ``lookups`` — text search normalisation, the embedder registry, the writer's fence;
* ``setup`` — the embedded server, the schema's migration or check, the pool's opening;

and, without I/O, ``statements`` (every SQL statement, as named constants, and the memory
columns derived from :data:`actrone_pg.models.STORED_MEMORY_FIELDS`), ``builders`` (the
statements whose shape varies, as (statement, parameters by name)) and ``rows`` (one decoder
per statement, reading rows by column name).
"""

from __future__ import annotations

from actrone_pg.stores.postgres.maintenance import ann_index_name
from actrone_pg.stores.postgres.settings import PostgresSettings
from actrone_pg.stores.postgres.store import PostgresStore, from_config

__all__ = ["PostgresSettings", "PostgresStore", "ann_index_name", "from_config"]
