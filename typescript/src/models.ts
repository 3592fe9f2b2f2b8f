/** The records the library reads and returns: turns, memories, explanations and the context. */

/** A JSON value: what metadata and tool results hold. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };
/** A JSON object. */
export type JsonObject = { [key: string]: JsonValue };

/** One exchange of a session: the user's message and the assistant's reply. */
export interface Turn {
  readonly id: string;
  readonly agentId: string;
  readonly sessionId: string;
  readonly userMessage: string;
  readonly assistantMessage: string;
  readonly toolResults: JsonValue[] | null;
  readonly createdAt: Date;
  readonly tokenCount: number;
}

/**
 * Why a memory was ranked where it was. Ranks are 1-based, `null` where the memory is absent
 * from that ranking; `fusedScore` is the RRF score in hybrid mode and the blend in classic mode.
 */
export interface Explain {
  readonly cosine: number;
  readonly denseRank: number | null;
  readonly lexicalRank: number | null;
  readonly recencyRank: number | null;
  readonly fusedScore: number;
  readonly rerankScore: number | null;
  readonly bm25: number | null;
  /** The score inherited from the memory written just before it in its session, if larger. */
  readonly neighbourScore: number | null;
}

/**
 * A long-term memory of an agent, in one of its versions. `createdAt` is the memory's own time
 * and stays the same across versions; `validFrom`/`validTo` bound this version.
 */
export interface Memory {
  readonly id: string;
  readonly agentId: string;
  readonly sessionId: string | null;
  readonly content: string;
  readonly contentType: string;
  readonly importance: number;
  readonly tags: readonly string[];
  readonly source: string;
  readonly sensitivity: string;
  readonly createdAt: Date;
  readonly metadata: JsonObject;
  readonly embedder: string;
  readonly tokenCount: number;
  readonly expiresAt: Date | null;
  readonly sourceTurnIds: readonly string[];
  readonly version: number;
  readonly validFrom: Date | null;
  readonly validTo: Date | null;
  readonly explain: Explain | null;
}

/** One page of `listMemories`: current memories, newest first, and the next page's cursor. */
export interface MemoryPage {
  readonly items: Memory[];
  readonly nextCursor: string | null;
}

/** A memory as a store's search returns it: the memory and its explanation. */
export interface ScoredMemory {
  readonly memory: Memory;
  readonly explain: Explain;
}

/** What a store knows about a session (L1). */
export interface SessionInfo {
  readonly agentId: string;
  readonly sessionId: string;
  readonly turnCount: number;
  readonly createdAt: Date;
  readonly lastActiveAt: Date;
  readonly metadata: JsonObject;
}

/**
 * The memory part of a prompt, assembled inside a token budget. `sessionBudget` and
 * `episodicBudget` are the shares given to recent turns (L1) and memories (L2); the rest is the
 * caller's. `sessionTokens` and `episodicTokens` are what was used of each.
 */
export interface RetrievedContext {
  readonly agentId: string;
  readonly sessionId: string;
  readonly query: string;
  readonly recentTurns: Turn[];
  readonly episodicMemories: Memory[];
  readonly tokenBudget: number;
  readonly sessionBudget: number;
  readonly episodicBudget: number;
  readonly sessionTokens: number;
  readonly episodicTokens: number;
  readonly retrievalMs: number;
  readonly relevanceThreshold: number;
  readonly candidatesConsidered: number;
}

/** The filters of a search or a listing (spec §9.3); every condition given must hold. */
export interface MemoryFilters {
  /** Memories with any of these tags. */
  tagsAny?: readonly string[];
  /** Memories with all of these tags. */
  tagsAll?: readonly string[];
  /** Memories with one of these content types. */
  contentTypes?: readonly string[];
  /** Memories from this session. */
  sessionId?: string;
  /** Memories created after this time. */
  createdAfter?: Date;
  /** Memories created before this time. */
  createdBefore?: Date;
  /** Memories at least this important (0 to 1). */
  minImportance?: number;
  /** A JSON object each memory's metadata must contain (PostgreSQL's `jsonb @>`). */
  metadata?: JsonObject;
}
