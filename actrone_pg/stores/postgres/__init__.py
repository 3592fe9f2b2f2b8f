"""The PostgreSQL store: turns, memories, vectors, BM25 statistics and ranking in one database.

psycopg 3 with an async connection pool; pgvector for the vectors; the ranking is one SQL
function (``actrone_pg/sql/hybrid_search.sql``) installed by the Alembic migrations, the SQL
rendering of :mod:`actrone_pg.pipeline` (the parity tests pin the two together). Every
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

The package is cut by concern, each module a layer of :class:`PostgresStore`:

* ``statements`` — every SQL statement, as named constants, and the memory columns derived from
  :data:`actrone_pg.models.STORED_MEMORY_FIELDS`;
* ``rows`` — the one decoder per statement that reads rows by column name;
* ``connection`` — configuration, the pool, error mapping, the schema check, text search
  normalisation and the embedder registry;
* ``maintenance`` — ``VACUUM (ANALYZE)`` after bulk writes, and large agents' HNSW indexes;
* ``sessions`` (L1), ``writes`` (L2 writes and BM25 statistics), ``search`` (L2 search);
* ``store`` — :class:`PostgresStore`, which puts them together.
"""

from __future__ import annotations

from actrone_pg.stores.postgres.maintenance import ann_index_name
from actrone_pg.stores.postgres.store import PostgresStore, from_config

__all__ = ["PostgresStore", "ann_index_name", "from_config"]
