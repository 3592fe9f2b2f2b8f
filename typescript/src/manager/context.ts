/**
 * What the manager's collaborators share (Python's `_manager.context`): its components, the rules
 * derived from its config, and the helpers that count tokens, embed texts, call the store and
 * give a stored memory the form a read returns.
 */
import { analyzer, type Analyzer } from "../analyzer.js";
import type { MemoryConfig } from "../config.js";
import { asVectors, type Embedder } from "../embedders/base.js";
import { ActroneError, ConfigurationError, EmbedderError, StoreError, ValidationError } from "../errors.js";
import type { JsonValue, Memory } from "../models.js";
import { DEFAULT_RELEVANCE_THRESHOLD, type RankingParams } from "../ranking.js";
import type { Store } from "../store.js";
import { heuristicTokenCount, pythonJsonDumps, type TokenCounter } from "../text.js";

/** Rescores (query, text) pairs: a cross-encoder or any other reranker. */
export interface Reranker {
  /** One score per text, higher is better. */
  score(query: string, texts: readonly string[]): Promise<readonly number[]>;
  close?(): Promise<void>;
}

/** `exc` as an ActroneError: itself if it is one, else `Kind` naming `what` failed, `exc` its cause. */
export function wrap(exc: unknown, Kind: new (message: string, options?: { cause?: unknown }) => ActroneError, what: string): ActroneError {
  if (exc instanceof ActroneError) return exc;
  const message = exc instanceof Error ? `${exc.name}: ${exc.message}` : String(exc);
  return new Kind(`${what} failed: ${message}`, { cause: exc });
}

/** A manager's components and the rules derived from its config; nothing here changes. */
export class ManagerContext {
  readonly config: MemoryConfig;
  readonly store: Store;
  readonly embedder: Embedder;
  readonly reranker: Reranker | null;
  /** A custom counter recounts what a store packs by stored token counts. */
  readonly customCounter: boolean;
  /** The sensitivities a read returns redacted (spec §9.6). */
  readonly redacted: ReadonlySet<string>;
  /** The admission threshold: the config's, else the embedder's, else 0.7. */
  readonly threshold: number;
  readonly params: RankingParams;
  /** The analyzer of query terms. */
  readonly analyzer: Analyzer;
  readonly #count: TokenCounter;

  constructor(config: MemoryConfig, store: Store, embedder: Embedder, reranker: Reranker | null, tokenCounter: TokenCounter | null) {
    this.config = config;
    this.store = store;
    this.embedder = embedder;
    this.reranker = reranker;
    this.#count = tokenCounter ?? heuristicTokenCount;
    this.customCounter = tokenCounter !== null;
    this.redacted = new Set(config.redactSensitivities);
    this.threshold = config.relevanceThreshold ?? embedder.relevanceThreshold ?? DEFAULT_RELEVANCE_THRESHOLD;
    this.params = {
      hybrid: config.hybridRetrieval,
      rrfK: config.rrfK,
      rrfWeights: config.rrfWeights,
      relevanceWeight: config.relevanceWeight,
      recencyWeight: config.recencyWeight,
      bm25K1: config.bm25K1,
      bm25B: config.bm25B,
    };
    this.analyzer = analyzer(config.textAnalyzer);
  }

  /** A store call, its failure a {@link StoreError} (an ActroneError passes as it is). */
  async onStore<T>(call: () => Promise<T>): Promise<T> {
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

  /** A turn's tokens: its two messages and the JSON of its tool results (as Python writes it). */
  countTurn(user: string, assistant: string, toolResults: JsonValue[] | null): number {
    let tokens = this.countTokens(user) + this.countTokens(assistant);
    if (toolResults !== null && toolResults.length > 0) tokens += this.countTokens(pythonJsonDumps(toolResults));
    return tokens;
  }

  /** The unit vectors of `texts`, in batches of `embeddingBatchSize`. */
  async embed(texts: string[]): Promise<Float32Array[]> {
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

  /** `memory` as a read returns it, with `changes`: redacted if its sensitivity is listed. */
  shown(memory: Memory, changes: Partial<Memory> = {}): Memory {
    if (this.redacted.has(memory.sensitivity)) changes = { ...changes, content: `[redacted: ${memory.sensitivity}]` };
    return Object.keys(changes).length > 0 ? { ...memory, ...changes } : memory;
  }

  /** `memory` unless it is null or has expired at `now`. */
  live(memory: Memory | null, now: Date): Memory | null {
    if (memory === null || (memory.expiresAt !== null && memory.expiresAt.getTime() <= now.getTime())) return null;
    return memory;
  }
}
