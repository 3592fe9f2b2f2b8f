/**
 * The Python store's statements (generated.ts, written from `actrone_pg` at build time) made
 * ready for node-postgres: `{s}`-style identifiers and fragments filled in as Python's
 * `psycopg.sql.SQL.format` fills them, and psycopg's `%s` / `%(name)s` placeholders turned into
 * `$1…$n` (each named value bound once, whatever the number of places that use it).
 */
import { createHash } from "node:crypto";
import { FILTER_SQL, STATEMENTS } from "./generated.js";
import { timestamp } from "./rows.js";
import type { MemoryFilter } from "../../filters.js";

export type StatementName = keyof typeof STATEMENTS;

/** A statement ready for node-postgres: its text, and how to order a call's values. */
export interface Prepared {
  readonly text: string;
  /** The name it is prepared by on a connection (derived from the text). */
  readonly name: string;
  /** For named placeholders: each `$i`'s name; null for positional ones. */
  readonly names: readonly string[] | null;
}

/** A quoted SQL identifier (psycopg's `sql.Identifier`). */
export function ident(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/** Fill `{key}` fragments as `str.format` does (`{{`/`}}` are literal braces). */
export function format(template: string, fragments: Readonly<Record<string, string>>): string {
  return template.replace(/\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (m, key: string | undefined) => {
    if (m === "{{") return "{";
    if (m === "}}") return "}";
    const value = fragments[key!];
    if (value === undefined) throw new Error(`no fragment for {${key}}`);
    return value;
  });
}

/** psycopg's placeholders as node-postgres's: `%s` by position, `%(name)s` by name. */
export function placeholders(text: string): Prepared {
  const names: string[] = [];
  let positional = 0;
  const out = text.replace(/%%|%s|%\(([A-Za-z_][A-Za-z0-9_]*)\)s/g, (m, name: string | undefined) => {
    if (m === "%%") return "%";
    if (name === undefined) return `$${++positional}`;
    let i = names.indexOf(name);
    if (i < 0) i = names.push(name) - 1;
    return `$${i + 1}`;
  });
  if (positional > 0 && names.length > 0) throw new Error("a statement mixes %s and %(name)s");
  const name = `actrone_ts_${createHash("sha1").update(out).digest("hex").slice(0, 20)}`;
  return { text: out, name, names: names.length > 0 ? names : null };
}

/** The values of a named statement's call, in `$i` order. */
export function ordered(prepared: Prepared, values: Readonly<Record<string, unknown>> | readonly unknown[]): unknown[] {
  if (prepared.names === null) {
    if (!Array.isArray(values)) throw new Error("a statement of %s placeholders takes its values as an array");
    return values as unknown[];
  }
  if (Array.isArray(values)) throw new Error("a statement of %(name)s placeholders takes its values by name");
  const named = values as Readonly<Record<string, unknown>>;
  return prepared.names.map((n) => {
    if (!(n in named)) throw new Error(`no value for %(${n})s`);
    return named[n];
  });
}

/** A statement of statements.py, its schema filled in. */
export function statement(name: StatementName, schema: string): string {
  return format(STATEMENTS[name] as string, { s: ident(schema) });
}

/** A filter's conditions on a memories row `m` (builders.filter_conditions), keys in order. */
export function filterConditions(keys: readonly string[]): string {
  if (keys.length === 0) return "TRUE";
  return keys.map((k) => format(FILTER_SQL[k as keyof typeof FILTER_SQL], { value: `%(f_${k})s` })).join(" AND ");
}

/** TypeScript's filter keys by Python's. */
const FILTER_NAMES: Readonly<Record<string, keyof MemoryFilter>> = {
  tags_any: "tagsAny",
  tags_all: "tagsAll",
  content_types: "contentTypes",
  session_id: "sessionId",
  created_after: "createdAfter",
  created_before: "createdBefore",
  min_importance: "minImportance",
  metadata: "metadata",
};

/** The keys `filter` gives, by Python's names, in Python's order (FILTERS'), with their values. */
export function filterEntries(filter: MemoryFilter): [string, unknown][] {
  const out: [string, unknown][] = [];
  for (const name of Object.keys(FILTER_SQL)) {
    const key = FILTER_NAMES[name];
    if (key === undefined) throw new Error(`the TypeScript filters have no key for Python's ${name}`);
    const value = filter[key];
    if (value !== undefined && value !== null) out.push([name, value]);
  }
  return out;
}

/**
 * `filter` as the JSON object `retrieve()` takes (builders.filter_json): each key by Python's
 * name, arrays as arrays, timestamps in ISO 8601 with their offset, metadata as an object. The
 * TypeScript filters have only the keys `retrieve()` names itself, so none travels as a
 * condition.
 */
export function filterJson(filter: MemoryFilter): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of filterEntries(filter)) {
    if (value instanceof Date) out[key] = timestamp(value);
    else if (Array.isArray(value)) out[key] = [...(value as unknown[])];
    else out[key] = value;
  }
  return out;
}

/** builders.list_memories' text. */
export function listMemories(schema: string, keys: readonly string[], after: boolean): string {
  return format(STATEMENTS.LIST_MEMORIES, {
    s: ident(schema),
    after: after ? STATEMENTS.LIST_AFTER : "TRUE",
    where: filterConditions(keys),
  });
}

/** erase_agent's deletes (statements.ERASE), the schema filled in. */
export function eraseStatements(schema: string): string[] {
  return (STATEMENTS.ERASE as readonly string[]).map((t) => format(t, { s: ident(schema) }));
}
