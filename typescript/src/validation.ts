/**
 * Argument checks of the manager (Python's `actrone_pg._validation`). Each throws a
 * {@link ValidationError} before anything is written; the ranges are those every backend's
 * column types hold, so that every backend accepts and refuses the same calls.
 */
import { ValidationError } from "./errors.js";
import type { JsonObject, JsonValue } from "./models.js";
import { codePointLength, pyStrip, pythonJsonDumps } from "./text.js";

export const MAX_ID_CHARS = 256;
export const MAX_LABEL_CHARS = 128;
export const MAX_TAGS = 64;
/** Limits and token budgets: PostgreSQL's `integer`. */
export const MAX_INT = 2 ** 31 - 1;
/** Lists and objects nested inside metadata and tool results (`{"a": [1]}` is depth 2). */
export const MAX_JSON_DEPTH = 32;
export const MAX_SOURCE_TURNS = 10_000;
const MIN_JSON_INT = -(2n ** 63n);
const MAX_JSON_INT = 2n ** 63n - 1n;

/** A description of a value for an error message. */
export function describe(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value.length > 60 ? value.slice(0, 60) + "…" : value);
  if (typeof value === "bigint") return `${value}n`;
  if (value === null || value === undefined || typeof value !== "object") return String(value);
  if (Array.isArray(value)) return "an array";
  return value instanceof Date ? value.toISOString() : "an object";
}

function typeName(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  return typeof value;
}

/** Whether `text` is a valid Unicode scalar sequence (no lone surrogates). */
export function isWellFormed(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = text.charCodeAt(i + 1);
      if (!(d >= 0xdc00 && d <= 0xdfff)) return false;
      i++;
    } else if (c >= 0xdc00 && c <= 0xdfff) {
      return false;
    }
  }
  return true;
}

function checkSurrogates(name: string, value: string): void {
  if (!isWellFormed(value)) throw new ValidationError(`${name} is not valid Unicode (it has lone surrogates)`);
}

/** A non-blank id of at most 256 characters, with no NUL or other control characters. */
export function checkId(name: string, value: unknown): string {
  if (typeof value !== "string") throw new ValidationError(`${name} must be a string, got ${typeName(value)}`);
  if (!pyStrip(value)) throw new ValidationError(`${name} must not be empty or blank`);
  const length = codePointLength(value);
  if (length > MAX_ID_CHARS) {
    throw new ValidationError(`${name} is ${length} characters long; the limit is ${MAX_ID_CHARS}`);
  }
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(value)) {
    throw new ValidationError(`${name} must not contain NUL or other control characters`);
  }
  checkSurrogates(name, value);
  return value;
}

/** Text without NUL characters and at most `maxChars` code points long. */
export function checkText(name: string, value: unknown, maxChars: number, { allowEmpty = false } = {}): string {
  if (typeof value !== "string") throw new ValidationError(`${name} must be a string, got ${typeName(value)}`);
  if (!allowEmpty && !pyStrip(value)) throw new ValidationError(`${name} must not be empty or blank`);
  const length = codePointLength(value);
  if (length > maxChars) {
    throw new ValidationError(
      `${name} is ${length.toLocaleString("en-US")} characters long; the limit is ${maxChars.toLocaleString("en-US")} ` +
        "(raise MemoryConfig.maxTextChars, or split the text)",
    );
  }
  if (value.includes("\u0000")) {
    throw new ValidationError(`${name} contains a NUL character (\\u0000), which PostgreSQL cannot store`);
  }
  checkSurrogates(name, value);
  return value;
}

/** A short non-blank label such as `contentType`, `source` or `sensitivity`. */
export function checkLabel(name: string, value: unknown): string {
  if (typeof value !== "string" || !pyStrip(value)) throw new ValidationError(`${name} must be a non-empty string`);
  if (codePointLength(value) > MAX_LABEL_CHARS || value.includes("\u0000")) {
    throw new ValidationError(`${name} must be at most ${MAX_LABEL_CHARS} characters, without NUL`);
  }
  checkSurrogates(name, value);
  return value;
}

/** A whole number of tokens in [1, 2,147,483,647]. */
export function checkBudget(value: unknown): number {
  if (typeof value !== "number" || !Number.isInteger(value)) {
    throw new ValidationError(`tokenBudget must be a whole number, got ${describe(value)}`);
  }
  if (value <= 0) throw new ValidationError(`tokenBudget must be greater than 0, got ${value}`);
  if (value > MAX_INT) throw new ValidationError(`tokenBudget must lie in [1, ${MAX_INT.toLocaleString("en-US")}], got ${value}`);
  return value;
}

/** A whole number in [1, 2,147,483,647]. */
export function checkLimit(name: string, value: unknown): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1 || value > MAX_INT) {
    throw new ValidationError(`${name} must be a whole number in [1, ${MAX_INT.toLocaleString("en-US")}], got ${describe(value)}`);
  }
  return value;
}

/** A number in [0, 1]. */
export function checkImportance(value: unknown): number {
  if (typeof value !== "number") throw new ValidationError(`importance must be a number, got ${describe(value)}`);
  if (!Number.isFinite(value) || value < 0 || value > 1) {
    throw new ValidationError(`importance must lie in [0, 1], got ${describe(value)}`);
  }
  return value;
}

/** A list of short non-blank strings (a lone string is refused: it is not a list). */
export function checkTags(value: unknown): string[] {
  if (typeof value === "string" || !isIterable(value)) throw new ValidationError("tags must be an array of strings");
  const tags = [...value];
  if (tags.length > MAX_TAGS) throw new ValidationError(`at most ${MAX_TAGS} tags, got ${tags.length}`);
  return tags.map((t) => checkLabel("each tag", t));
}

/** `sourceTurnIds`: a list of turn ids. */
export function checkTurnIds(value: unknown): string[] {
  if (typeof value === "string" || !isIterable(value)) {
    throw new ValidationError("sourceTurnIds must be an array of turn ids");
  }
  const ids = [...value];
  if (ids.length > MAX_SOURCE_TURNS) {
    throw new ValidationError(`at most ${MAX_SOURCE_TURNS.toLocaleString("en-US")} sourceTurnIds, got ${ids.length}`);
  }
  return ids.map((id) => checkId("each source turn id", id));
}

// PostgreSQL's timestamptz and Python's datetime both end at the year 9999 (and start at 1).
const MIN_TIME = new Date("0001-01-01T00:00:00.000Z").getTime();
const MAX_TIME = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

/** A valid `Date` within the years 1 to 9999. */
export function checkDate(name: string, value: unknown): Date {
  if (!(value instanceof Date)) throw new ValidationError(`${name} must be a Date, got ${typeName(value)}`);
  const t = value.getTime();
  if (Number.isNaN(t)) throw new ValidationError(`${name} is an invalid Date`);
  if (t < MIN_TIME || t > MAX_TIME) {
    throw new ValidationError(`${name} ${value.toISOString()} lies outside the years 1–9999`);
  }
  return new Date(t);
}

function isIterable(value: unknown): value is Iterable<unknown> {
  return value !== null && value !== undefined && typeof (value as { [Symbol.iterator]?: unknown })[Symbol.iterator] === "function";
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

function plainJson(where: string, value: unknown, depth: number): JsonValue {
  if (value === null || typeof value === "boolean") return value;
  if (typeof value === "string") {
    if (value.includes("\u0000")) throw new ValidationError(`${where} contains a NUL character, which PostgreSQL cannot store`);
    checkSurrogates(where, value);
    return value;
  }
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new ValidationError(`${where} contains NaN or an infinite number, which JSON has not`);
    // A whole number is an integer to Python once stored (JSON cannot tell 1 from 1.0), and
    // integers must fit a signed 64-bit integer there.
    if (Number.isInteger(value) && (value < -(2 ** 63) || value >= 2 ** 63)) {
      throw new ValidationError(`${where}: whole numbers must fit a signed 64-bit integer [${MIN_JSON_INT}, ${MAX_JSON_INT}]`);
    }
    return value;
  }
  if (typeof value === "bigint") {
    if (value < MIN_JSON_INT || value > MAX_JSON_INT) {
      throw new ValidationError(`${where}: whole numbers must fit a signed 64-bit integer [${MIN_JSON_INT}, ${MAX_JSON_INT}]`);
    }
    if (value < -(2n ** 53n) || value > 2n ** 53n) {
      throw new ValidationError(`${where}: a bigint beyond 2^53 cannot be stored as a JSON number without loss`);
    }
    return Number(value);
  }
  if (Array.isArray(value) || isPlainObject(value)) {
    if (depth >= MAX_JSON_DEPTH) {
      throw new ValidationError(`${where} nests lists and objects more than ${MAX_JSON_DEPTH} levels deep`);
    }
    if (Array.isArray(value)) return value.map((item, i) => plainJson(`${where}[${i}]`, item, depth + 1));
    const out: JsonObject = {};
    for (const [key, item] of Object.entries(value)) {
      plainJson(`${where} key`, key, depth);
      out[key] = plainJson(`${where}[${JSON.stringify(key)}]`, item, depth + 1);
    }
    return out;
  }
  throw new ValidationError(`${where} must be JSON (object, array, string, number, boolean or null), got ${typeName(value)}`);
}

/**
 * A JSON value as plain objects, arrays, strings, numbers, booleans and null: strings hold no
 * NUL and no lone surrogates, numbers are finite, nesting is at most {@link MAX_JSON_DEPTH}
 * deep, and the JSON text (as Python's `json.dumps(..., ensure_ascii=False)`) at most `maxChars`.
 */
export function checkJson(name: string, value: unknown, maxChars: number): JsonValue {
  const out = plainJson(name, value, 0);
  const length = codePointLength(unescapedLength(out));
  if (length > maxChars) {
    throw new ValidationError(`${name} is ${length.toLocaleString("en-US")} characters as JSON; the limit is ${maxChars.toLocaleString("en-US")}`);
  }
  return out;
}

function unescapedLength(value: JsonValue): string {
  // json.dumps(ensure_ascii=False): the ASCII-escaped text with its \uXXXX escapes read back.
  return pythonJsonDumps(value).replace(/\\u([0-9a-f]{4})/g, (m, hex: string) => {
    const c = parseInt(hex, 16);
    return c < 0x20 ? m : String.fromCharCode(c);
  });
}

/** A JSON object (metadata); null or undefined is `{}`. */
export function checkMetadata(value: unknown, maxChars: number): JsonObject {
  if (value === null || value === undefined) return {};
  if (!isPlainObject(value)) throw new ValidationError("metadata must be an object");
  return checkJson("metadata", value, maxChars) as JsonObject;
}
