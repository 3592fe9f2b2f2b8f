/**
 * The ranking pipeline, without I/O: candidates and statistics in, ranked hits out (Python's
 * `actrone_pg.pipeline`). A store supplies its candidates as arrays aligned by position and the
 * agent's BM25 statistics; `search` admits, scores BM25, ranks, fuses and packs them.
 */
import { packCosts } from "./budget.js";
import type { Explain, Memory, ScoredMemory } from "./models.js";
import { bm25, compareCodePoints as compareIds, type CorpusStats, nearestFirst, rankAdmitted } from "./ranking.js";
import type { PackedSearch, SearchRequest } from "./store.js";

/** A store's candidates for one search, aligned by position, before admission. */
export interface Candidates {
  readonly cosine: Float64Array;
  readonly createdUs: Float64Array;
  /** Integers that order the candidates as their ids compare in code-point order. */
  readonly idOrder: Int32Array;
  /** Each candidate's stored token count: its cost in the budget. */
  readonly tokens: readonly number[];
  /** Each term's frequency in the candidates at `positions` (a row per term), and their lengths. */
  termFrequencies(positions: readonly number[], terms: readonly string[]): { tf: Float64Array[]; lengths: Float64Array };
  /** The memories at the given positions, in that order. */
  memories(positions: readonly number[]): Memory[];
  /** Which candidates may be admitted (the filter and expiry), or null for all. */
  readonly allowed: Uint8Array | null;
}

/** Allowed positions with `cosine >= threshold`: the nearest `limit`, nearest first. */
export function admit(candidates: Candidates, threshold: number, limit: number): number[] {
  const passing: number[] = [];
  const { cosine, allowed } = candidates;
  for (let i = 0; i < cosine.length; i++) {
    if (cosine[i]! >= threshold && (allowed === null || allowed[i])) passing.push(i);
  }
  return nearestFirst(cosine, candidates.createdUs, candidates.idOrder, limit, passing);
}

function pick<T extends Float64Array | Int32Array>(array: T, positions: readonly number[]): T {
  const out = new (array.constructor as new (n: number) => T)(positions.length);
  positions.forEach((p, i) => (out[i] = array[p]!));
  return out;
}

/** Admit, score BM25, rank, fuse and pack `candidates` for `request`. */
export function search(request: SearchRequest, candidates: Candidates, stats: CorpusStats): PackedSearch {
  const admitted = admit(candidates, request.threshold, request.limit);
  if (admitted.length === 0) return { hits: [], candidatesConsidered: 0, tokens: 0 };
  const cosine = pick(candidates.cosine, admitted);
  const { tf, lengths } = candidates.termFrequencies(admitted, request.terms);
  const docFreqs = request.terms.map((t) => stats.docFreq.get(t) ?? 0);
  const p = request.params;
  const scores = bm25(tf, lengths, docFreqs, stats, p.bm25K1, p.bm25B);
  const ranked = rankAdmitted(
    pick(candidates.idOrder, admitted),
    pick(candidates.createdUs, admitted),
    cosine,
    scores,
    p,
    request.now,
  );
  const costs = ranked.order.map((i) => candidates.tokens[admitted[i]!]!);
  const [taken, used] = packCosts(costs, request.budget, request.maxHits);
  const chosen = taken.map((t) => ranked.order[t]!);
  const memories = candidates.memories(chosen.map((i) => admitted[i]!));
  const hits = chosen.map(
    (i, n): ScoredMemory => ({
      memory: memories[n]!,
      explain: explainOf(cosine[i]!, scores[i]!, ranked.dense[i]!, p.hybrid ? ranked.lexical[i]! : 0, ranked.recency[i]!, ranked.score[i]!),
    }),
  );
  return { hits, candidatesConsidered: costs.length, tokens: used };
}

/** An explanation from a hit's values; a rank of 0 or a BM25 of 0 means "absent". */
export function explainOf(cosine: number, bm25Score: number, dense: number, lexical: number, recency: number, fused: number): Explain {
  return {
    cosine,
    denseRank: dense || null,
    lexicalRank: lexical || null,
    recencyRank: recency || null,
    fusedScore: fused,
    rerankScore: null,
    bm25: bm25Score > 0 ? bm25Score : null,
    neighbourScore: null,
  };
}

/** Ranked `hits` packed by cost, for hits whose cost or order the manager changed. */
export function packHits(
  hits: readonly ScoredMemory[],
  cost: (hit: ScoredMemory) => number,
  budget: number | null,
  maxHits: number | null = null,
): PackedSearch {
  const [taken, used] = packCosts(hits.map(cost), budget, maxHits);
  return { hits: taken.map((i) => hits[i]!), candidatesConsidered: hits.length, tokens: used };
}

/** `hits` ordered by a reranker's `scores` (one per hit), best first; equal scores keep their order. */
export function rerank(hits: readonly ScoredMemory[], scores: readonly number[]): ScoredMemory[] {
  const order = hits.map((_, i) => i).sort((i, j) => scores[j]! - scores[i]!);
  return order.map((i) => ({ memory: hits[i]!.memory, explain: { ...hits[i]!.explain, rerankScore: scores[i]! } }));
}

/** How many of the fused ranking's best hits {@link inheritFromPredecessors} looks at. */
export const NEIGHBOUR_POOL = 100;

/**
 * `hits` (best first) reordered so each scores at least `weight` × its session predecessor's
 * fused score (the hit of the same session written just before it); ties newer first, then id.
 */
export function inheritFromPredecessors(hits: readonly ScoredMemory[], weight: number): ScoredMemory[] {
  if (weight <= 0.0 || hits.length < 2) return [...hits];
  const memories = hits.map((h) => h.memory);
  const scores = hits.map((h) => h.explain.fusedScore);
  const sessions = new Map<string, number[]>();
  memories.forEach((m, i) => {
    if (m.sessionId !== null) {
      const members = sessions.get(m.sessionId) ?? [];
      members.push(i);
      sessions.set(m.sessionId, members);
    }
  });
  const inherited = new Map<number, number>();
  const byTimeThenId = (i: number, j: number): number =>
    memories[i]!.createdAt.getTime() - memories[j]!.createdAt.getTime() || compareIds(memories[i]!.id, memories[j]!.id);
  for (const members of sessions.values()) {
    if (members.length < 2) continue;
    members.sort(byTimeThenId);
    for (let n = 1; n < members.length; n++) {
      const lifted = weight * scores[members[n - 1]!]!;
      if (lifted > scores[members[n]!]!) inherited.set(members[n]!, lifted);
    }
  }
  if (inherited.size === 0) return [...hits];
  const final = scores.map((s, i) => inherited.get(i) ?? s);
  const order = hits.map((_, i) => i).sort((i, j) => compareIds(memories[i]!.id, memories[j]!.id));
  order.sort((i, j) => final[j]! - final[i]! || memories[j]!.createdAt.getTime() - memories[i]!.createdAt.getTime());
  return order.map((i) => {
    const lifted = inherited.get(i);
    return lifted === undefined ? hits[i]! : { memory: memories[i]!, explain: { ...hits[i]!.explain, neighbourScore: lifted } };
  });
}

