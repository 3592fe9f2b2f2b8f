/**
 * The store interface: what the manager needs of a backend (the part of Python's
 * `actrone_pg.stores.base.Store` protocol the TypeScript manager calls). The manager talks to a
 * store only through it. Every method is scoped by `agentId`: none reads, changes or deletes
 * another agent's data, whatever ids it is given.
 *
 * Inputs arrive checked (ids non-blank, no NUL, finite unit-length float32 vectors of the
 * embedder's dimensions); a store must still refuse to mix vectors of different dimensions
 * under one embedder name ({@link DimensionMismatchError}).
 */
import type { MemoryFilter } from "./filters.js";
import type { Memory, ScoredMemory, Turn } from "./models.js";
import type { RankingParams } from "./ranking.js";

/** A memory to write, with its unit-length embedding. */
export interface MemoryRecord {
  readonly memory: Memory;
  readonly vector: Float32Array;
}

/** One L2 search: admission, the three rankings, fusion and packing, for one agent. */
export interface SearchRequest {
  readonly agentId: string;
  readonly query: string;
  /** The query's distinct BM25 terms, in order. */
  readonly terms: readonly string[];
  readonly vector: Float32Array;
  readonly embedder: string;
  readonly threshold: number;
  /** At most this many admitted candidates (`maxEpisodicMemories`). */
  readonly limit: number;
  readonly params: RankingParams;
  readonly now: Date;
  /** Tokens the hits may take (each costs its stored `tokenCount`); null: no bound. */
  readonly budget: number | null;
  /** At most this many hits; null: no bound. */
  readonly maxHits: number | null;
  readonly filter: MemoryFilter | null;
}

/** The ranked memories that fit a request's budget, and how many candidates were ranked. */
export interface PackedSearch {
  readonly hits: ScoredMemory[];
  readonly candidatesConsidered: number;
  readonly tokens: number;
}

/** What {@link Store.updateMemory} is given: the current version in, the new record out. */
export type BuildVersion = (current: Memory) => Promise<MemoryRecord>;

/** Persistence for L1 (turns) and L2 (memories, vectors, search). */
export interface Store {
  /** Short backend name ("memory", "postgres"). */
  readonly backend: string;

  /** Connect (and create the schema, where the backend does); called once before first use. */
  setup(): Promise<void>;
  /** Release connections. Calling it twice is harmless. */
  close(): Promise<void>;

  /**
   * Append `turn` to its session, keeping the newest `maxTurns`. Idempotent by `turn.id`. The
   * session's expiry moves to `ttlSeconds` from now; a session already expired starts empty.
   */
  appendTurn(turn: Turn, options: { maxTurns: number; ttlSeconds: number }): Promise<void>;
  /** The newest `limit` turns of a live session, oldest first; `[]` if none or expired. */
  recentTurns(agentId: string, sessionId: string, options: { limit: number; ttlSeconds: number }): Promise<Turn[]>;
  /** Remove the session and all its turns. */
  clearSession(agentId: string, sessionId: string): Promise<void>;

  /** Insert or replace memories (keyed by agent and id), all or none. */
  upsertMemories(records: readonly MemoryRecord[]): Promise<void>;
  /** The current version of one memory of the agent, or null. */
  getMemory(agentId: string, memoryId: string): Promise<Memory | null>;
  /**
   * Write a new current version of the memory, serialised with every other update of it: the
   * current version is read, `build` turns it into the new record, which replaces it; the
   * replaced version is kept (its `validTo` set to the new one's `validFrom`). Returns the new
   * version, or null (nothing written) if the agent has no such memory.
   */
  updateMemory(agentId: string, memoryId: string, build: BuildVersion): Promise<Memory | null>;
  /** Every version of the memory, oldest first; `[]` if none. */
  memoryHistory(agentId: string, memoryId: string): Promise<Memory[]>;
  /** Delete one memory of the agent, every version; false if it has no such memory. */
  deleteMemory(agentId: string, memoryId: string): Promise<boolean>;
  /**
   * The agent's current memories not expired at `now` that `filter` matches, newest first
   * (`createdAt` descending, then id descending), at most `limit`; with `after` (a
   * `[createdAt in microseconds, id]` key) only those that come after it in that order.
   */
  listMemories(
    agentId: string,
    options: { now: Date; limit: number; after: readonly [number, string] | null; filter: MemoryFilter | null },
  ): Promise<Memory[]>;
  /** How many memories the agent has (all embedders). */
  countMemories(agentId: string): Promise<number>;
  /** Delete up to `limit` memories whose `expiresAt` has passed; returns how many. */
  sweepExpiredMemories(options: { limit: number }): Promise<number>;
  /** Remove every turn, session, memory and statistic of the agent. */
  eraseAgent(agentId: string): Promise<void>;
  /**
   * The agent's admitted memories ranked and packed as spec §3 says: only the hits that fit
   * `request.budget` and `request.maxHits`, best first, each with its explanation.
   */
  search(request: SearchRequest): Promise<PackedSearch>;
  /** Optional: L1 and L2 in one call (one round trip); what `recentTurns` and `search` return. */
  fetchContext?(
    agentId: string,
    sessionId: string,
    options: { limit: number; ttlSeconds: number; request: SearchRequest },
  ): Promise<[Turn[], PackedSearch]>;
}
