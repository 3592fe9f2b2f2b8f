/** What an embedder is, and the checks every vector passes before it reaches a store. */
import { DimensionMismatchError, EmbedderError, ValidationError } from "../errors.js";

/**
 * Anything that turns texts into vectors. `name` identifies the vector space: vectors are only
 * ever compared with vectors of the same name. `relevanceThreshold` is the cosine at or above
 * which a memory counts as relevant for this embedder, or null for the default (0.7).
 */
export interface Embedder {
  readonly name: string;
  readonly dimensions: number;
  readonly relevanceThreshold: number | null;
  /** One vector per text. */
  embedBatch(texts: readonly string[]): Promise<ArrayLike<number>[]>;
  /** Release what the embedder holds (optional). */
  close?(): Promise<void>;
}

/**
 * A finite, non-zero vector of `dimensions` numbers scaled to unit length, as float32: divided
 * by its largest absolute component first, so neither a huge nor a tiny one is lost (Python's
 * `normalise`).
 */
export function normalise(vector: unknown, dimensions: number, what = "vector"): Float32Array {
  if (
    vector === null ||
    typeof vector !== "object" ||
    typeof (vector as ArrayLike<unknown>).length !== "number"
  ) {
    throw new ValidationError(`${what} must be a sequence of numbers`);
  }
  const raw = vector as ArrayLike<unknown>;
  const arr = new Float64Array(raw.length);
  for (let i = 0; i < raw.length; i++) {
    const x = raw[i];
    if (typeof x !== "number") throw new ValidationError(`${what} must be a sequence of numbers`);
    arr[i] = x;
  }
  if (arr.length !== dimensions) {
    throw new DimensionMismatchError(`${what} has ${arr.length} dimensions; the embedder declares ${dimensions}`);
  }
  if (!arr.every(Number.isFinite)) throw new ValidationError(`${what} contains NaN or infinite values`);
  let scale = 0;
  for (const x of arr) scale = Math.max(scale, Math.abs(x));
  if (scale === 0) throw new ValidationError(`${what} is all zeros; its cosine to anything is undefined`);
  let dot = 0;
  for (let i = 0; i < arr.length; i++) {
    arr[i] = arr[i]! / scale;
    dot += arr[i]! * arr[i]!;
  }
  const norm = Math.sqrt(dot);
  return Float32Array.from(arr, (x) => x / norm);
}

/**
 * Check an embedder's output (`count` vectors of `dimensions`) and normalise each. A vector of
 * the wrong length is a {@link DimensionMismatchError}; anything else unusable an
 * {@link EmbedderError}.
 */
export function asVectors(raw: unknown, count: number, dimensions: number, embedder: string): Float32Array[] {
  if (!Array.isArray(raw)) {
    throw new EmbedderError(`embedder ${JSON.stringify(embedder)} returned ${raw === null ? "null" : typeof raw}, not an array of vectors`);
  }
  if (raw.length !== count) {
    throw new EmbedderError(`embedder ${JSON.stringify(embedder)} returned ${raw.length} vectors for ${count} texts`);
  }
  return raw.map((row, i) => {
    try {
      return normalise(row, dimensions, `vector ${i} from embedder ${JSON.stringify(embedder)}`);
    } catch (exc) {
      if (exc instanceof DimensionMismatchError) throw exc;
      throw new EmbedderError((exc as Error).message);
    }
  });
}
