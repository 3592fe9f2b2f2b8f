"""Every SQL statement of the PostgreSQL store, as named constants, and its fixed settings.

``{s}`` is the schema, composed with ``sql.Identifier`` (``Database.compose``); values always
travel as bound parameters. A statement of up to three values takes them as ``%s``; one of more,
by name, ``%(name)s`` (tests/migrations/test_statements.py holds it so), as do the read and the
listing (``RETRIEVE``, ``LIST_MEMORIES``), which only :mod:`.builders` composes. The read path
itself (planning, ranking, packing) is ``retrieve()``, installed by the migrations (their files
in ``actrone_pg/migrations/sql/``). The memory columns are derived from
:data:`actrone_pg.models.STORED_MEMORY_FIELDS`, the one list of a memory's fields.
"""

from __future__ import annotations

from actrone_pg import sql as sql_files
from actrone_pg.models import MEMORY_FIELD_TYPES, STORED_MEMORY_FIELDS

#: A memory's columns besides ``agent_id`` (every query names the agent), in field order.
MEMORY_FIELDS = tuple(name for name in STORED_MEMORY_FIELDS if name != "agent_id")
# Each field's column type, by its Python type in actrone_pg.models.Memory.
_PG_TYPES = {
    "str": "text",
    "str | None": "text",
    "float": "float8",
    "int": "int4",
    "tuple[str, ...]": "text[]",
    "datetime": "timestamptz",
    "datetime | None": "timestamptz",
    "dict[str, Any]": "jsonb",
}
_COLUMN_TYPES = {name: _PG_TYPES[kind] for name, kind in MEMORY_FIELD_TYPES.items()}
MEMORY_COLUMNS = ", ".join("m." + name for name in MEMORY_FIELDS)
# -- L1 statements ({s} is the schema, composed with sql.Identifier) --
# The session, if still idle past its TTL; run under the row lock it also re-checks, so a session
# a writer revived meanwhile is kept.
DELETE_EXPIRED_SESSION = (
    "DELETE FROM {s}.sessions WHERE agent_id = %s AND session_id = %s"
    " AND last_active_at < now() - make_interval(secs => %s)"
)
UPSERT_SESSION = (
    "INSERT INTO {s}.sessions (agent_id, session_id, created_at, last_active_at, metadata)"
    " VALUES (%s, %s, now(), now(), %s)"
    " ON CONFLICT (agent_id, session_id) DO UPDATE"
    # EXCLUDED's now(), not now() itself: Citus refuses a non-immutable function in DO UPDATE.
    " SET last_active_at = EXCLUDED.last_active_at,"
    " metadata = {s}.sessions.metadata || EXCLUDED.metadata"
)
INSERT_TURN = (
    "INSERT INTO {s}.turns (agent_id, session_id, id, user_message, assistant_message,"
    " tool_results, created_at, token_count) VALUES (%(agent)s, %(session)s, %(id)s,"
    " %(user_message)s, %(assistant_message)s, %(tool_results)s, %(created_at)s,"
    " %(token_count)s)"
    " ON CONFLICT (agent_id, session_id, id) DO NOTHING"
)
TRIM_TURNS = (
    "DELETE FROM {s}.turns WHERE agent_id = %(agent)s AND session_id = %(session)s AND seq <= ("
    "SELECT seq FROM {s}.turns WHERE agent_id = %(agent)s AND session_id = %(session)s"
    " ORDER BY seq DESC OFFSET %(keep)s LIMIT 1)"
)
SELECT_RECENT_TURNS = (
    "SELECT t.id, t.user_message, t.assistant_message, t.tool_results, t.created_at,"
    " t.token_count FROM {s}.turns AS t JOIN {s}.sessions AS x"
    " ON x.agent_id = t.agent_id AND x.session_id = t.session_id"
    " WHERE x.agent_id = %(agent)s AND x.session_id = %(session)s"
    " AND x.last_active_at >= now() - make_interval(secs => %(ttl)s)"
    " ORDER BY t.seq DESC LIMIT %(limit)s"
)
SELECT_SESSION = (
    "SELECT x.created_at, x.last_active_at, x.metadata,"
    " (SELECT count(*) FROM {s}.turns AS t WHERE t.agent_id = x.agent_id"
    " AND t.session_id = x.session_id) AS turn_count"
    " FROM {s}.sessions AS x WHERE x.agent_id = %s AND x.session_id = %s"
    " AND x.last_active_at >= now() - make_interval(secs => %s)"
)
# A range scan of the sessions' primary key (agent_id, session_id); "C" orders by UTF-8 bytes,
# which is code-point order, as the other backends sort.
SELECT_SESSIONS = (
    "SELECT x.session_id, x.created_at, x.last_active_at, x.metadata,"
    " (SELECT count(*) FROM {s}.turns AS t WHERE t.agent_id = x.agent_id"
    " AND t.session_id = x.session_id) AS turn_count"
    " FROM {s}.sessions AS x WHERE x.agent_id = %s"
    " AND x.last_active_at >= now() - make_interval(secs => %s)"
    ' ORDER BY x.session_id COLLATE "C"'
)
DELETE_SESSION = "DELETE FROM {s}.sessions WHERE agent_id = %s AND session_id = %s"
# A session a writer is reviving right now is locked: skipped, and re-checked if it was waited on.
SWEEP_SESSIONS = (
    "DELETE FROM {s}.sessions WHERE (agent_id, session_id) IN ("
    "SELECT x.agent_id, x.session_id FROM {s}.sessions AS x"
    " WHERE x.last_active_at < now() - make_interval(secs => %s)"
    " LIMIT %s FOR UPDATE SKIP LOCKED)"
)
EXPIRED_SESSION_IDS = "SELECT agent_id, session_id FROM {s}.expired_session_ids(%s, %s)"
SELECT_EXPIRED_SESSIONS = (
    "SELECT agent_id, session_id FROM {s}.sessions"
    " WHERE last_active_at < now() - make_interval(secs => %s) LIMIT %s"
)
# Locks are timed by the clock of the server the store connects to (on Citus, the
# coordinator's), read first and bound: Citus refuses clock_timestamp() (and now()) in an
# ON CONFLICT ... WHERE and a volatile function in a DELETE's WHERE (docs/scale-out.md, "What
# behaves differently"); one clock for every holder, whichever worker stores the row.
SERVER_CLOCK = "SELECT clock_timestamp() AS now"
# One atomic statement: insert, or take over a lapsed lock; a live lock (even our own) refuses.
# %(now)s is the server's clock (SERVER_CLOCK).
ACQUIRE_LOCK = (
    "INSERT INTO {s}.locks AS l (agent_id, name, holder, expires_at)"
    " VALUES (%(agent)s, %(name)s, %(holder)s,"
    " %(now)s::timestamptz + make_interval(secs => %(ttl)s))"
    " ON CONFLICT (agent_id, name) DO UPDATE"
    " SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at"
    " WHERE l.expires_at <= %(now)s::timestamptz RETURNING 1"
)
RELEASE_LOCK = (
    "DELETE FROM {s}.locks WHERE agent_id = %(agent)s AND name = %(name)s"
    " AND holder = %(holder)s AND expires_at > %(now)s::timestamptz RETURNING 1"
)

# -- L2 statements --
REGISTER_EMBEDDERS = (
    "INSERT INTO {s}.embedders (name, dimensions)"
    " SELECT * FROM unnest(%s::text[], %s::int[]) ON CONFLICT (name) DO NOTHING"
)
SELECT_EMBEDDERS = "SELECT name, dimensions FROM {s}.embedders WHERE name = ANY(%s::text[])"
ANALYZE_L2 = "VACUUM (ANALYZE) {s}.memories, {s}.term_stats, {s}.agent_stats"
# On Citus that VACUUM is one command per shard, and while commands wait Citus opens more
# connections to each worker at its slow-start pace: at its default, many per VACUUM, each for
# shards that take less time to vacuum than a connection takes to open, closed again after it.
# Around the VACUUM the store lets a connection wait longer before another is opened, so a
# VACUUM of small shards runs over the connections the session holds and one of large shards
# still fans out (docs/notes/scale-out.md, "The VACUUM after a bulk write, and the lock with
# the call").
ANALYZE_L2_CITUS = (
    "SET citus.executor_slow_start_interval = 200",
    "RESET citus.executor_slow_start_interval",
)
LOCK_AGENT_STATS = (
    "INSERT INTO {s}.agent_stats (agent_id, n_docs, total_length) VALUES (%s, 0, 0)"
    " ON CONFLICT (agent_id) DO UPDATE SET n_docs = {s}.agent_stats.n_docs"
)
# The same lock for a writer that only deletes: an agent without the row has no memories, and a
# delete must not create the row (an erased agent would keep a (0, 0) row).
LOCK_EXISTING_AGENT_STATS = "SELECT 1 FROM {s}.agent_stats WHERE agent_id = %s FOR UPDATE"
DELETE_MEMORIES = (
    "DELETE FROM {s}.memories WHERE agent_id = %s AND id = ANY(%s::text[])"
    " RETURNING doc_len, ARRAY(SELECT jsonb_object_keys(term_freqs)) AS terms"
)
# Every stored field of a memory, then the BM25 inputs and the vector.
COPY_COLUMNS = ("agent_id", *MEMORY_FIELDS, "doc_len", "term_freqs", "embedding")
COPY_MEMORIES = "COPY {s}.memories (" + ", ".join(COPY_COLUMNS) + ") FROM STDIN (FORMAT BINARY)"
# The same rows one INSERT each, where row-level security refuses COPY FROM (writes._copy).
INSERT_MEMORY = (
    "INSERT INTO {s}.memories ("
    + ", ".join(COPY_COLUMNS)
    + ") VALUES ("
    + ", ".join(f"%({c})s" for c in COPY_COLUMNS)
    + ")"
)
COPY_TYPES = [
    *(_COLUMN_TYPES[name] for name in ("agent_id", *MEMORY_FIELDS)),
    "int4",
    "jsonb",
    "vector",
]
# The agent's id comes from its statistics row (which every caller holds, LOCK_AGENT_STATS, in
# the same transaction): on Citus that makes the insert a router query run on the agent's
# worker, where a SELECT of parameters alone goes through the coordinator's intermediate
# results (docs/notes/scale-out.md, "Ingest on the cluster").
UPDATE_TERM_STATS = (
    "INSERT INTO {s}.term_stats AS t (agent_id, term, df)"
    " SELECT a.agent_id, u.term, u.delta"
    " FROM (SELECT s.agent_id FROM {s}.agent_stats AS s WHERE s.agent_id = %s) AS a"
    " CROSS JOIN unnest(%s::text[], %s::int[]) AS u(term, delta)"
    " ON CONFLICT (agent_id, term) DO UPDATE SET df = t.df + EXCLUDED.df"
)
PRUNE_TERM_STATS = "DELETE FROM {s}.term_stats WHERE agent_id = %s AND term = ANY(%s) AND df <= 0"
UPDATE_AGENT_STATS = (
    "UPDATE {s}.agent_stats SET n_docs = n_docs + %s, total_length = total_length + %s"
    " WHERE agent_id = %s RETURNING n_docs"
)
SELECT_MEMORY = (
    "SELECT " + MEMORY_COLUMNS + " FROM {s}.memories AS m WHERE m.agent_id = %s AND m.id = %s"
)
# update_memory's read of the version it replaces, locked until its transaction ends.
SELECT_MEMORY_FOR_UPDATE = SELECT_MEMORY + " FOR UPDATE"
# Expired memories the sweeper has not deleted yet are not counted: no read returns them.
COUNT_MEMORIES = (
    "SELECT count(*) FROM {s}.memories WHERE agent_id = %s"
    " AND (expires_at IS NULL OR expires_at > now())"
)
# -- versions (migration 0012): memories holds the current version, memory_history the others --
_HISTORY_COLUMNS = ("agent_id", *MEMORY_FIELDS)
# Copies the current version into the history, closed at the new version's valid_from
# (%(valid_to)s), only if it is the version the caller read: the compare-and-set of an update.
ARCHIVE_MEMORY = (
    "INSERT INTO {s}.memory_history ("
    + ", ".join(_HISTORY_COLUMNS)
    + ") SELECT "
    + ", ".join("%(valid_to)s" if name == "valid_to" else "m." + name for name in _HISTORY_COLUMNS)
    + " FROM {s}.memories AS m WHERE m.agent_id = %(agent)s AND m.id = %(id)s"
    " AND m.version = %(version)s RETURNING 1"
)
SELECT_HISTORY = (
    "SELECT "
    + MEMORY_COLUMNS
    + " FROM {s}.memory_history AS m WHERE m.agent_id = %(agent)s AND m.id = %(id)s"
    " AND EXISTS (SELECT 1 FROM {s}.memories AS c WHERE c.agent_id = m.agent_id AND c.id = m.id)"
    " UNION ALL SELECT "
    + MEMORY_COLUMNS
    + " FROM {s}.memories AS m WHERE m.agent_id = %(agent)s AND m.id = %(id)s ORDER BY version"
)
# The sweeper's: expired memories across agents (the partial index of expiring memories), then
# per agent the ones still expired (an update may have moved an expiry meanwhile).
SELECT_EXPIRED = (
    "SELECT agent_id, id FROM {s}.memories WHERE expires_at IS NOT NULL AND expires_at <= now()"
    " ORDER BY agent_id LIMIT %s"
)
# The same listing under row-level security (sql/0024_row_security.sql: SECURITY DEFINER).
EXPIRED_MEMORY_IDS = "SELECT agent_id, id FROM {s}.expired_memory_ids(%s)"
DELETE_EXPIRED = (
    "DELETE FROM {s}.memories WHERE agent_id = %s AND id = ANY(%s::text[])"
    " AND expires_at <= now()"
    " RETURNING id, doc_len, ARRAY(SELECT jsonb_object_keys(term_freqs)) AS terms"
)
# A page of list_memories, newest first (ix_memories_agent_id_created_at_id, read backwards).
# {after}: TRUE or LIST_AFTER; {where}: TRUE or the filter's conditions (builders.list_memories).
LIST_MEMORIES = (
    "SELECT " + MEMORY_COLUMNS + " FROM {s}.memories AS m WHERE m.agent_id = %(agent)s"
    " AND (m.expires_at IS NULL OR m.expires_at > %(now)s) AND {after} AND {where}"
    " ORDER BY m.created_at DESC, m.id DESC LIMIT %(limit)s"
)
LIST_AFTER = "(m.created_at, m.id) < (%(after_created_at)s, %(after_id)s)"
DELETE_HISTORY = "DELETE FROM {s}.memory_history WHERE agent_id = %s AND id = ANY(%s::text[])"
# Every read (search_memories, retrieve_context, a consolidation's search) is this one call
# (actrone_pg/sql/retrieve.sql; builders.retrieve, search.py).
RETRIEVE = sql_files.load("retrieve")
#: retrieve()'s SQLSTATE for a query vector of another size than its embedder's stored ones;
#: the error's DETAIL is the stored dimension.
DIMENSION_MISMATCH = "AC001"
# -- a schema distributed with Citus (migration 0014, docs/scale-out.md) --
# Does the server have Citus, and if so is the schema's memories table distributed?
# (pg_dist_partition exists only with the extension: asked second.)
CITUS_INSTALLED = "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')"
DISTRIBUTED = (
    "SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = to_regclass(%s)"
    " AND partmethod = 'h')"
)
# A batch on a distributed schema first takes the metadata locks of its agents' shards in share
# mode, on the coordinator, as Citus's own writes take them there, in shard order (as
# REINDEX_LOCK_SHARDS takes them all): a shard move takes its shard's exclusively, coordinator
# first, while it blocks writes, and so does a reindex, so neither runs under the transaction
# (migrations/sql/0024_agent_write.sql).
LOCK_SHARD_METADATA = (
    "SELECT lock_shard_metadata(5, ARRAY(SELECT DISTINCT get_shard_id_for_distribution_column("
    "(quote_ident(%s::text) || '.memories')::regclass, a.agent_id)"
    " FROM unnest(%s::text[]) AS a(agent_id) ORDER BY 1))"
)
# The same under row-level security, for a role that does not own the tables, which Citus
# refuses lock_shard_metadata (SECURITY DEFINER: sql/0024_row_security.sql).
LOCK_AGENT_SHARDS = "SELECT {s}.lock_agent_shards(%s::text[])"
# Row-level security: the agent this session serves (Database.serve; sql/0024_row_security.sql).
SERVE_AGENT = "SELECT set_config('actrone.agent_id', %s, false)"
# On Citus a setting reaches the workers only as SET LOCAL in a transaction block, with
# citus.propagate_set_commands = 'local' (set_config() never does): each call of the store is
# then one transaction that starts so ({} is the agent, a literal).
BEGIN_SERVING = ("BEGIN", "SET LOCAL citus.propagate_set_commands = 'local'")
SERVE_AGENT_LOCAL = "SET LOCAL actrone.agent_id = {}"
# Then, per agent, its statements but the COPY: agent_write, the batch write's one definition
# (migrations/sql/0024_agent_write.sql; distributed with force_delegation, delegated inside the
# batch's transaction to the worker holding the agent's shards). The replaced memories start
# afresh with fresh (upsert_memories'); no fence: NULLs.
AGENT_WRITE = (
    "SELECT held, n_docs, analyzer FROM {s}.agent_write(%(agent)s, %(ids)s::text[],"
    " %(terms)s::text[], %(deltas)s::int[], %(count)s::int, %(length)s::bigint, %(fresh)s,"
    " %(fence_name)s::text, %(fence_holder)s::text)"
)
# -- large agents: an HNSW index of their own (docs/postgres.md, "Large agents") --
ANN_INDEX_STATE = (
    "SELECT i.indisvalid FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid"
    " JOIN pg_namespace AS n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s"
)
# One build at a time per schema, across processes: two CREATE INDEX CONCURRENTLY on one table
# (or one and an ANALYZE) each wait for the other's transaction, which PostgreSQL breaks as a
# deadlock by cancelling one of them.
ANN_LOCK = "SELECT pg_try_advisory_lock(hashtextextended(%s, 0))"
ANN_UNLOCK = "SELECT pg_advisory_unlock(hashtextextended(%s, 0))"
# The store's own copy of migrations._files.VECTOR_SCHEMA: that module needs psycopg, and this
# one is imported before psycopg is known to be there (a missing extra gets its pip line).
VECTOR_SCHEMA = (
    "SELECT n.nspname FROM pg_extension AS e JOIN pg_namespace AS n ON n.oid = e.extnamespace"
    " WHERE e.extname = 'vector'"
)
SELECT_ALL_EMBEDDERS = "SELECT name FROM {s}.embedders"
RECORD_TS_CONFIG = (
    "INSERT INTO {s}.settings (name, value) VALUES ('text_search_config', %s)"
    " ON CONFLICT (name) DO NOTHING"
)
SELECT_TS_CONFIG = "SELECT value FROM {s}.settings WHERE name = 'text_search_config'"
# The analyzer of the stored terms: the configured one for an empty schema, 'simple' for one
# written before analyzers were recorded (its terms are plain tokens).
RECORD_ANALYZER = (
    "INSERT INTO {s}.settings (name, value) SELECT 'text_analyzer',"
    " CASE WHEN EXISTS (SELECT 1 FROM {s}.memories) THEN 'simple' ELSE %s END"
    " ON CONFLICT (name) DO NOTHING"
)
SELECT_ANALYZER = "SELECT value FROM {s}.settings WHERE name = 'text_analyzer'"
SET_ANALYZER = (
    "INSERT INTO {s}.settings (name, value) VALUES ('text_analyzer', %s)"
    " ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value"
)
# -- reindex.py: every memory's terms again, then the statistics from them, in one transaction
REINDEX_LOCK = "LOCK TABLE {s}.memories, {s}.term_stats, {s}.agent_stats IN EXCLUSIVE MODE"
# On a distributed schema, first: every shard's metadata lock, exclusively, in shard order. A
# batch's agent_write runs on the workers, where the table locks above do not reach; it takes
# its shards' locks first (LOCK_SHARD_METADATA), so it waits for the reindex, then reads the
# analyzer it recorded.
REINDEX_LOCK_SHARDS = (
    "SELECT lock_shard_metadata(7, array_agg(s.shardid ORDER BY s.shardid))"
    " FROM pg_dist_shard AS s"
    " WHERE s.logicalrelid = (quote_ident(%s::text) || '.memories')::regclass"
)
REINDEX_READ = "SELECT m.agent_id, m.id, m.content, m.created_at FROM {s}.memories AS m"
REINDEX_WRITE = (
    "UPDATE {s}.memories SET term_freqs = %(term_freqs)s, doc_len = %(doc_len)s"
    " WHERE agent_id = %(agent)s AND id = %(id)s"
)
REINDEX_STATS = [
    "DELETE FROM {s}.term_stats",
    "INSERT INTO {s}.term_stats (agent_id, term, df) SELECT m.agent_id, t.term, count(*)"
    " FROM {s}.memories AS m CROSS JOIN LATERAL jsonb_object_keys(m.term_freqs) AS t(term)"
    " GROUP BY m.agent_id, t.term",
    "DELETE FROM {s}.agent_stats",
    "INSERT INTO {s}.agent_stats (agent_id, n_docs, total_length)"
    " SELECT m.agent_id, count(*), sum(m.doc_len) FROM {s}.memories AS m GROUP BY m.agent_id",
]
# One lexeme per reference token (the smallest if a dictionary yields several; none for a stop
# word). The configuration name is a bound value cast to regconfig, never spliced into the SQL.
NORMALISE = (
    "SELECT t.token, (SELECT min(u.lexeme) FROM unnest(to_tsvector(%s::regconfig, t.token)) AS u)"
    " AS lexeme FROM unnest(%s::text[]) AS t(token)"
)
# A fenced write (stores.base.Fence) goes on only if its writer still holds the live lock; the row
# is share-locked to the end of the transaction, so neither a takeover nor erase_agent's delete
# can come between the check and the commit.
HOLDS_LOCK = (
    "SELECT 1 FROM {s}.locks WHERE agent_id = %s AND name = %s AND holder = %s"
    " AND expires_at > clock_timestamp() FOR SHARE"
)
# The agent's write generation (stores.base.Store.writer_fence): a row of the locks table that
# never lapses. Read first; created only if absent (ON CONFLICT: a concurrent writer's wins, and
# an erase under way, which claims the key, is waited for).
SELECT_GENERATION = "SELECT holder FROM {s}.locks WHERE agent_id = %s AND name = %s"
INSERT_GENERATION = (
    "INSERT INTO {s}.locks (agent_id, name, holder, expires_at) VALUES (%s, %s, %s, 'infinity')"
    " ON CONFLICT (agent_id, name) DO NOTHING"
)
# erase_agent's claim of the fenced lock's key and of the write generation's, after the agent's
# statistics row and before its deletes: an uncommitted row of that key makes a concurrent
# ACQUIRE_LOCK (or INSERT_GENERATION) wait for the erase's commit (which deletes it with the
# agent's other locks), where a lock taken between the erase's delete of the locks and its commit
# would survive it, and with it the writes it fences. No clock in it: Citus refuses one in ON
# CONFLICT.
ERASE_CLAIM_LOCK = (
    "INSERT INTO {s}.locks (agent_id, name, holder, expires_at)"
    " VALUES (%s, %s, 'erase_agent', 'infinity')"
    " ON CONFLICT (agent_id, name) DO UPDATE SET holder = EXCLUDED.holder,"
    " expires_at = EXCLUDED.expires_at"
)
ERASE = [
    "DELETE FROM {s}.memories WHERE agent_id = %s",
    "DELETE FROM {s}.memory_history WHERE agent_id = %s",
    "DELETE FROM {s}.term_stats WHERE agent_id = %s",
    "DELETE FROM {s}.agent_stats WHERE agent_id = %s",
    "DELETE FROM {s}.sessions WHERE agent_id = %s",
    "DELETE FROM {s}.locks WHERE agent_id = %s",
]

# -- maintenance schedule and large agents' indexes (maintenance.py) --
#: ANALYZE after this many memories written by one store, then after ×ANALYZE_GROWTH as many.
ANALYZE_FIRST = 1_000
ANALYZE_GROWTH = 4
#: Once at least SETTLE_MIN_ROWS memories have been written since the last maintenance and no
#: write has come for SETTLE_SECONDS, the store runs the same maintenance in the background.
SETTLE_SECONDS = 1.0
SETTLE_MIN_ROWS = 1_000
#: The largest vector an HNSW index on the vector type takes.
ANN_MAX_DIMENSIONS = 2000
#: Seconds a "this agent has no index" answer is trusted before the catalog is asked again
#: (another process may have built one meanwhile).
ANN_RECHECK_SECONDS = 60.0
#: Seconds before a failed build is tried again.
ANN_RETRY_SECONDS = 600.0
#: maintenance_work_mem of the session that builds an index.
ANN_BUILD_MEMORY = "512MB"
