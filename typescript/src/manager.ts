/**
 * MemoryManager: the orchestrator between the caller, the embedder, the store and the budget
 * (Python's `actrone_pg.MemoryManager`, its names in camelCase).
 *
 * It checks every argument before touching a store, reads L1 while the query is embedded and L2
 * searched, optionally reranks, and packs both shares of the token budget. It depends only on
 * the {@link Store} interface. Every public method rejects only with {@link ActroneError}
 * subclasses: an error of a store, embedder, reranker or token counter arrives as the matching
 * class, the original as `cause`.
 */
import { analyzer, type Analyzer } from "./analyzer.js";
import { packTurns, splitBudget } from "./budget.js";
import { MemoryConfig, type MemoryConfigOptions } from "./config.js";
import { asVectors, createEmbedder, type Embedder } from "./embedders/index.js";
import {
  ActroneError,
  ConfigurationError,
  EmbedderError,
  MemoryNotFoundError,
  RerankerError,
  StoreError,
  ValidationError,
} from "./errors.js";
import { parseFilters, type MemoryFilter } from "./filters.js";
import { decodeCursor, encodeCursor, memoryId, turnId } from "./ids.js";
import type { JsonObject, JsonValue, Memory, MemoryFilters, MemoryPage, RetrievedContext, ScoredMemory, Turn } from "./models.js";
import { inheritFromPredecessors, NEIGHBOUR_POOL, packHits, rerank } from "./pipeline.js";
import { DEFAULT_RELEVANCE_THRESHOLD, micros, type RankingParams } from "./ranking.js";
import type { MemoryRecord, PackedSearch, SearchRequest, Store } from "./store.js";
import { createStore } from "./stores/index.js";
import { heuristicTokenCount, pyStrip, pythonJsonDumps, type TokenCounter } from "./text.js";
import * as v from "./validation.js";

/** Rescores (query, text) pairs: a cross-encoder or any other reranker. */
export interface Reranker {
  /** One score per text, higher is better. */
  score(query: string, texts: readonly string[]): Promise<readonly number[]>;
  close?(): Promise<void>;
}

/** What {@link MemoryManager.create} takes; every part is optional. */
export interface CreateOptions {
  /** A {@link MemoryConfig}, or its fields (read on top of the `ACTRONE_*` variables). */
  config?: MemoryConfig | MemoryConfigOptions;
  /** A store of your own (left open by `close()`); by default the one `config.backend` names. */
  store?: Store;
  /** An embedder of your own (left open by `close()`); by default `config.embeddingProvider`'s. */
  embedder?: Embedder;
  /** Reranks the top `rerankTopK` memories of every search. */
  reranker?: Reranker;
  /** Counts tokens in the caller's model; by default `ceil(characters / 4)`. */
  tokenCounter?: TokenCounter;
}

/** One memory to inject: its content and optional fields. */
export interface MemoryItem {
  content: string;
  sessionId?: string | null;
  contentType?: string;
  importance?: number;
  tags?: readonly string[];
  source?: string;
  sensitivity?: string;
  createdAt?: Date | null;
  metadata?: JsonObject | null;
  /** Replace the agent's memory with this id (by default the id derives from agent, session and content). */
  memoryId?: string | null;
  /** The moment from which the memory is never returned (must be in the future). */
  expiresAt?: Date | null;
  sourceTurnIds?: readonly string[];
  /** Text embedded before the content but not stored (the turn a reply answers). */
  embeddingContext?: string | null;
}

/** The fields of {@link MemoryManager.updateMemory}; those not given keep their values. */
export interface MemoryUpdate {
  content?: string;
  tags?: readonly string[];
  importance?: number;
  metadata?: JsonObject;
  contentType?: string;
  expiresAt?: Date;
  /** Remove the expiry (not with `expiresAt`). */
  clearExpiry?: boolean;
}

const ITEM_FIELDS = new Set([
  "content",
  "sessionId",
  "contentType",
  "importance",
  "tags",
  "source",
  "sensitivity",
  "createdAt",
  "metadata",
  "memoryId",
  "expiresAt",
  "sourceTurnIds",
  "embeddingContext",
]);

function wrap(exc: unknown, Kind: new (message: string, options?: { cause?: unknown }) => ActroneError, what: string): ActroneError {
  if (exc instanceof ActroneError) return exc;
  const message = exc instanceof Error ? `${exc.name}: ${exc.message}` : String(exc);
  return new Kind(`${what} failed: ${message}`, { cause: exc });
}

/** Stores turns and memories for agents and assembles their context inside a token budget. */
export class MemoryManager {
  readonly config: MemoryConfig;
  readonly store: Store;
  readonly embedder: Embedder;
  readonly reranker: Reranker | null;
  readonly #count: TokenCounter;
  readonly #customCounter: boolean;
  readonly #redacted: ReadonlySet<string>;
  readonly #threshold: number;
  readonly #params: RankingParams;
  readonly #analyzer: Analyzer;
  readonly #built: { close?(): Promise<void> }[];
  readonly #queryCache = new Map<string, Float32Array>();
  #closed = false;

  private constructor(
    config: MemoryConfig,
    store: Store,
    embedder: Embedder,
    reranker: Reranker | null,
    tokenCounter: TokenCounter | null,
    built: { close?(): Promise<void> }[],
  ) {
    this.config = config;
    this.store = store;
    this.embedder = embedder;
    this.reranker = reranker;
    this.#count = tokenCounter ?? heuristicTokenCount;
    this.#customCounter = tokenCounter !== null;
    this.#redacted = new Set(config.redactSensitivities);
    this.#threshold = config.relevanceThreshold ?? embedder.relevanceThreshold ?? DEFAULT_RELEVANCE_THRESHOLD;
    this.#params = {
      hybrid: config.hybridRetrieval,
      rrfK: config.rrfK,
      rrfWeights: config.rrfWeights,
      relevanceWeight: config.relevanceWeight,
      recencyWeight: config.recencyWeight,
      bm25K1: config.bm25K1,
      bm25B: config.bm25B,
    };
    this.#analyzer = analyzer(config.textAnalyzer);
    this.#built = built;
  }

  /**
   * Build a manager: the configured (or given) store, embedder and optional reranker. The store
   * is set up before this returns. The manager closes what it builds and only that: a `store`,
   * `embedder` or `reranker` passed in is left open for its owner.
   */
  static async create(options: CreateOptions = {}): Promise<MemoryManager> {
    const built: { close?(): Promise<void> }[] = [];
    try {
      if (options === null || typeof options !== "object") throw new ConfigurationError("options", "expected an object");
      const { store: givenStore, embedder: givenEmbedder, reranker = null, tokenCounter = null } = options;
      const config = options.config instanceof MemoryConfig ? options.config : new MemoryConfig(options.config ?? {});
      if (tokenCounter !== null && typeof tokenCounter !== "function") {
        throw new ConfigurationError("tokenCounter", "must be a function taking a string");
      }
      let embedder = givenEmbedder;
      if (embedder === undefined) {
        embedder = await createEmbedder(config);
        built.push(embedder);
      }
      checkEmbedder(embedder);
      if (reranker !== null && typeof (reranker as Partial<Reranker>).score !== "function") {
        throw new ConfigurationError("reranker", "must have an async score(query, texts) method");
      }
      if (reranker === null && config.rerankEnabled) {
        throw new ConfigurationError(
          "rerankEnabled",
          "TypeScript has no built-in cross-encoder: pass a reranker ({ score(query, texts) }) to MemoryManager.create()",
        );
      }
      let store = givenStore;
      if (store === undefined) {
        store = await createStore(config);
        built.push(store);
      }
      try {
        await store.setup();
      } catch (exc) {
        throw wrap(exc, StoreError, "store setup");
      }
      return new MemoryManager(config, store, embedder, reranker, tokenCounter, built);
    } catch (exc) {
      await closeAll(built).catch(() => undefined);
      throw wrap(exc, ActroneError, "MemoryManager.create");
    }
  }

  /** The cosine a memory needs: the config's, else the embedder's, else 0.7. */
  get relevanceThreshold(): number {
    return this.#threshold;
  }

  /** The name of the store's backend. */
  get backend(): string {
    return this.store.backend;
  }

  /** Close what {@link MemoryManager.create} built; safe to call twice. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    try {
      await closeAll(this.#built);
    } catch (exc) {
      throw wrap(exc, StoreError, "close");
    }
  }

  /** `await using mm = await createMemoryManager(...)` closes the manager on scope exit. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  // -- helpers --
  async #guard<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (exc) {
      if (exc instanceof ActroneError) throw exc;
      if (exc instanceof TypeError) throw new ValidationError(`invalid argument: ${exc.message}`, { cause: exc });
      throw wrap(exc, ActroneError, "the call");
    }
  }

  async #onStore<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (exc) {
      throw wrap(exc, StoreError, `the ${this.store.backend} store`);
    }
  }

  /** Tokens of `text` by the counter in force. */
  countTokens(text: string): number {
    if (typeof text !== "string") throw new ValidationError(`text must be a string, got ${typeof text}`);
    let n: unknown;
    try {
      n = this.#count(text);
    } catch (exc) {
      if (exc instanceof ActroneError) throw exc;
      throw new ConfigurationError("tokenCounter", `threw ${(exc as Error).name}: ${(exc as Error).message}`, { cause: exc });
    }
    if (typeof n !== "number" || !Number.isInteger(n) || n < 0) {
      throw new ConfigurationError("tokenCounter", `must return a whole number ≥ 0, got ${String(n)}`);
    }
    return n;
  }

  #countTurn(user: string, assistant: string, toolResults: JsonValue[] | null): number {
    let tokens = this.countTokens(user) + this.countTokens(assistant);
    if (toolResults !== null && toolResults.length > 0) tokens += this.countTokens(pythonJsonDumps(toolResults));
    return tokens;
  }

  async #embed(texts: string[]): Promise<Float32Array[]> {
    const size = this.config.embeddingBatchSize;
    const out: Float32Array[] = [];
    for (let start = 0; start < texts.length; start += size) {
      const chunk = texts.slice(start, start + size);
      let raw: unknown;
      try {
        raw = await this.embedder.embedBatch(chunk);
      } catch (exc) {
        throw wrap(exc, EmbedderError, `embedder ${JSON.stringify(this.embedder.name)}`);
      }
      out.push(...asVectors(raw, chunk.length, this.embedder.dimensions, this.embedder.name));
    }
    return out;
  }

  #shown(memory: Memory, changes: Partial<Memory> = {}): Memory {
    if (this.#redacted.has(memory.sensitivity)) changes = { ...changes, content: `[redacted: ${memory.sensitivity}]` };
    return Object.keys(changes).length > 0 ? { ...memory, ...changes } : memory;
  }

  #live(memory: Memory | null, now: Date): Memory | null {
    if (memory === null || (memory.expiresAt !== null && memory.expiresAt.getTime() <= now.getTime())) return null;
    return memory;
  }

  // -- L1 --
  /**
   * Append a turn to the session and return it. A turn counts `userMessage` and
   * `assistantMessage` (and the JSON of `toolResults`, if any) together. Pass the same `turnId`
   * when retrying after a timeout: the store keeps one copy.
   */
  async storeTurn(
    agentId: string,
    sessionId: string,
    userMessage: string,
    assistantMessage: string,
    options: { toolResults?: readonly unknown[] | null; turnId?: string } = {},
  ): Promise<Turn> {
    return this.#guard(async () => {
      const limit = this.config.maxTextChars;
      v.checkId("agentId", agentId);
      v.checkId("sessionId", sessionId);
      v.checkText("userMessage", userMessage, limit, { allowEmpty: true });
      v.checkText("assistantMessage", assistantMessage, limit, { allowEmpty: true });
      if (!pyStrip(userMessage) && !pyStrip(assistantMessage)) {
        throw new ValidationError("a turn needs a userMessage or an assistantMessage");
      }
      const { toolResults = null } = options ?? {};
      let results: JsonValue[] | null = null;
      if (toolResults !== null) {
        if (typeof toolResults === "string" || !Array.isArray(toolResults)) {
          throw new ValidationError("toolResults must be an array of JSON-serialisable values");
        }
        results = v.checkJson("toolResults", [...toolResults], limit) as JsonValue[];
      }
      const id = options?.turnId === undefined ? turnId() : v.checkId("turnId", options.turnId);
      const turn: Turn = {
        id,
        agentId,
        sessionId,
        userMessage,
        assistantMessage,
        toolResults: results,
        createdAt: new Date(),
        tokenCount: this.#countTurn(userMessage, assistantMessage, results),
      };
      await this.#onStore(() =>
        this.store.appendTurn(turn, { maxTurns: this.config.maxSessionTurns, ttlSeconds: this.config.sessionTtlSeconds }),
      );
      return turn;
    });
  }

  /** The session's newest turns (at most `maxSessionTurns`), oldest first. */
  async getRecentTurns(agentId: string, sessionId: string, options: { limit?: number | null } = {}): Promise<Turn[]> {
    return this.#guard(async () => {
      v.checkId("agentId", agentId);
      v.checkId("sessionId", sessionId);
      const limit = options?.limit ?? null;
      const n = limit === null ? this.config.maxSessionTurns : v.checkLimit("limit", limit);
      return this.#onStore(() => this.store.recentTurns(agentId, sessionId, { limit: n, ttlSeconds: this.config.sessionTtlSeconds }));
    });
  }

  /** Forget the session's turns (its memories stay). */
  async clearSession(agentId: string, sessionId: string): Promise<void> {
    return this.#guard(async () => {
      v.checkId("agentId", agentId);
      v.checkId("sessionId", sessionId);
      await this.#onStore(() => this.store.clearSession(agentId, sessionId));
    });
  }

  // -- L2 writes --
  /**
   * Store one long-term memory and return its id. Without `memoryId` the id derives from the
   * agent, session and content (as in Python), so injecting the same content again replaces it.
   */
  async injectMemory(agentId: string, content: string, options: Omit<MemoryItem, "content"> = {}): Promise<string> {
    return this.#guard(async () => {
      if (options === null || typeof options !== "object") throw new ValidationError("options must be an object");
      const ids = await this.injectMemories(agentId, [{ ...options, content }]);
      return ids[0]!;
    });
  }

  /**
   * Store many memories at once: all land or none does. Returns their ids in order. Each item
   * is a string (the content) or a {@link MemoryItem}.
   */
  async injectMemories(agentId: string, items: readonly (MemoryItem | string)[]): Promise<string[]> {
    return this.#guard(async () => {
      v.checkId("agentId", agentId);
      if (typeof items === "string" || !Array.isArray(items)) {
        throw new ValidationError("items must be an array of memories (strings or objects)");
      }
      const now = new Date();
      const built = items.map((item, i) => this.#buildMemory(agentId, item, i, now));
      if (built.length === 0) return [];
      const unique = new Map<string, [Memory, string]>();
      for (const [m, embedded] of built) {
        const earlier = unique.get(m.id);
        if (earlier !== undefined && earlier[0].content !== m.content) {
          throw new ValidationError(`memory id ${JSON.stringify(m.id)} is given twice in one batch with different content`);
        }
        unique.set(m.id, [m, embedded]);
      }
      const entries = [...unique.values()];
      const vectors = await this.#embed(entries.map(([, e]) => e));
      const records: MemoryRecord[] = entries.map(([memory], i) => ({ memory, vector: vectors[i]! }));
      await this.#onStore(() => this.store.upsertMemories(records));
      return built.map(([m]) => m.id);
    });
  }

  #buildMemory(agentId: string, raw: MemoryItem | string, index: number, now: Date): [Memory, string] {
    const item: Record<string, unknown> = typeof raw === "string" ? { content: raw } : (raw as unknown as Record<string, unknown>);
    if (item === null || typeof item !== "object" || Array.isArray(item)) {
      throw new ValidationError(`item ${index}: expected a string or an object, got ${item === null ? "null" : typeof item}`);
    }
    const unknown = Object.keys(item)
      .filter((k) => !ITEM_FIELDS.has(k) && item[k] !== undefined)
      .sort();
    if (unknown.length > 0) throw new ValidationError(`item ${index}: unknown field(s) ${JSON.stringify(unknown)}`);
    if (item.content === undefined) throw new ValidationError(`item ${index}: 'content' is required`);
    const limit = this.config.maxTextChars;
    const given = <T>(key: string, fallback: T): unknown => (item[key] === undefined || item[key] === null ? fallback : item[key]);
    try {
      const content = v.checkText("content", item.content, limit);
      const sessionId = given("sessionId", null);
      if (sessionId !== null) v.checkId("sessionId", sessionId);
      const created = given("createdAt", null);
      const createdAt = created === null ? now : v.checkDate("createdAt", created);
      const explicitId = given("memoryId", null);
      const id = explicitId === null ? memoryId(agentId, sessionId as string | null, content) : v.checkId("memoryId", explicitId);
      const context = given("embeddingContext", null);
      const embedded = context === null ? content : `${v.checkText("embeddingContext", context, limit)}\n${content}`;
      const memory: Memory = {
        id,
        agentId,
        sessionId: sessionId as string | null,
        content,
        contentType: v.checkLabel("contentType", given("contentType", "injected")),
        importance: v.checkImportance(given("importance", 0.5)),
        tags: v.checkTags(given("tags", [])),
        source: v.checkLabel("source", given("source", "injected")),
        sensitivity: v.checkLabel("sensitivity", given("sensitivity", "none")),
        createdAt,
        metadata: v.checkMetadata(given("metadata", null), limit),
        embedder: this.embedder.name,
        tokenCount: this.countTokens(content),
        expiresAt: checkExpiry(given("expiresAt", null), now),
        sourceTurnIds: v.checkTurnIds(given("sourceTurnIds", [])),
        version: 1,
        validFrom: now,
        validTo: null,
        explain: null,
      };
      return [memory, embedded];
    } catch (exc) {
      if (exc instanceof ValidationError) {
        const Kind = exc.constructor as new (message: string) => ValidationError;
        throw new Kind(`item ${index}: ${exc.message}`);
      }
      throw exc;
    }
  }

  /** Delete one of the agent's memories; false if the agent has no such memory. */
  async deleteMemory(agentId: string, memoryId: string): Promise<boolean> {
    return this.#guard(async () => {
      v.checkId("agentId", agentId);
      v.checkId("memoryId", memoryId);
      return this.#onStore(() => this.store.deleteMemory(agentId, memoryId));
    });
  }

  /** The current version of one of the agent's memories, or null (also once expired). */
  async getMemory(agentId: string, memoryId: string): Promise<Memory | null> {
    return this.#guard(async () => {
      v.checkId("agentId", agentId);
      v.checkId("memoryId", memoryId);
      const found = this.#live(await this.#onStore(() => this.store.getMemory(agentId, memoryId)), new Date());
      return found === null ? null : this.#shown(found);
    });
  }

  /**
   * Write a new version of a memory and return it; the replaced version is kept. Fields not
   * given keep their values; the content is embedded again. A missing or expired memory raises
   * {@link MemoryNotFoundError}.
   */
  async updateMemory(agentId: string, memoryId: string, update: MemoryUpdate = {}): Promise<Memory> {
    return this.#guard(async () => {
      v.checkId("agentId", agentId);
      v.checkId("memoryId", memoryId);
      if (update === null || typeof update !== "object") throw new ValidationError("the update must be an object");
      const limit = this.config.maxTextChars;
      const changes: { -readonly [K in keyof Memory]?: Memory[K] } = {};
      if (update.content !== undefined) changes.content = v.checkText("content", update.content, limit);
      if (update.tags !== undefined) changes.tags = v.checkTags(update.tags);
      if (update.importance !== undefined) changes.importance = v.checkImportance(update.importance);
      if (update.metadata !== undefined) changes.metadata = v.checkMetadata(update.metadata, limit);
      if (update.contentType !== undefined) changes.contentType = v.checkLabel("contentType", update.contentType);
      const clear = update.clearExpiry ?? false;
      if (typeof clear !== "boolean") throw new ValidationError(`clearExpiry must be true or false, got ${String(clear)}`);
      if (clear && update.expiresAt !== undefined) {
        throw new ValidationError("pass either expiresAt (a new expiry) or clearExpiry: true (no expiry), not both");
      }
      if (update.expiresAt !== undefined) changes.expiresAt = checkExpiry(update.expiresAt, new Date());
      if (clear) changes.expiresAt = null;
      const found = this.#live(await this.#onStore(() => this.store.getMemory(agentId, memoryId)), new Date());
      if (found === null) throw new MemoryNotFoundError(`agent ${JSON.stringify(agentId)} has no memory ${JSON.stringify(memoryId)}`);
      const embedded = changes.content ?? found.content;
      const [prepared] = await this.#embed([embedded]);
      const build = async (current: Memory): Promise<MemoryRecord> => {
        const now = new Date();
        if (this.#live(current, now) === null) {
          throw new MemoryNotFoundError(`agent ${JSON.stringify(agentId)} has no memory ${JSON.stringify(memoryId)}`);
        }
        const text = changes.content ?? current.content;
        const vector = text === embedded ? prepared! : (await this.#embed([text]))[0]!;
        const validFrom = current.validFrom !== null && current.validFrom.getTime() > now.getTime() ? current.validFrom : now;
        const memory: Memory = {
          ...current,
          ...changes,
          embedder: this.embedder.name,
          tokenCount: this.countTokens(text),
          version: current.version + 1,
          validFrom,
          validTo: null,
          explain: null,
        };
        return { memory, vector };
      };
      const written = await this.#onStore(() => this.store.updateMemory(agentId, memoryId, build));
      if (written === null) throw new MemoryNotFoundError(`agent ${JSON.stringify(agentId)} has no memory ${JSON.stringify(memoryId)}`);
      return this.#shown(written);
    });
  }

  /** Every version of the memory, oldest first; `[]` if there is none (or it expired). */
  async memoryHistory(agentId: string, memoryId: string): Promise<Memory[]> {
    return this.#guard(async () => {
      v.checkId("agentId", agentId);
      v.checkId("memoryId", memoryId);
      const versions = await this.#onStore(() => this.store.memoryHistory(agentId, memoryId));
      if (versions.length === 0 || this.#live(versions[versions.length - 1]!, new Date()) === null) return [];
      return versions.map((m) => this.#shown(m));
    });
  }

  /**
   * A page of the agent's current memories, newest first (`createdAt`, then id). Pass the
   * page's `nextCursor` back as `cursor` for the next page (null after the last).
   */
  async listMemories(
    agentId: string,
    options: { filters?: MemoryFilters | null; limit?: number; cursor?: string | null } = {},
  ): Promise<MemoryPage> {
    return this.#guard(async () => {
      v.checkId("agentId", agentId);
      const { filters = null, limit = 100, cursor = null } = options ?? {};
      v.checkLimit("limit", limit);
      const filter = parseFilters(filters, this.config.maxTextChars);
      const after = cursor === null ? null : decodeCursor(cursor);
      const found = await this.#onStore(() => this.store.listMemories(agentId, { now: new Date(), limit: limit + 1, after, filter }));
      const items = found.slice(0, limit);
      const last = items[items.length - 1];
      return {
        items: items.map((m) => this.#shown(m)),
        nextCursor: found.length > limit && last !== undefined ? encodeCursor(micros(last.createdAt), last.id) : null,
      };
    });
  }

  /** How many memories the agent has. */
  async countMemories(agentId: string): Promise<number> {
    return this.#guard(async () => {
      v.checkId("agentId", agentId);
      return this.#onStore(() => this.store.countMemories(agentId));
    });
  }

  /** Remove every turn, session, memory and statistic of the agent. */
  async eraseAgent(agentId: string): Promise<void> {
    return this.#guard(async () => {
      v.checkId("agentId", agentId);
      await this.#onStore(() => this.store.eraseAgent(agentId));
    });
  }

  /** Delete up to `limit` memories whose `expiresAt` has passed (every agent); returns how many. */
  async sweepExpired(limit = 10_000): Promise<number> {
    return this.#guard(async () => {
      v.checkLimit("limit", limit);
      return this.#onStore(() => this.store.sweepExpiredMemories({ limit }));
    });
  }

  // -- retrieval --
  /** The agent's memories most relevant to `query`, best first (no token budget). */
  async searchMemories(
    agentId: string,
    query: string,
    options: { limit?: number; explain?: boolean; filters?: MemoryFilters | null } = {},
  ): Promise<Memory[]> {
    return this.#guard(async () => {
      v.checkId("agentId", agentId);
      v.checkText("query", query, this.config.maxTextChars);
      const { limit = 10, explain = false, filters = null } = options ?? {};
      v.checkLimit("limit", limit);
      const filter = parseFilters(filters, this.config.maxTextChars);
      const packed = await this.#search(agentId, query, null, limit, filter);
      return packed.hits.map((h) => this.#present(h, explain));
    });
  }

  /**
   * Recent turns and relevant memories for `query`, each inside its share of the budget. L1 is
   * read while the query is embedded and L2 searched; `filters` restricts L2.
   */
  async retrieveContext(
    agentId: string,
    sessionId: string,
    query: string,
    tokenBudget: number,
    options: { explain?: boolean; filters?: MemoryFilters | null } = {},
  ): Promise<RetrievedContext> {
    return this.#guard(async () => {
      v.checkId("agentId", agentId);
      v.checkId("sessionId", sessionId);
      v.checkText("query", query, this.config.maxTextChars);
      v.checkBudget(tokenBudget);
      const { explain = false, filters = null } = options ?? {};
      const filter = parseFilters(filters, this.config.maxTextChars);
      const started = performance.now();
      const shares = splitBudget(tokenBudget, this.config.budgetFractionSession, this.config.budgetFractionEpisodic);
      const l1Options = { limit: this.config.maxSessionTurns, ttlSeconds: this.config.sessionTtlSeconds };
      let turns: Turn[];
      let packed: PackedSearch;
      const fetchContext = this.store.fetchContext?.bind(this.store);
      if (fetchContext !== undefined) {
        const [asked, limit, repack] = this.#l2Asks(shares.episodic, null);
        const request = await this.#request(agentId, query, asked, limit, filter);
        [turns, packed] = await this.#onStore(() => fetchContext(agentId, sessionId, { ...l1Options, request }));
        if (repack) packed = await this.#l2Repack(request, packed, shares.episodic, null);
      } else {
        [turns, packed] = await Promise.all([
          this.#onStore(() => this.store.recentTurns(agentId, sessionId, l1Options)),
          this.#search(agentId, query, shares.episodic, null, filter),
        ]);
      }
      const [recent, sessionUsed] = packTurns([...turns].reverse(), (t) => this.#turnTokens(t), shares.session);
      return {
        agentId,
        sessionId,
        query,
        recentTurns: recent,
        episodicMemories: packed.hits.map((h) => this.#present(h, explain)),
        tokenBudget,
        sessionBudget: shares.session,
        episodicBudget: shares.episodic,
        sessionTokens: sessionUsed,
        episodicTokens: packed.tokens,
        retrievalMs: performance.now() - started,
        relevanceThreshold: this.#threshold,
        candidatesConsidered: packed.candidatesConsidered,
      };
    });
  }

  #turnTokens(turn: Turn): number {
    // A custom counter recounts: the stored count may come from another counter.
    if (!this.#customCounter) return turn.tokenCount;
    return this.#countTurn(turn.userMessage, turn.assistantMessage, turn.toolResults);
  }

  #memoryTokens(hit: ScoredMemory): number {
    return this.#customCounter ? this.countTokens(hit.memory.content) : hit.memory.tokenCount;
  }

  #present(hit: ScoredMemory, explain: boolean): Memory {
    const m = hit.memory;
    if (!explain && m.explain === null && !this.#customCounter && !this.#redacted.has(m.sensitivity)) return m;
    return this.#shown(m, { tokenCount: this.#memoryTokens(hit), explain: explain ? hit.explain : null });
  }

  get #neighbourWeight(): number {
    return this.config.hybridRetrieval ? this.config.neighbourWeight : 0.0;
  }

  /** What to ask the store for: [budget, hit limit, whether the manager packs itself]. */
  #l2Asks(budget: number | null, maxHits: number | null): [number | null, number | null, boolean] {
    const reorder = this.reranker !== null;
    const neighbours = this.#neighbourWeight > 0.0;
    if (!(reorder || neighbours || (budget !== null && this.#customCounter))) return [budget, maxHits, false];
    let limit: number | null = null;
    if (reorder) limit = Math.max(this.config.rerankTopK, neighbours ? NEIGHBOUR_POOL : 0);
    else if (neighbours && !(budget !== null && this.#customCounter)) limit = Math.max(NEIGHBOUR_POOL, maxHits ?? 0);
    return [null, limit, true];
  }

  async #search(agentId: string, query: string, budget: number | null, maxHits: number | null, filter: MemoryFilter | null): Promise<PackedSearch> {
    const [asked, limit, repack] = this.#l2Asks(budget, maxHits);
    const request = await this.#request(agentId, query, asked, limit, filter);
    const found = await this.#onStore(() => this.store.search(request));
    return repack ? this.#l2Repack(request, found, budget, maxHits) : found;
  }

  async #l2Repack(request: SearchRequest, found: PackedSearch, budget: number | null, maxHits: number | null): Promise<PackedSearch> {
    let hits = found.hits;
    const weight = this.#neighbourWeight;
    if (weight > 0.0) hits = [...inheritFromPredecessors(hits.slice(0, NEIGHBOUR_POOL), weight), ...hits.slice(NEIGHBOUR_POOL)];
    if (this.reranker !== null && hits.length > 0) hits = await this.#rerank(request.query, hits);
    let packed = packHits(hits, (h) => this.#memoryTokens(h), budget, maxHits);
    if (this.reranker !== null) return packed;
    if (budget !== null && request.maxHits !== null && found.hits.length === request.maxHits && packed.hits.length === hits.length) {
      // A budget that holds every hit asked for may hold more: the rest, in fused order.
      const rest = await this.#onStore(() => this.store.search({ ...request, maxHits: null }));
      packed = packHits([...hits, ...rest.hits.slice(hits.length)], (h) => this.#memoryTokens(h), budget);
    }
    return { ...packed, candidatesConsidered: found.candidatesConsidered };
  }

  async #rerank(query: string, hits: readonly ScoredMemory[]): Promise<ScoredMemory[]> {
    const top = hits.slice(0, this.config.rerankTopK);
    let raw: unknown;
    try {
      raw = await this.reranker!.score(query, top.map((h) => h.memory.content));
    } catch (exc) {
      throw wrap(exc, RerankerError, "the reranker");
    }
    const scores = Array.isArray(raw) || ArrayBuffer.isView(raw) ? Array.from(raw as ArrayLike<unknown>) : null;
    if (scores === null || !scores.every((s) => typeof s === "number")) {
      throw new RerankerError("the reranker returned something that is not a list of numbers");
    }
    if (scores.length !== top.length || !(scores as number[]).every(Number.isFinite)) {
      throw new RerankerError(`the reranker returned ${scores.length} scores for ${top.length} texts, or non-finite ones`);
    }
    return rerank(top, scores as number[]);
  }

  async #request(agentId: string, query: string, budget: number | null, maxHits: number | null, filter: MemoryFilter | null): Promise<SearchRequest> {
    return {
      agentId,
      query,
      terms: this.#analyzer.queryTerms(query, { dropQuestionWords: this.config.dropQuestionWords }),
      vector: await this.#embedQuery(query),
      embedder: this.embedder.name,
      threshold: this.#threshold,
      limit: this.config.maxEpisodicMemories,
      params: this.#params,
      now: new Date(),
      budget,
      maxHits,
      filter,
    };
  }

  async #embedQuery(query: string): Promise<Float32Array> {
    const cached = this.#queryCache.get(query);
    if (cached !== undefined) {
      this.#queryCache.delete(query);
      this.#queryCache.set(query, cached);
      return cached;
    }
    const [vector] = await this.#embed([query]);
    this.#queryCache.set(query, vector!);
    if (this.#queryCache.size > this.config.queryCacheSize) this.#queryCache.delete(this.#queryCache.keys().next().value!);
    return vector!;
  }
}

/**
 * A manager for `await using`: `await using mm = await createMemoryManager({ config })` closes
 * it when the scope ends. Takes the options of {@link MemoryManager.create}.
 */
export async function createMemoryManager(options: CreateOptions = {}): Promise<MemoryManager> {
  return MemoryManager.create(options);
}

function checkEmbedder(embedder: Embedder): void {
  const { name, dimensions, relevanceThreshold } = embedder as Partial<Embedder>;
  if (typeof name !== "string" || !name.trim()) throw new ConfigurationError("embedder", "must have a non-empty string property 'name'");
  if (typeof dimensions !== "number" || !Number.isInteger(dimensions) || dimensions < 1) {
    throw new ConfigurationError("embedder", "must have an integer property 'dimensions' ≥ 1");
  }
  if (relevanceThreshold !== null && relevanceThreshold !== undefined && !(typeof relevanceThreshold === "number" && relevanceThreshold > 0 && relevanceThreshold < 1)) {
    throw new ConfigurationError("embedder", "relevanceThreshold must be null or lie in (0, 1)");
  }
  if (typeof (embedder as Partial<Embedder>).embedBatch !== "function") {
    throw new ConfigurationError("embedder", "must have an async embedBatch(texts) method");
  }
}

function checkExpiry(value: unknown, now: Date): Date | null {
  if (value === null || value === undefined) return null;
  const expires = v.checkDate("expiresAt", value);
  if (expires.getTime() <= now.getTime()) {
    throw new ValidationError(
      `expiresAt ${expires.toISOString()} is not in the future; a memory that expired already would never be returned (omit it, or pass a later time)`,
    );
  }
  return expires;
}

async function closeAll(components: readonly { close?(): Promise<void> }[]): Promise<void> {
  let error: unknown = null;
  for (const component of [...components].reverse()) {
    try {
      await component.close?.();
    } catch (exc) {
      error ??= exc;
    }
  }
  if (error !== null) throw error;
}
