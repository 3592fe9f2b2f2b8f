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
import { MemoryConfig, type MemoryConfigOptions } from "./config.js";
import { createEmbedder, type Embedder } from "./embedders/index.js";
import { ActroneError, ConfigurationError, StoreError, ValidationError } from "./errors.js";
import { turnId } from "./ids.js";
import { ManagerContext, type Reranker, wrap } from "./manager/context.js";
import { Memories, type MemoryItem, type MemoryUpdate } from "./manager/memories.js";
import { Retrieval } from "./manager/retrieval.js";
import type { JsonValue, Memory, MemoryFilters, MemoryPage, RetrievedContext, Turn } from "./models.js";
import type { Store } from "./store.js";
import { createStore } from "./stores/index.js";
import { pyStrip, type TokenCounter } from "./text.js";
import * as v from "./validation.js";

export type { MemoryItem, MemoryUpdate, Reranker };

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

/** Stores turns and memories for agents and assembles their context inside a token budget. */
export class MemoryManager {
  readonly config: MemoryConfig;
  readonly store: Store;
  readonly embedder: Embedder;
  readonly reranker: Reranker | null;
  readonly #ctx: ManagerContext;
  readonly #memories: Memories;
  readonly #retrieval: Retrieval;
  readonly #built: { close?(): Promise<void> }[];
  #closed = false;

  private constructor(ctx: ManagerContext, built: { close?(): Promise<void> }[]) {
    this.#ctx = ctx;
    this.config = ctx.config;
    this.store = ctx.store;
    this.embedder = ctx.embedder;
    this.reranker = ctx.reranker;
    this.#memories = new Memories(ctx);
    this.#retrieval = new Retrieval(ctx);
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
      return new MemoryManager(new ManagerContext(config, store, embedder, reranker, tokenCounter), built);
    } catch (exc) {
      await closeAll(built).catch(() => undefined);
      throw wrap(exc, ActroneError, "MemoryManager.create");
    }
  }

  /** The cosine a memory needs: the config's, else the embedder's, else 0.7. */
  get relevanceThreshold(): number {
    return this.#ctx.threshold;
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

  // Every public method: an error that is no ActroneError becomes one (its cause kept).
  async #guard<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (exc) {
      if (exc instanceof ActroneError) throw exc;
      if (exc instanceof TypeError) throw new ValidationError(`invalid argument: ${exc.message}`, { cause: exc });
      throw wrap(exc, ActroneError, "the call");
    }
  }

  /** Tokens of `text` by the counter in force. */
  countTokens(text: string): number {
    return this.#ctx.countTokens(text);
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
      const limit = this.#ctx.config.maxTextChars;
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
        tokenCount: this.#ctx.countTurn(userMessage, assistantMessage, results),
      };
      await this.#ctx.onStore(() =>
        this.#ctx.store.appendTurn(turn, { maxTurns: this.#ctx.config.maxSessionTurns, ttlSeconds: this.#ctx.config.sessionTtlSeconds }),
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
      const n = limit === null ? this.#ctx.config.maxSessionTurns : v.checkLimit("limit", limit);
      return this.#ctx.onStore(() => this.#ctx.store.recentTurns(agentId, sessionId, { limit: n, ttlSeconds: this.#ctx.config.sessionTtlSeconds }));
    });
  }

  /** Forget the session's turns (its memories stay). */
  async clearSession(agentId: string, sessionId: string): Promise<void> {
    return this.#guard(async () => {
      v.checkId("agentId", agentId);
      v.checkId("sessionId", sessionId);
      await this.#ctx.onStore(() => this.#ctx.store.clearSession(agentId, sessionId));
    });
  }

  // -- L2 writes and lifecycle --
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
    return this.#guard(() => this.#memories.injectMemories(agentId, items));
  }

  /** Delete one of the agent's memories; false if the agent has no such memory. */
  async deleteMemory(agentId: string, memoryId: string): Promise<boolean> {
    return this.#guard(() => this.#memories.deleteMemory(agentId, memoryId));
  }

  /** The current version of one of the agent's memories, or null (also once expired). */
  async getMemory(agentId: string, memoryId: string): Promise<Memory | null> {
    return this.#guard(() => this.#memories.getMemory(agentId, memoryId));
  }

  /**
   * Write a new version of a memory and return it; the replaced version is kept. Fields not
   * given keep their values; the content is embedded again. A missing or expired memory raises
   * {@link MemoryNotFoundError}.
   */
  async updateMemory(agentId: string, memoryId: string, update: MemoryUpdate = {}): Promise<Memory> {
    return this.#guard(() => this.#memories.updateMemory(agentId, memoryId, update));
  }

  /** Every version of the memory, oldest first; `[]` if there is none (or it expired). */
  async memoryHistory(agentId: string, memoryId: string): Promise<Memory[]> {
    return this.#guard(() => this.#memories.memoryHistory(agentId, memoryId));
  }

  /**
   * A page of the agent's current memories, newest first (`createdAt`, then id). Pass the
   * page's `nextCursor` back as `cursor` for the next page (null after the last).
   */
  async listMemories(
    agentId: string,
    options: { filters?: MemoryFilters | null; limit?: number; cursor?: string | null } = {},
  ): Promise<MemoryPage> {
    return this.#guard(() => this.#memories.listMemories(agentId, options));
  }

  /** How many memories the agent has. */
  async countMemories(agentId: string): Promise<number> {
    return this.#guard(() => this.#memories.countMemories(agentId));
  }

  /** Remove every turn, session, memory and statistic of the agent. */
  async eraseAgent(agentId: string): Promise<void> {
    return this.#guard(() => this.#memories.eraseAgent(agentId));
  }

  /** Delete up to `limit` memories whose `expiresAt` has passed (every agent); returns how many. */
  async sweepExpired(limit = 10_000): Promise<number> {
    return this.#guard(() => this.#memories.sweepExpired(limit));
  }

  // -- retrieval --
  /** The agent's memories most relevant to `query`, best first (no token budget). */
  async searchMemories(
    agentId: string,
    query: string,
    options: { limit?: number; explain?: boolean; filters?: MemoryFilters | null } = {},
  ): Promise<Memory[]> {
    return this.#guard(() => this.#retrieval.searchMemories(agentId, query, options));
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
    return this.#guard(() => this.#retrieval.retrieveContext(agentId, sessionId, query, tokenBudget, options));
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
