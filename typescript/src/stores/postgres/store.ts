/**
 * The PostgreSQL store, on the schema the Python package's migrations install: every read and
 * write goes through the statements and SQL functions of `actrone_pg.stores.postgres` (generated
 * from it at build time), so both languages read and write one memory and rank it with the same
 * SQL. Every search is one call of `retrieve()`, as Python's store makes it (`search.py`): the
 * function plans it in SQL (a filter, the agent's own HNSW index, the exact scan, the agent's
 * worker on Citus). Batches of memories go through `agent_write()`.
 */
import { createHash } from "node:crypto";
import pg from "pg";
import { analyzer as makeAnalyzer, type Analyzer } from "../../analyzer.js";
import type { MemoryConfig } from "../../config.js";
import { redact } from "../../config.js";
import { ActroneError, ConfigurationError, DimensionMismatchError, SchemaError, StoreError, StoreUnavailableError } from "../../errors.js";
import type { MemoryFilter } from "../../filters.js";
import type { Memory, Turn } from "../../models.js";
import type { BuildVersion, MemoryRecord, PackedSearch, SearchRequest, Store } from "../../store.js";
import { COPY_COLUMNS, COPY_TYPES } from "./generated.js";
import * as rows from "./rows.js";
import { prepareSchema } from "./schema.js";
import * as q from "./sql.js";

const { Pool, types } = pg;
type Client = pg.PoolClient;
type Values = Readonly<Record<string, unknown>> | readonly unknown[];

/** The lock consolidation fences its writes with (Python's `stores.base.FENCED_LOCK`). */
const FENCED_LOCK = "maintenance";
/** retrieve()'s SQLSTATE for a query vector of another size than the embedder's (DETAIL: it). */
const DIMENSION_MISMATCH = "AC001";
/** Rows per INSERT of a batch (node-postgres binds at most 65535 values per statement). */
const INSERT_ROWS = 1000;

const prepared = new Map<string, q.Prepared>();
function prepare(text: string): q.Prepared {
  let p = prepared.get(text);
  if (p === undefined) {
    p = q.placeholders(text);
    if (prepared.size > 512) prepared.clear();
    prepared.set(text, p);
  }
  return p;
}

/** Type parsers of this store's connections: timestamps to the microsecond, bigints as numbers. */
function typeParsers(): pg.CustomTypesConfig {
  return {
    getTypeParser: ((oid: number, format?: string) => {
      if (oid === 1184 || oid === 1114) return (text: string) => rows.parseTimestamp(oid === 1114 ? `${text}+00` : text);
      if (oid === 20) return (text: string) => Number(text);
      return types.getTypeParser(oid, format as "text");
    }) as pg.CustomTypesConfig["getTypeParser"],
  };
}

/** Options of {@link PostgresStore} besides the config's. */
export interface PostgresStoreOptions {
  /** A DSN (else `config.postgresDsn`). */
  readonly dsn?: string;
}

/** Memories and turns in PostgreSQL, on the schema shared with the Python package. */
export class PostgresStore implements Store {
  readonly backend = "postgres";
  readonly schema: string;
  readonly #config: MemoryConfig;
  readonly #dsn: string;
  #pool: pg.Pool | null = null;
  #analyzer: Analyzer;
  #vectorSchema = "public";
  #distributed = false;
  readonly #dimensions = new Map<string, number>();

  constructor(config: MemoryConfig, options: PostgresStoreOptions = {}) {
    const dsn = options.dsn ?? config.postgresDsn;
    if (!dsn) {
      throw new ConfigurationError(
        "postgresDsn",
        "the postgres backend of the TypeScript package needs a server: set postgresDsn (or ACTRONE_POSTGRES_DSN); " +
          "the embedded server is the Python package's",
      );
    }
    if (config.postgresRowSecurity) {
      throw new ConfigurationError(
        "postgresRowSecurity",
        "the TypeScript package does not yet serve agents under row-level security: leave postgresRowSecurity false (the Python package's store supports it)",
      );
    }
    if (config.postgresTextSearchConfig !== "simple") {
      throw new ConfigurationError(
        "postgresTextSearchConfig",
        "the TypeScript package indexes with its analyzer (textAnalyzer) only: leave postgresTextSearchConfig at \"simple\"",
      );
    }
    this.#config = config;
    this.#dsn = dsn;
    this.schema = config.postgresSchema;
    this.#analyzer = makeAnalyzer(config.textAnalyzer, config.lexicalDates);
  }

  // -- connections --

  async setup(): Promise<void> {
    if (this.#pool !== null) return;
    const c = this.#config;
    const pool = new Pool({
      connectionString: this.#dsn,
      max: c.postgresPoolMaxSize,
      connectionTimeoutMillis: Math.max(1, Math.ceil(c.postgresConnectTimeout * 1000)),
      statement_timeout: Math.max(1, Math.round(c.postgresStatementTimeout * 1000)),
      types: typeParsers(),
      application_name: "actrone-pg (TypeScript)",
    });
    pool.on("error", () => undefined); // an idle connection lost: the next checkout reconnects
    this.#pool = pool;
    try {
      await this.#with(async (client) => {
        const citus = Boolean((await this.#query(client, q.statement("CITUS_INSTALLED", this.schema), []))[0]?.exists);
        await prepareSchema(client, this.schema, {
          autoMigrate: c.postgresAutoMigrate,
          distribute: c.postgresDistribute,
          citus,
        });
        await this.#checkTextSearchConfig(client);
        await this.#checkAnalyzer(client);
        const vector = await this.#query(client, q.statement("VECTOR_SCHEMA", this.schema), []);
        this.#vectorSchema = (vector[0]?.nspname as string | undefined) ?? "public";
        if (citus) {
          const found = await this.#query(client, q.statement("DISTRIBUTED", this.schema), [`${q.ident(this.schema)}.memories`]);
          this.#distributed = Boolean(found[0]?.exists);
        }
        if (c.postgresDistribute === "citus" && !this.#distributed) {
          throw new SchemaError(
            `schema ${JSON.stringify(this.schema)} is not distributed with Citus; run \`actrone-pg migrate --distribute --schema ${this.schema}\` on the coordinator`,
          );
        }
      });
    } catch (exc) {
      await this.close();
      throw exc;
    }
  }

  async close(): Promise<void> {
    const pool = this.#pool;
    this.#pool = null;
    if (pool !== null) await pool.end().catch(() => undefined);
  }

  /** Whether the schema is distributed with Citus (`retrieve()` then runs on the agent's worker). */
  get distributed(): boolean {
    return this.#distributed;
  }

  async #with<T>(fn: (client: Client) => Promise<T>): Promise<T> {
    if (this.#pool === null) throw new StoreError("the postgres store is closed (or was never set up)");
    let client: Client;
    try {
      client = await this.#pool.connect();
    } catch (exc) {
      throw new StoreUnavailableError(redact(`cannot connect to PostgreSQL: ${(exc as Error).message}`), { cause: exc });
    }
    let broken = false;
    try {
      return await fn(client);
    } catch (exc) {
      broken = isConnectionError(exc);
      throw translate(exc);
    } finally {
      client.release(broken);
    }
  }

  async #transaction<T>(fn: (client: Client) => Promise<T>): Promise<T> {
    return this.#with(async (client) => {
      await client.query("BEGIN");
      try {
        const out = await fn(client);
        await client.query("COMMIT");
        return out;
      } catch (exc) {
        await client.query("ROLLBACK").catch(() => undefined);
        throw exc;
      }
    });
  }

  /**
   * Run a statement. It is prepared on the connection by a name derived from its text (as
   * psycopg prepares a statement run often), except `prepared: false`: an HNSW scan, whose plan
   * must be made for the bound agent (a prepared statement may switch to a generic plan).
   */
  async #query(client: Client, text: string, values: Values, prepared = true): Promise<rows.Row[]> {
    const p = prepare(text);
    const config: pg.QueryConfig = { text: p.text, values: q.ordered(p, values) };
    if (prepared) config.name = p.name;
    const result = await client.query<rows.Row>(config);
    return result.rows;
  }

  #s(name: q.StatementName): string {
    return q.statement(name, this.schema);
  }

  async #checkTextSearchConfig(client: Client): Promise<void> {
    await this.#query(client, this.#s("RECORD_TS_CONFIG"), ["simple"]);
    const row = await this.#query(client, this.#s("SELECT_TS_CONFIG"), []);
    const recorded = (row[0]?.value as string | undefined) ?? "simple";
    if (recorded !== "simple") {
      throw new ConfigurationError(
        "postgresTextSearchConfig",
        `schema ${JSON.stringify(this.schema)} holds term statistics built with ${JSON.stringify(recorded)}, which the TypeScript package does not index with; use another postgresSchema`,
      );
    }
  }

  /** Python's `follow_recorded`: the analyzer the schema's terms were made with. */
  async #checkAnalyzer(client: Client): Promise<void> {
    await this.#query(client, this.#s("RECORD_ANALYZER"), [this.#analyzer.indexName]);
    const row = await this.#query(client, this.#s("SELECT_ANALYZER"), []);
    const recorded = (row[0]?.value as string | undefined) ?? this.#analyzer.indexName;
    this.#analyzer = followRecorded(this.schema, this.#analyzer, recorded, this.#config.lexicalDates !== null);
  }

  #checkRecordedAnalyzer(recorded: unknown): void {
    if (recorded !== null && recorded !== undefined && recorded !== this.#analyzer.indexName) {
      throw new ConfigurationError(
        "textAnalyzer",
        `schema ${JSON.stringify(this.schema)} (re-indexed while this store ran; restart it to follow) holds BM25 terms of analyzer ` +
          `${JSON.stringify(recorded)}, not ${JSON.stringify(this.#analyzer.indexName)}`,
      );
    }
  }

  // -- L1 --

  async appendTurn(turn: Turn, options: { maxTurns: number; ttlSeconds: number }): Promise<void> {
    const a = turn.agentId;
    const s = turn.sessionId;
    await this.#transaction(async (client) => {
      await this.#query(client, this.#s("DELETE_EXPIRED_SESSION"), [a, s, options.ttlSeconds]);
      await this.#query(client, this.#s("UPSERT_SESSION"), [a, s, "{}"]);
      await this.#query(client, this.#s("INSERT_TURN"), {
        agent: a,
        session: s,
        id: turn.id,
        user_message: turn.userMessage,
        assistant_message: turn.assistantMessage,
        tool_results: turn.toolResults === null ? null : rows.jsonText(turn.toolResults),
        created_at: rows.timestamp(turn.createdAt),
        token_count: turn.tokenCount,
      });
      await this.#query(client, this.#s("TRIM_TURNS"), { agent: a, session: s, keep: options.maxTurns });
    });
  }

  async recentTurns(agentId: string, sessionId: string, options: { limit: number; ttlSeconds: number }): Promise<Turn[]> {
    const found = await this.#with((c) => this.#query(c, this.#s("SELECT_RECENT_TURNS"), { agent: agentId, session: sessionId, ttl: options.ttlSeconds, limit: options.limit }));
    return rows.turns(agentId, sessionId, found);
  }

  async clearSession(agentId: string, sessionId: string): Promise<void> {
    await this.#with((c) => this.#query(c, this.#s("DELETE_SESSION"), [agentId, sessionId]));
  }

  // -- L2 writes --

  async upsertMemories(records: readonly MemoryRecord[]): Promise<void> {
    if (records.length === 0) return;
    const dims = batchDimensions(records);
    this.#checkKnown(dims, this.#dimensions);
    const byAgent = new Map<string, MemoryRecord[]>();
    for (const r of records) {
      const list = byAgent.get(r.memory.agentId) ?? [];
      list.push(r);
      byAgent.set(r.memory.agentId, list);
    }
    const agents = [...byAgent.keys()].sort(compareText);
    const stored = await this.#transaction(async (client) => {
      const registered = await this.#register(client, dims);
      if (this.#distributed) await this.#query(client, this.#s("LOCK_SHARD_METADATA"), [this.schema, agents]);
      for (const agentId of agents) {
        const batch = this.#batch(agentId, byAgent.get(agentId)!);
        await this.#agentWrite(client, batch, true);
      }
      return registered;
    });
    for (const [name, size] of stored) this.#dimensions.set(name, size);
  }

  async updateMemory(agentId: string, memoryId: string, build: BuildVersion): Promise<Memory | null> {
    let registered = new Map<string, number>();
    const written = await this.#transaction(async (client) => {
      if (this.#distributed) await this.#query(client, this.#s("LOCK_SHARD_METADATA"), [this.schema, [agentId]]);
      await this.#query(client, this.#s("LOCK_AGENT_STATS"), [agentId]);
      const recorded = await this.#query(client, this.#s("SELECT_ANALYZER"), []);
      this.#checkRecordedAnalyzer(recorded[0]?.value);
      const found = await this.#query(client, this.#s("SELECT_MEMORY_FOR_UPDATE"), [agentId, memoryId]);
      if (found.length === 0) return null;
      const current = rows.memory(agentId, found[0]!);
      const record = await build(current);
      const m = record.memory;
      const dims = batchDimensions([record]);
      this.#checkKnown(dims, this.#dimensions);
      registered = await this.#register(client, dims);
      await this.#query(client, this.#s("ARCHIVE_MEMORY"), { valid_to: rows.timestamp(m.validFrom), agent: agentId, id: m.id, version: current.version });
      await this.#agentWrite(client, this.#batch(agentId, [record]), false);
      return m;
    });
    for (const [name, size] of registered) this.#dimensions.set(name, size);
    return written;
  }

  async deleteMemory(agentId: string, memoryId: string): Promise<boolean> {
    return this.#transaction(async (client) => {
      await this.#query(client, this.#s("LOCK_AGENT_STATS"), [agentId]);
      const gone = await this.#query(client, this.#s("DELETE_MEMORIES"), [agentId, [memoryId]]);
      if (gone.length === 0) return false;
      await this.#query(client, this.#s("DELETE_HISTORY"), [agentId, [memoryId]]);
      const old = gone[0]!;
      const terms = (old.terms as string[] | null) ?? [];
      if (terms.length > 0) {
        await this.#query(client, this.#s("UPDATE_TERM_STATS"), [agentId, terms, terms.map(() => -1)]);
        await this.#query(client, this.#s("PRUNE_TERM_STATS"), [agentId, terms]);
      }
      await this.#query(client, this.#s("UPDATE_AGENT_STATS"), [-1, -Number(old.doc_len), agentId]);
      return true;
    });
  }

  async sweepExpiredMemories(options: { limit: number }): Promise<number> {
    const found = await this.#with((c) => this.#query(c, this.#s("SELECT_EXPIRED"), [options.limit]));
    const byAgent = new Map<string, string[]>();
    for (const r of found) {
      const list = byAgent.get(r.agent_id as string) ?? [];
      list.push(r.id as string);
      byAgent.set(r.agent_id as string, list);
    }
    let removed = 0;
    for (const agentId of [...byAgent.keys()].sort(compareText)) {
      removed += await this.#transaction(async (client) => {
        await this.#query(client, this.#s("LOCK_AGENT_STATS"), [agentId]);
        const gone = await this.#query(client, this.#s("DELETE_EXPIRED"), [agentId, byAgent.get(agentId)!]);
        if (gone.length === 0) return 0;
        await this.#query(client, this.#s("DELETE_HISTORY"), [agentId, gone.map((r) => r.id as string)]);
        const df = new Map<string, number>();
        for (const r of gone) for (const t of (r.terms as string[] | null) ?? []) df.set(t, (df.get(t) ?? 0) + 1);
        if (df.size > 0) {
          const terms = [...df.keys()];
          await this.#query(client, this.#s("UPDATE_TERM_STATS"), [agentId, terms, terms.map((t) => -df.get(t)!)]);
          await this.#query(client, this.#s("PRUNE_TERM_STATS"), [agentId, terms]);
        }
        const length = gone.reduce((sum, r) => sum + Number(r.doc_len), 0);
        await this.#query(client, this.#s("UPDATE_AGENT_STATS"), [-gone.length, -length, agentId]);
        return gone.length;
      });
    }
    return removed;
  }

  async eraseAgent(agentId: string): Promise<void> {
    await this.#transaction(async (client) => {
      await this.#query(client, this.#s("LOCK_AGENT_STATS"), [agentId]);
      await this.#query(client, this.#s("ERASE_CLAIM_LOCK"), [agentId, FENCED_LOCK]);
      for (const statement of q.eraseStatements(this.schema)) await this.#query(client, statement, [agentId]);
    });
    await this.#dropAnnIndexes(agentId);
  }

  async #dropAnnIndexes(agentId: string): Promise<void> {
    await this.#with(async (client) => {
      const embedders = await this.#query(client, this.#s("SELECT_ALL_EMBEDDERS"), []);
      for (const r of embedders) {
        const embedder = r.name as string;
        const name = annIndexName(agentId, embedder);
        const state = await this.#query(client, this.#s("ANN_INDEX_STATE"), [this.schema, name]);
        if (state.length > 0) await client.query(`DROP INDEX CONCURRENTLY IF EXISTS ${q.ident(this.schema)}.${q.ident(name)}`);
      }
    });
  }

  /** One agent's memories to write: their rows, their terms counted as the schema indexes them. */
  #batch(agentId: string, records: readonly MemoryRecord[]): Batch {
    const df = new Map<string, number>();
    let total = 0;
    const tfs: Map<string, number>[] = [];
    const lengths: number[] = [];
    for (const r of records) {
      const { tf, length } = this.#analyzer.documentCounts(r.memory.content, r.memory.createdAt);
      total += length;
      for (const t of tf.keys()) df.set(t, (df.get(t) ?? 0) + 1);
      tfs.push(tf);
      lengths.push(length);
    }
    return { agentId, records, tfs, lengths, df, length: total };
  }

  /**
   * writes._write_by_call: agent_write(), the batch write's one definition (the statistics row,
   * the replaced memories, the frequencies and totals; on Citus delegated to the agent's worker),
   * then the rows.
   */
  async #agentWrite(client: Client, batch: Batch, fresh: boolean): Promise<void> {
    const terms = [...batch.df.keys()];
    const found = await this.#query(client, this.#s("AGENT_WRITE"), {
      agent: batch.agentId,
      ids: batch.records.map((r) => r.memory.id),
      terms,
      deltas: terms.map((t) => batch.df.get(t)!),
      count: batch.records.length,
      length: batch.length,
      fresh,
      fence_name: null,
      fence_holder: null,
    });
    this.#checkRecordedAnalyzer(found[0]?.analyzer);
    await this.#insert(client, batch);
  }

  /** The rows of a batch (Python COPYs them; here multi-row INSERTs of the same columns). */
  async #insert(client: Client, batch: Batch): Promise<void> {
    const columns = COPY_COLUMNS as readonly string[];
    const casts = (COPY_TYPES as readonly string[]).map((t) => (t === "vector" ? `${q.ident(this.#vectorSchema)}.vector` : t));
    for (let start = 0; start < batch.records.length; start += INSERT_ROWS) {
      const values: unknown[] = [];
      const tuples: string[] = [];
      for (let i = start; i < Math.min(batch.records.length, start + INSERT_ROWS); i++) {
        const r = batch.records[i]!;
        const row = copyRow(batch.agentId, r, batch.tfs[i]!, batch.lengths[i]!);
        tuples.push(`(${row.map((_, j) => `$${values.length + j + 1}::${casts[j]}`).join(", ")})`);
        values.push(...row);
      }
      await client.query(`INSERT INTO ${q.ident(this.schema)}.memories (${columns.join(", ")}) VALUES ${tuples.join(", ")}`, values);
    }
  }

  async #register(client: Client, dims: Map<string, number>): Promise<Map<string, number>> {
    const names = [...dims.keys()].filter((n) => !this.#dimensions.has(n)).sort(compareText);
    if (names.length === 0) return new Map();
    await this.#query(client, this.#s("REGISTER_EMBEDDERS"), [names, names.map((n) => dims.get(n)!)]);
    const found = await this.#query(client, this.#s("SELECT_EMBEDDERS"), [names]);
    const stored = new Map(found.map((r) => [r.name as string, Number(r.dimensions)] as const));
    this.#checkKnown(dims, stored);
    return stored;
  }

  #checkKnown(dims: Map<string, number>, registry: Map<string, number>): void {
    for (const [name, size] of dims) {
      const known = registry.get(name);
      if (known !== undefined && known !== size) throw dimensionMismatch(name, known, size);
    }
  }

  // -- L2 reads --

  async getMemory(agentId: string, memoryId: string): Promise<Memory | null> {
    const found = await this.#with((c) => this.#query(c, this.#s("SELECT_MEMORY"), [agentId, memoryId]));
    return found.length > 0 ? rows.memory(agentId, found[0]!) : null;
  }

  async memoryHistory(agentId: string, memoryId: string): Promise<Memory[]> {
    const found = await this.#with((c) => this.#query(c, this.#s("SELECT_HISTORY"), { agent: agentId, id: memoryId }));
    return found.map((r) => rows.memory(agentId, r));
  }

  async listMemories(
    agentId: string,
    options: { now: Date; limit: number; after: readonly [number, string] | null; filter: MemoryFilter | null },
  ): Promise<Memory[]> {
    const entries = options.filter === null ? [] : q.filterEntries(options.filter);
    const text = q.listMemories(
      this.schema,
      entries.map(([k]) => k),
      options.after !== null,
    );
    const values: Record<string, unknown> = { agent: agentId, now: rows.timestamp(options.now), limit: options.limit, ...filterValues(entries) };
    if (options.after !== null) {
      values.after_created_at = rows.timestampFromMicros(options.after[0]);
      values.after_id = options.after[1];
    }
    const found = await this.#with((c) => this.#query(c, text, values));
    return found.map((r) => rows.memory(agentId, r));
  }

  async countMemories(agentId: string): Promise<number> {
    const found = await this.#with((c) => this.#query(c, this.#s("COUNT_MEMORIES"), [agentId]));
    return Number(found[0]?.count ?? 0);
  }

  async search(request: SearchRequest): Promise<PackedSearch> {
    return rows.packed(request.agentId, await this.#retrieve(request, null));
  }

  async fetchContext(
    agentId: string,
    sessionId: string,
    options: { limit: number; ttlSeconds: number; request: SearchRequest },
  ): Promise<[Turn[], PackedSearch]> {
    const found = await this.#retrieve(options.request, [sessionId, options.limit, options.ttlSeconds]);
    const turnRows = found.filter((r) => r.kind === "turn");
    return [rows.turns(agentId, sessionId, turnRows), rows.packed(agentId, found.filter((r) => r.kind !== "turn"))];
  }

  /**
   * search._retrieve: the one call of `retrieve()` (migration 0024), which plans the search in
   * SQL (a filter, the agent's own HNSW index, the exact scan, Citus's shards) and returns the
   * session's turns and the packed search; its dimension error (AC001) as Python raises it.
   */
  async #retrieve(request: SearchRequest, session: Session | null): Promise<rows.Row[]> {
    return this.#with(async (client) => {
      try {
        return await this.#query(client, this.#s("RETRIEVE"), retrieveValues(request, session, this.#config.postgresAnnEfSearch));
      } catch (exc) {
        const err = exc as { code?: unknown; detail?: unknown } | null;
        if (err?.code === DIMENSION_MISMATCH) {
          checkQueryDimensions(request.embedder, Number(err.detail ?? 0), request.vector);
        }
        throw exc;
      }
    });
  }
}

type Session = [string, number, number];

interface Batch {
  readonly agentId: string;
  readonly records: readonly MemoryRecord[];
  readonly tfs: Map<string, number>[];
  readonly lengths: number[];
  readonly df: Map<string, number>;
  readonly length: number;
}

/** The name of an agent's HNSW index for one embedder (maintenance.ann_index_name). */
export function annIndexName(agentId: string, embedder: string): string {
  return `ix_ann_${createHash("sha256").update(`${agentId}\u0000${embedder}`, "utf8").digest("hex").slice(0, 24)}`;
}

/** builders.retrieve's values: builders._ranking's, the budget, the filter (filterJson), ef_search. */
function retrieveValues(request: SearchRequest, session: Session | null, efSearch: number): Record<string, unknown> {
  const p = request.params;
  const weights = [...p.rrfWeights];
  while (weights.length < 3) weights.push(0.0);
  return {
    agent: request.agentId,
    session: session?.[0] ?? null,
    turn_limit: session?.[1] ?? null,
    session_ttl: session?.[2] ?? null,
    embedder: request.embedder,
    terms: [...request.terms],
    vector: rows.vectorText(request.vector),
    threshold: request.threshold,
    limit: Math.trunc(request.limit),
    hybrid: p.hybrid,
    rrf_k: Math.trunc(p.rrfK),
    rrf_weights: weights,
    relevance_weight: p.relevanceWeight,
    recency_weight: p.recencyWeight,
    now: rows.timestamp(request.now),
    bm25_k1: p.bm25K1,
    bm25_b: p.bm25B,
    budget: request.budget,
    max_hits: request.maxHits,
    filters: request.filter === null ? null : JSON.stringify(q.filterJson(request.filter)),
    ef_search: Math.trunc(efSearch),
  };
}

/** A filter's values (`f_<key>`): arrays as arrays, JSON objects as jsonb text, dates as text. */
function filterValues(entries: readonly [string, unknown][]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of entries) {
    let v: unknown = value;
    if (value instanceof Date) v = rows.timestamp(value);
    else if (Array.isArray(value)) v = [...(value as unknown[])];
    else if (value !== null && typeof value === "object") v = JSON.stringify(value);
    out[`f_${key}`] = v;
  }
  return out;
}

/** One COPY row of a memory (statements.COPY_COLUMNS' order) as INSERT values. */
function copyRow(agentId: string, r: MemoryRecord, tf: Map<string, number>, length: number): unknown[] {
  const m = r.memory as unknown as Record<string, unknown>;
  const out: unknown[] = [agentId];
  for (const column of (COPY_COLUMNS as readonly string[]).slice(1)) {
    if (column === "doc_len") out.push(length);
    else if (column === "term_freqs") out.push(JSON.stringify(Object.fromEntries(tf)));
    else if (column === "embedding") out.push(rows.vectorText(r.vector));
    else {
      const value = m[column.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase())];
      if (value instanceof Date) out.push(rows.timestamp(value));
      else if (column === "metadata") out.push(JSON.stringify(value ?? {}));
      else if (Array.isArray(value)) out.push([...(value as unknown[])]);
      else out.push(value ?? null);
    }
  }
  return out;
}

function batchDimensions(records: readonly MemoryRecord[]): Map<string, number> {
  const dims = new Map<string, number>();
  for (const r of records) {
    const name = r.memory.embedder;
    const known = dims.get(name);
    if (known !== undefined && known !== r.vector.length) {
      throw new DimensionMismatchError(`embedder ${JSON.stringify(name)}: one batch holds vectors of ${known} and ${r.vector.length} dimensions`);
    }
    dims.set(name, r.vector.length);
  }
  return dims;
}

function dimensionMismatch(embedder: string, stored: number, got: number): DimensionMismatchError {
  return new DimensionMismatchError(
    `embedder ${JSON.stringify(embedder)} stores ${stored}-dimensional vectors; got one of ${got} (a new model needs a new embedder name)`,
  );
}

function checkQueryDimensions(embedder: string, stored: number, vector: Float32Array): void {
  if (vector.length !== stored) throw dimensionMismatch(embedder, stored, vector.length);
}

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** ranking.follow_recorded */
function followRecorded(schema: string, current: Analyzer, recorded: string, datesGiven: boolean): Analyzer {
  if (recorded === current.indexName) return current;
  const dated = recorded.endsWith("+dates");
  const name = dated ? recorded.slice(0, -"+dates".length) : recorded;
  if (datesGiven || name !== current.name) {
    throw new ConfigurationError(
      "textAnalyzer",
      `schema ${JSON.stringify(schema)} holds BM25 terms of analyzer ${JSON.stringify(recorded)}, not ${JSON.stringify(current.indexName)}; ` +
        "configure that analyzer, or run `actrone-pg reindex` to rebuild the terms",
    );
  }
  return makeAnalyzer(name, dated);
}

const CONNECTION_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EPIPE", "ENOTFOUND", "57P01", "57P02", "57P03", "08000", "08003", "08006", "08001", "08004"]);

function isConnectionError(exc: unknown): boolean {
  const code = (exc as { code?: unknown } | null)?.code;
  return typeof code === "string" && CONNECTION_CODES.has(code);
}

/** A driver's error as the store's: what the server said, redacted; ours pass through. */
function translate(exc: unknown): unknown {
  if (exc instanceof ActroneError) return exc;
  const message = exc instanceof Error ? exc.message : String(exc);
  const code = (exc as { code?: unknown } | null)?.code;
  if (isConnectionError(exc) || /Connection terminated|connect ECONN/.test(message)) {
    return new StoreUnavailableError(redact(`lost the connection to PostgreSQL: ${message}`), { cause: exc });
  }
  if (code === "57014") return new StoreError(`a statement ran too long (postgresStatementTimeout) and was cancelled`, { cause: exc });
  if (code === "3F000" || code === "42P01" || code === "42883") {
    return new SchemaError(redact(`the schema is missing or behind: ${message}; run \`actrone-pg migrate\``), { cause: exc });
  }
  return new StoreError(redact(`PostgreSQL: ${message}`), { cause: exc });
}
