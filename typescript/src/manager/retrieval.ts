/** The manager's retrieval: L2 search, and the context of L1 and L2 inside a token budget. */
import { packTurns, splitBudget } from "../budget.js";
import { RerankerError } from "../errors.js";
import { parseFilters, type MemoryFilter } from "../filters.js";
import type { Memory, MemoryFilters, RetrievedContext, ScoredMemory, Turn } from "../models.js";
import { inheritFromPredecessors, NEIGHBOUR_POOL, packHits, rerank } from "../pipeline.js";
import type { PackedSearch, SearchRequest } from "../store.js";
import * as v from "../validation.js";
import { type ManagerContext, wrap } from "./context.js";

/** Search the agent's memories and assemble its context (the ranking is the pipeline's). */
export class Retrieval {
  readonly ctx: ManagerContext;
  // Query text -> its vector, least recently used first (`queryCacheSize` at most).
  readonly #queryCache = new Map<string, Float32Array>();

  constructor(ctx: ManagerContext) {
    this.ctx = ctx;
  }

  /** The agent's memories most relevant to `query`, best first (no token budget). */
  async searchMemories(
    agentId: string,
    query: string,
    options: { limit?: number; explain?: boolean; filters?: MemoryFilters | null } = {},
  ): Promise<Memory[]> {
    v.checkId("agentId", agentId);
    v.checkText("query", query, this.ctx.config.maxTextChars);
    const { limit = 10, explain = false, filters = null } = options ?? {};
    v.checkLimit("limit", limit);
    const filter = parseFilters(filters, this.ctx.config.maxTextChars);
    const packed = await this.#search(agentId, query, null, limit, filter);
    return packed.hits.map((h) => this.#present(h, explain));
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
    v.checkId("agentId", agentId);
    v.checkId("sessionId", sessionId);
    v.checkText("query", query, this.ctx.config.maxTextChars);
    v.checkBudget(tokenBudget);
    const { explain = false, filters = null } = options ?? {};
    const filter = parseFilters(filters, this.ctx.config.maxTextChars);
    const started = performance.now();
    const shares = splitBudget(tokenBudget, this.ctx.config.budgetFractionSession, this.ctx.config.budgetFractionEpisodic);
    const l1Options = { limit: this.ctx.config.maxSessionTurns, ttlSeconds: this.ctx.config.sessionTtlSeconds };
    let turns: Turn[];
    let packed: PackedSearch;
    const fetchContext = this.ctx.store.fetchContext?.bind(this.ctx.store);
    if (fetchContext !== undefined) {
      const [asked, limit, repack] = this.#l2Asks(shares.episodic, null);
      const request = await this.#request(agentId, query, asked, limit, filter);
      [turns, packed] = await this.ctx.onStore(() => fetchContext(agentId, sessionId, { ...l1Options, request }));
      if (repack) packed = await this.#l2Repack(request, packed, shares.episodic, null);
    } else {
      [turns, packed] = await Promise.all([
        this.ctx.onStore(() => this.ctx.store.recentTurns(agentId, sessionId, l1Options)),
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
      relevanceThreshold: this.ctx.threshold,
      candidatesConsidered: packed.candidatesConsidered,
    };
  }

  #turnTokens(turn: Turn): number {
    // A custom counter recounts: the stored count may come from another counter.
    if (!this.ctx.customCounter) return turn.tokenCount;
    return this.ctx.countTurn(turn.userMessage, turn.assistantMessage, turn.toolResults);
  }

  #memoryTokens(hit: ScoredMemory): number {
    return this.ctx.customCounter ? this.ctx.countTokens(hit.memory.content) : hit.memory.tokenCount;
  }

  #present(hit: ScoredMemory, explain: boolean): Memory {
    const m = hit.memory;
    if (!explain && m.explain === null && !this.ctx.customCounter && !this.ctx.redacted.has(m.sensitivity)) return m;
    return this.ctx.shown(m, { tokenCount: this.#memoryTokens(hit), explain: explain ? hit.explain : null });
  }

  get #neighbourWeight(): number {
    return this.ctx.config.hybridRetrieval ? this.ctx.config.neighbourWeight : 0.0;
  }

  /** What to ask the store for: [budget, hit limit, whether the manager packs itself]. */
  #l2Asks(budget: number | null, maxHits: number | null): [number | null, number | null, boolean] {
    const reorder = this.ctx.reranker !== null;
    const neighbours = this.#neighbourWeight > 0.0;
    if (!(reorder || neighbours || (budget !== null && this.ctx.customCounter))) return [budget, maxHits, false];
    let limit: number | null = null;
    if (reorder) limit = Math.max(this.ctx.config.rerankTopK, neighbours ? NEIGHBOUR_POOL : 0);
    else if (neighbours && !(budget !== null && this.ctx.customCounter)) limit = Math.max(NEIGHBOUR_POOL, maxHits ?? 0);
    return [null, limit, true];
  }

  async #search(agentId: string, query: string, budget: number | null, maxHits: number | null, filter: MemoryFilter | null): Promise<PackedSearch> {
    const [asked, limit, repack] = this.#l2Asks(budget, maxHits);
    const request = await this.#request(agentId, query, asked, limit, filter);
    const found = await this.ctx.onStore(() => this.ctx.store.search(request));
    return repack ? this.#l2Repack(request, found, budget, maxHits) : found;
  }

  async #l2Repack(request: SearchRequest, found: PackedSearch, budget: number | null, maxHits: number | null): Promise<PackedSearch> {
    let hits = found.hits;
    const weight = this.#neighbourWeight;
    if (weight > 0.0) hits = [...inheritFromPredecessors(hits.slice(0, NEIGHBOUR_POOL), weight), ...hits.slice(NEIGHBOUR_POOL)];
    if (this.ctx.reranker !== null && hits.length > 0) hits = await this.#rerank(request.query, hits);
    let packed = packHits(hits, (h) => this.#memoryTokens(h), budget, maxHits);
    if (this.ctx.reranker !== null) return packed;
    if (budget !== null && request.maxHits !== null && found.hits.length === request.maxHits && packed.hits.length === hits.length) {
      // A budget that holds every hit asked for may hold more: the rest, in fused order.
      const rest = await this.ctx.onStore(() => this.ctx.store.search({ ...request, maxHits: null }));
      packed = packHits([...hits, ...rest.hits.slice(hits.length)], (h) => this.#memoryTokens(h), budget);
    }
    return { ...packed, candidatesConsidered: found.candidatesConsidered };
  }

  async #rerank(query: string, hits: readonly ScoredMemory[]): Promise<ScoredMemory[]> {
    const top = hits.slice(0, this.ctx.config.rerankTopK);
    let raw: unknown;
    try {
      raw = await this.ctx.reranker!.score(query, top.map((h) => h.memory.content));
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
      terms: this.ctx.analyzer.queryTerms(query, { dropQuestionWords: this.ctx.config.dropQuestionWords }),
      vector: await this.#embedQuery(query),
      embedder: this.ctx.embedder.name,
      threshold: this.ctx.threshold,
      limit: this.ctx.config.maxEpisodicMemories,
      params: this.ctx.params,
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
    const [vector] = await this.ctx.embed([query]);
    this.#queryCache.set(query, vector!);
    if (this.#queryCache.size > this.ctx.config.queryCacheSize) this.#queryCache.delete(this.#queryCache.keys().next().value!);
    return vector!;
  }
}
