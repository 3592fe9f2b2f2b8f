/**
 * Values to and from node-postgres: timestamps kept to the microsecond, vectors and JSON as
 * the Python store writes them, and the rows of its statements as records (Python's
 * `stores/postgres/rows.py`).
 */
import type { Explain, JsonObject, JsonValue, Memory, ScoredMemory, Turn } from "../../models.js";
import type { PackedSearch } from "../../store.js";
import { MEMORY_FIELDS } from "./generated.js";

/** A row of node-postgres, by column name. */
export type Row = Record<string, unknown>;

/** The microseconds a parsed timestamp carries past its `Date`'s milliseconds. */
const MICROS = Symbol.for("actrone-pg.micros");

type PreciseDate = Date & { [MICROS]?: number };

/**
 * A timestamptz as PostgreSQL prints it (`2026-12-05 01:02:03.123456+00`) as a `Date`, its
 * microseconds since the epoch kept on it (read by {@link micros} and {@link timestamp}).
 */
export function parseTimestamp(text: string): Date {
  if (text === "infinity" || text === "-infinity") return new Date(text === "infinity" ? 8.64e15 : -8.64e15);
  const m = /^(\d{4,})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?([+-]\d\d)(?::?(\d\d))?(?::?(\d\d))?( BC)?$/.exec(text);
  if (m === null) return new Date(text);
  const [, y, mo, d, h, mi, s, frac = "", oh, om = "0", os = "0"] = m;
  const offset = (Math.abs(Number(oh)) * 3600 + Number(om) * 60 + Number(os)) * (oh!.startsWith("-") ? -1 : 1);
  const seconds = Date.UTC(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s)) / 1000 - offset;
  const us = Number(frac.padEnd(6, "0"));
  const total = seconds * 1_000_000 + us;
  const date: PreciseDate = new Date(Math.floor(total / 1000));
  Object.defineProperty(date, MICROS, { value: total, enumerable: false });
  return date;
}

/** A `Date`'s microseconds since the epoch (exact for timestamps read from the server). */
export function micros(date: Date): number {
  return (date as PreciseDate)[MICROS] ?? date.getTime() * 1000;
}

/** A timestamp parameter, to the microsecond where the `Date` came from the server. */
export function timestamp(date: Date | null): string | null {
  if (date === null) return null;
  const us = micros(date);
  const ms = Math.floor(us / 1000);
  const iso = new Date(ms).toISOString(); // ...T01:02:03.123Z
  const rest = String(us - ms * 1000).padStart(3, "0");
  return `${iso.slice(0, -1)}${rest}Z`;
}

/** A timestamp parameter from `[microseconds, …]` (a list cursor's key). */
export function timestampFromMicros(us: number): string {
  const ms = Math.floor(us / 1000);
  const iso = new Date(ms).toISOString();
  return `${iso.slice(0, -1)}${String(us - ms * 1000).padStart(3, "0")}Z`;
}

/** A vector in pgvector's text form; each float32 printed as the shortest text of its double. */
export function vectorText(vector: Float32Array): string {
  let out = "[";
  for (let i = 0; i < vector.length; i++) out += (i ? "," : "") + String(vector[i]);
  return out + "]";
}

/** A JSON value for a jsonb parameter. */
export function jsonText(value: JsonValue): string {
  return JSON.stringify(value);
}

function camel(name: string): string {
  return name.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
}

const FIELDS = MEMORY_FIELDS.map((name) => [name, camel(name)] as const);

function metadataOf(value: unknown): JsonObject {
  if (value === null || value === undefined) return {};
  if (typeof value === "string") return value === "{}" ? {} : (JSON.parse(value) as JsonObject);
  return value as JsonObject;
}

/** A memory from a row holding every column of `MEMORY_COLUMNS`. */
export function memory(agentId: string, r: Row, explain: Explain | null = null): Memory {
  const out: Record<string, unknown> = { agentId };
  for (const [name, key] of FIELDS) out[key] = r[name];
  out.metadata = metadataOf(r.metadata);
  out.tags = (r.tags as string[] | null) ?? [];
  out.sourceTurnIds = (r.source_turn_ids as string[] | null) ?? [];
  out.importance = Number(r.importance);
  out.tokenCount = Number(r.token_count);
  out.version = Number(r.version);
  out.explain = explain;
  return out as unknown as Memory;
}

/** `SELECT_RECENT_TURNS`' rows (newest first) as turns, oldest first. */
export function turns(agentId: string, sessionId: string, rows: readonly Row[]): Turn[] {
  return [...rows].reverse().map((r) => ({
    id: r.id as string,
    agentId,
    sessionId,
    userMessage: r.user_message as string,
    assistantMessage: r.assistant_message as string,
    toolResults: (r.tool_results as JsonValue[] | null) ?? null,
    createdAt: r.created_at as Date,
    tokenCount: Number(r.token_count),
  }));
}

const positive = (x: unknown): number | null => (x === null || x === undefined || Number(x) === 0 ? null : Number(x));

/** The explanation of one ranked row (`ranks` in the order dense, lexical, recency). */
function explainOf(r: Row): Explain {
  const ranks = (r.ranks as (number | null)[] | null) ?? [];
  const bm25 = r.bm25 === null || r.bm25 === undefined ? null : Number(r.bm25);
  return {
    cosine: Number(r.cosine),
    denseRank: positive(ranks[0]),
    lexicalRank: positive(ranks[1]),
    recencyRank: positive(ranks[2]),
    fusedScore: Number(r.fused_score),
    rerankScore: null,
    bm25: bm25 !== null && bm25 > 0 ? bm25 : null,
    neighbourScore: null,
  };
}

/** Ranked memories from `retrieve()`'s memory rows. */
export function hits(agentId: string, rows: readonly Row[]): ScoredMemory[] {
  return rows.map((r) => {
    const explain = explainOf(r);
    return { memory: memory(agentId, r), explain };
  });
}

function tokens(found: readonly ScoredMemory[]): number {
  return found.reduce((sum, h) => sum + h.memory.tokenCount, 0);
}

/** `retrieve()`'s rows but its turns: the candidates considered, the chosen memories. */
export function packed(agentId: string, rows: readonly Row[]): PackedSearch {
  const found = hits(
    agentId,
    rows.filter((r) => r.id !== null && r.id !== undefined),
  );
  const considered = rows.length > 0 ? Number(rows[0]!.candidates_considered ?? 0) : 0;
  return { hits: found, candidatesConsidered: considered, tokens: tokens(found) };
}
