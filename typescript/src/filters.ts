/**
 * The filters of a search or a listing (spec §9.3), each key defined once: how a caller's value
 * is checked and what it means for one memory (Python's `actrone_pg.filters`).
 *
 * A filter applies before ranking: the BM25 statistics are those of the memories it matches,
 * and only they are candidates.
 */
import { ValidationError } from "./errors.js";
import type { JsonObject, JsonValue, Memory, MemoryFilters } from "./models.js";
import * as v from "./validation.js";

/** The filter keys, in the order conditions are checked. */
export const FILTER_KEYS = [
  "tagsAny",
  "tagsAll",
  "contentTypes",
  "sessionId",
  "createdAfter",
  "createdBefore",
  "minImportance",
  "metadata",
] as const;

/** A checked filter: the conditions given, each of its key's type. */
export type MemoryFilter = Readonly<MemoryFilters>;

function labels(where: string, value: unknown): string[] {
  if (typeof value === "string" || !Array.isArray(value)) throw new ValidationError(`${where} must be an array of strings`);
  if (value.length > v.MAX_TAGS) throw new ValidationError(`${where}: at most ${v.MAX_TAGS} values, got ${value.length}`);
  return value.map((item) => v.checkLabel(where, item));
}

/**
 * A caller's `filters`: an object of {@link FILTER_KEYS}, each value checked by its key. `null`,
 * `undefined` or an empty object is no filter; an unknown key or a bad value is a
 * {@link ValidationError}.
 */
export function parseFilters(value: unknown, maxChars: number): MemoryFilter | null {
  if (value === null || value === undefined) return null;
  if (typeof value !== "object" || Array.isArray(value)) {
    throw new ValidationError(`filters must be an object, got ${Array.isArray(value) ? "array" : typeof value}`);
  }
  const given = value as Record<string, unknown>;
  const unknown = Object.keys(given)
    .filter((k) => !(FILTER_KEYS as readonly string[]).includes(k))
    .sort();
  if (unknown.length > 0) {
    throw new ValidationError(`unknown filter key(s) ${JSON.stringify(unknown)}; the keys are ${FILTER_KEYS.join(", ")}`);
  }
  const out: MemoryFilters = {};
  for (const key of FILTER_KEYS) {
    const item = given[key];
    if (item === undefined || item === null) continue;
    const where = `filters[${JSON.stringify(key)}]`;
    switch (key) {
      case "tagsAny":
      case "tagsAll":
      case "contentTypes":
        out[key] = labels(where, item);
        break;
      case "sessionId":
        out.sessionId = v.checkId(where, item);
        break;
      case "createdAfter":
      case "createdBefore":
        out[key] = v.checkDate(where, item);
        break;
      case "minImportance":
        try {
          out.minImportance = v.checkImportance(item);
        } catch (exc) {
          throw new ValidationError(`${where}: ${(exc as Error).message}`);
        }
        break;
      case "metadata":
        if (typeof item !== "object" || Array.isArray(item)) throw new ValidationError(`${where} must be an object (a JSON object)`);
        out.metadata = v.checkJson(where, item, maxChars) as JsonObject;
        break;
    }
  }
  return Object.keys(out).length === 0 ? null : out;
}

/** Whether memory `m` passes every condition of `f` (the definition every backend matches). */
export function matches(f: MemoryFilter, m: Memory): boolean {
  if (f.tagsAny !== undefined && !f.tagsAny.some((t) => m.tags.includes(t))) return false;
  if (f.tagsAll !== undefined && !f.tagsAll.every((t) => m.tags.includes(t))) return false;
  if (f.contentTypes !== undefined && !f.contentTypes.includes(m.contentType)) return false;
  if (f.sessionId !== undefined && m.sessionId !== f.sessionId) return false;
  if (f.createdAfter !== undefined && !(m.createdAt.getTime() > f.createdAfter.getTime())) return false;
  if (f.createdBefore !== undefined && !(m.createdAt.getTime() < f.createdBefore.getTime())) return false;
  if (f.minImportance !== undefined && !(m.importance >= f.minImportance)) return false;
  if (f.metadata !== undefined && !jsonContains(m.metadata, f.metadata)) return false;
  return true;
}

/**
 * PostgreSQL's `jsonb @>` on plain JSON values: objects contain sub-objects key by key, an array
 * contains an array whose every element some element of it contains, scalars only an equal
 * scalar of the same JSON type; at the top level only, an array also contains a scalar it holds.
 */
export function jsonContains(container: JsonValue, contained: JsonValue): boolean {
  if (Array.isArray(container) && !isComposite(contained)) return container.some((c) => sameScalar(c, contained));
  return contains(container, contained);
}

function isComposite(value: JsonValue): value is JsonValue[] | JsonObject {
  return value !== null && typeof value === "object";
}

function contains(container: JsonValue, contained: JsonValue): boolean {
  if (Array.isArray(contained)) {
    return Array.isArray(container) && contained.every((item) => container.some((c) => containsElement(c, item)));
  }
  if (isComposite(contained)) {
    if (!isComposite(container) || Array.isArray(container)) return false;
    return Object.entries(contained).every(([k, item]) => Object.hasOwn(container, k) && contains(container[k]!, item));
  }
  return sameScalar(container, contained);
}

function containsElement(container: JsonValue, item: JsonValue): boolean {
  if (isComposite(item)) {
    return isComposite(container) && Array.isArray(container) === Array.isArray(item) && contains(container, item);
  }
  return sameScalar(container, item);
}

function sameScalar(a: JsonValue, b: JsonValue): boolean {
  if (isComposite(a) || isComposite(b)) return false;
  return typeof a === typeof b && a === b;
}
