/**
 * The ranking rules, without I/O: admission order, BM25, the three rankings, RRF, the classic
 * blend (Python's `actrone_pg.ranking`, held to it bit for bit by fixtures Python generates).
 *
 * - Admission: a memory is a candidate only if `cosine >= threshold`; at most `limit` are kept,
 *   nearest first (ties: newer first, then smaller id in code-point order).
 * - Dense: cosine descending. Lexical: BM25 descending, only candidates sharing a query term.
 *   Recency: `createdAt` descending. Every ranking breaks ties newer first, then by id.
 * - RRF: `fused = Σ weight_i / (k + rank_i)`, summed in the order dense, lexical, recency
 *   (floating-point addition is not associative; a fixed order keeps every backend identical).
 * - Classic blend (hybrid off): `relevanceWeight × cosine + recencyWeight × recency`, recency
 *   falling linearly from 1 (written now) to 0 (30 days or older).
 * - Final order: score descending, then newer first, then id ascending.
 */

import { exactLog } from "./exactlog.js";

/** BM25's default term-frequency saturation. */
export const BM25_K1 = 1.2;
/** BM25's default length normalisation. */
export const BM25_B = 0.3;
/** The threshold used when neither the config nor the embedder declares one (the seed's 0.7). */
export const DEFAULT_RELEVANCE_THRESHOLD = 0.7;
/** The classic blend's recency reaches 0 at this age (30 days), in seconds. */
export const RECENCY_HORIZON_SECONDS = 30 * 24 * 3600.0;

/** Everything a ranking depends on besides the candidates. */
export interface RankingParams {
  readonly hybrid: boolean;
  readonly rrfK: number;
  /** One weight per ranking: dense, lexical, recency. */
  readonly rrfWeights: readonly number[];
  readonly relevanceWeight: number;
  readonly recencyWeight: number;
  readonly bm25K1: number;
  readonly bm25B: number;
}

/** BM25 statistics of one agent's memories (or of the filtered set). */
export interface CorpusStats {
  readonly nDocs: number;
  readonly totalLength: number;
  readonly docFreq: ReadonlyMap<string, number>;
}

/** Mean document length in terms (1.0 for an empty corpus). */
export function avgdl(stats: CorpusStats): number {
  return stats.nDocs && stats.totalLength ? stats.totalLength / stats.nDocs : 1.0;
}

/** Inverse document frequency, always positive (the "+1 inside the log" variant). */
export function idf(nDocs: number, df: number): number {
  return exactLog(1.0 + (nDocs - df + 0.5) / (df + 0.5));
}

/**
 * BM25 of each document for the distinct query terms; 0 where it shares none. `tf[t][d]` is
 * term t's frequency in document d, `lengths[d]` its length; terms are summed in query order.
 */
export function bm25(
  tf: readonly Float64Array[],
  lengths: Float64Array,
  docFreqs: readonly number[],
  stats: CorpusStats,
  k1 = BM25_K1,
  b = BM25_B,
): Float64Array {
  const score = new Float64Array(lengths.length);
  if (docFreqs.length === 0) return score;
  const mean = avgdl(stats);
  const norm = new Float64Array(lengths.length);
  for (let d = 0; d < lengths.length; d++) norm[d] = k1 * (1.0 - b + (b * lengths[d]!) / mean);
  for (let t = 0; t < docFreqs.length; t++) {
    const w = idf(stats.nDocs, docFreqs[t]!);
    const row = tf[t]!;
    for (let d = 0; d < lengths.length; d++) {
      const f = row[d]!;
      score[d] = score[d]! + (f > 0 ? (w * (f * (k1 + 1.0))) / (f + norm[d]!) : 0.0);
    }
  }
  return score;
}

/** Compare two strings by code point, as Python does (JavaScript's `<` compares UTF-16 units). */
export function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) {
      // A surrogate (an astral code point) sorts after every BMP code point above it in UTF-16.
      const xs = x >= 0xd800 && x <= 0xdfff;
      const ys = y >= 0xd800 && y <= 0xdfff;
      if (xs !== ys) return xs ? 1 : -1;
      return x - y;
    }
  }
  return a.length - b.length;
}

/** Integers that sort like `ids` in code-point order. */
export function codePointRanks(ids: readonly string[]): Int32Array {
  const order = ids.map((_, i) => i).sort((i, j) => compareCodePoints(ids[i]!, ids[j]!));
  const ranks = new Int32Array(ids.length);
  order.forEach((pos, rank) => (ranks[pos] = rank));
  return ranks;
}

/** Whole microseconds since the epoch of a date. */
export function micros(date: Date): number {
  return date.getTime() * 1000;
}

/**
 * Positions of the nearest `limit` candidates among `among`, nearest first (ties newer first,
 * then id): the admission order, which is also the dense ranking's.
 */
export function nearestFirst(
  cosine: Float64Array,
  createdUs: Float64Array,
  idOrder: Int32Array,
  limit: number,
  among: number[],
): number[] {
  const sorted = [...among].sort(
    (i, j) => cosine[j]! - cosine[i]! || createdUs[j]! - createdUs[i]! || idOrder[i]! - idOrder[j]!,
  );
  return sorted.length > limit ? sorted.slice(0, limit) : sorted;
}

/** Each ranking's 1-based ranks (0: absent), the final order and the score of each candidate. */
export interface Ranked {
  /** Positions into the input, best first. */
  readonly order: number[];
  readonly dense: Int32Array;
  readonly lexical: Int32Array;
  readonly recency: Int32Array;
  readonly score: Float64Array;
}

/**
 * Rank admitted candidates given in dense order (nearest first, as {@link nearestFirst} gives
 * them): every ranking and their fusion, or the classic blend.
 */
export function rankAdmitted(
  idOrder: Int32Array,
  createdUs: Float64Array,
  cosine: Float64Array,
  bm25Scores: Float64Array,
  params: RankingParams,
  now: Date,
): Ranked {
  const n = cosine.length;
  const recent = Array.from({ length: n }, (_, i) => i).sort(
    (i, j) => createdUs[j]! - createdUs[i]! || idOrder[i]! - idOrder[j]!,
  );
  const dense = new Int32Array(n);
  for (let i = 0; i < n; i++) dense[i] = i + 1;
  const recency = new Int32Array(n);
  recent.forEach((pos, r) => (recency[pos] = r + 1));
  const lexical = new Int32Array(n);
  const score = new Float64Array(n);
  const [wDense = 0, wLexical = 0, wRecency = 0] = params.rrfWeights;
  if (params.hybrid) {
    const withTerm = recent.filter((i) => bm25Scores[i]! > 0.0);
    withTerm.sort((i, j) => bm25Scores[j]! - bm25Scores[i]!); // stable: ties keep the recency order
    withTerm.forEach((pos, r) => (lexical[pos] = r + 1));
    const k = params.rrfK;
    for (let i = 0; i < n; i++) {
      const l = lexical[i]!;
      const termLexical = l > 0 ? wLexical / (k + l) : 0.0;
      score[i] = wDense / (k + dense[i]!) + termLexical + wRecency / (k + recency[i]!);
    }
  } else {
    const nowUs = micros(now);
    for (let i = 0; i < n; i++) {
      const age = (nowUs - createdUs[i]!) / 1_000_000.0;
      const rec = age <= 0 ? 1.0 : Math.max(0.0, 1.0 - age / RECENCY_HORIZON_SECONDS);
      score[i] = params.relevanceWeight * cosine[i]! + params.recencyWeight * rec;
    }
  }
  const order = [...recent].sort((i, j) => score[j]! - score[i]!);
  return { order, dense, lexical, recency, score };
}
