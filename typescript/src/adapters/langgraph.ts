/**
 * LangGraph.js's long-term memory store (`BaseStore`) over actrone-pg: `import { ActroneStore }
 * from "actrone-pg/langgraph"` (needs `@langchain/langgraph`).
 *
 * ```ts
 * const store = new ActroneStore(await MemoryManager.create({ config }), "my-graph", { fields: ["text"] });
 * const graph = builder.compile({ store });   // nodes reach it as config.store
 * ```
 *
 * The mapping is Python's `actrone_pg.integrations.langgraph.ActroneStore`, so a graph in either
 * language reads the items the other wrote on the same PostgreSQL schema:
 *
 * - The store belongs to one agent: every item is one of its long-term memories. A namespace is
 *   kept in the memory's metadata (`{"namespace": {"0": label, ...}, "key": key, "value": value}`),
 *   so a namespace prefix is a metadata containment filter, applied before ranking.
 * - An item's memory id derives from (namespace, key) (a UUID v5, as Python derives it): a second
 *   `put` of a key writes a new version (`updateMemory`), and `memoryHistory` shows the old values.
 * - The memory's content is the text at the value's index fields (`fields`, or the put's
 *   `index`; `["$"]`, the default, is the whole value as JSON); an item put with `index: false`,
 *   or without text there, is stored with `contentType: "langgraph-unindexed"` and found by
 *   `get` and listings but never by a query.
 * - `search(prefix, { query })` is `searchMemories` with those filters, ranked as every search
 *   (admission threshold included), `score` the fused score; without a query, the listing,
 *   newest first. A filter value is an exact match (or `{ $eq: v }`); other operators, lists and
 *   null cannot be expressed as containment and are a `ValidationError`.
 * - A batch runs its reads first, then its writes (the last put of a key wins); the new items of
 *   a batch land together (`injectMemories`).
 */
import { createHash } from "node:crypto";
import {
  BaseStore,
  getTextAtPath,
  type GetOperation,
  type Item,
  type ListNamespacesOperation,
  type MatchCondition,
  type Operation,
  type OperationResults,
  type PutOperation,
  type SearchItem,
  type SearchOperation,
} from "@langchain/langgraph-checkpoint";
import { MemoryNotFoundError, ValidationError } from "../errors.js";
import type { MemoryItem, MemoryManager } from "../manager.js";
import type { JsonObject, JsonValue, Memory, MemoryFilters } from "../models.js";
import { pythonJsonDumps } from "../text.js";

/** `contentType` of an item whose text is embedded and searched by query. */
export const INDEXED = "langgraph";
/** `contentType` of an item put with `index: false` (or without text in its index fields). */
export const UNINDEXED = "langgraph-unindexed";

// Fixed (Python's _ITEM_NAMESPACE): item ids derive from it.
const ITEM_NAMESPACE = "3f0c9d47-5a0e-4c55-9a8e-6c2b1f7d2e41";
const PAGE = 100;

/** RFC 4122 UUID v5 of `name` in `namespace` (Python's `uuid.uuid5`). */
function uuid5(namespace: string, name: string): string {
  const ns = Buffer.from(namespace.replaceAll("-", ""), "hex");
  const hash = createHash("sha1").update(ns).update(name, "utf8").digest();
  hash[6] = (hash[6]! & 0x0f) | 0x50;
  hash[8] = (hash[8]! & 0x3f) | 0x80;
  const hex = hash.subarray(0, 16).toString("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** The memory id of the item at (namespace, key): the same for every put, in both languages. */
export function itemId(namespace: readonly string[], key: string): string {
  return uuid5(ITEM_NAMESPACE, pythonJsonDumps([[...namespace], key]));
}

function positions(labels: readonly string[], wildcard = false): Record<string, string> {
  const out: Record<string, string> = {};
  labels.forEach((label, i) => {
    if (!(wildcard && label === "*")) out[String(i)] = label;
  });
  return out;
}

function itemOf(memory: Memory): Item | null {
  const meta = memory.metadata;
  const pos = meta.namespace;
  const key = meta.key;
  const value = meta.value;
  if (pos === null || typeof pos !== "object" || Array.isArray(pos) || typeof key !== "string") return null;
  if (value === null || typeof value !== "object" || Array.isArray(value)) return null;
  const labels = Object.keys(pos).map((_, i) => (pos as JsonObject)[String(i)]);
  if (labels.length === 0 || !labels.every((l) => typeof l === "string" && l !== "")) return null;
  const namespace = labels as string[];
  if (memory.id !== itemId(namespace, key)) return null;
  return { namespace, key, value: { ...(value as JsonObject) }, createdAt: memory.createdAt, updatedAt: memory.validFrom ?? memory.createdAt };
}

function condition(path: string, value: unknown): JsonValue {
  if (value !== null && typeof value === "object" && !Array.isArray(value)) {
    const entries = Object.entries(value as Record<string, unknown>);
    const operators = entries.map(([k]) => k).filter((k) => k.startsWith("$"));
    if (operators.length === 0) return Object.fromEntries(entries.map(([k, sub]) => [k, condition(`${path}.${k}`, sub)]));
    if (entries.length !== 1 || operators[0] !== "$eq") {
      throw new ValidationError(
        `filter ${JSON.stringify(path)}: ${operators.filter((o) => o !== "$eq").join(", ") || "$eq with other keys"} cannot be mapped onto ` +
          "actrone-pg's filters, which match exact values (JSON containment); use an exact value or { $eq: value }",
      );
    }
    value = (value as { $eq: unknown }).$eq;
    if (value !== null && typeof value === "object" && !Array.isArray(value)) {
      throw new ValidationError(`filter ${JSON.stringify(path)}: { $eq: object } asks for an equal object; give the object's fields as a plain filter`);
    }
  }
  if (Array.isArray(value)) throw new ValidationError(`filter ${JSON.stringify(path)}: a list matches only an equal list; filter on a scalar field`);
  if (value === null || value === undefined) throw new ValidationError(`filter ${JSON.stringify(path)}: null cannot be expressed as containment`);
  if (!["string", "number", "boolean"].includes(typeof value)) throw new ValidationError(`filter ${JSON.stringify(path)}: not a JSON value`);
  return value as JsonValue;
}

/** LangGraph's `filter` on an item's value as the JSON the value must contain. */
export function metadataFilter(filter: Record<string, unknown> | undefined): JsonObject {
  if (filter === undefined || filter === null) return {};
  if (typeof filter !== "object" || Array.isArray(filter)) throw new ValidationError("filter must be an object");
  return Object.fromEntries(Object.entries(filter).map(([k, v]) => [k, condition(k, v)]));
}

function checkNamespace(namespace: unknown, what = "namespace"): string[] {
  if (!Array.isArray(namespace) || !namespace.every((l) => typeof l === "string")) {
    throw new ValidationError(`${what} must be an array of strings`);
  }
  for (const label of namespace as string[]) {
    if (label === "" || label.includes(".")) throw new ValidationError(`${what}: labels must be non-empty and hold no "." (got ${JSON.stringify(label)})`);
  }
  return namespace as string[];
}

function checkWindow(limit: unknown, offset: unknown): [number, number] {
  const l = limit ?? 10;
  const o = offset ?? 0;
  if (!Number.isInteger(l) || (l as number) < 0) throw new ValidationError(`limit must be a non-negative integer, got ${String(limit)}`);
  if (!Number.isInteger(o) || (o as number) < 0) throw new ValidationError(`offset must be a non-negative integer, got ${String(offset)}`);
  return [l as number, o as number];
}

function matches(c: MatchCondition, namespace: readonly string[]): boolean {
  const path = c.path;
  if (path.length > namespace.length) return false;
  const part = c.matchType === "prefix" ? namespace.slice(0, path.length) : namespace.slice(namespace.length - path.length);
  return path.every((label, i) => label === "*" || label === part[i]);
}

const isPut = (op: Operation): op is PutOperation => "value" in op;
const isSearch = (op: Operation): op is SearchOperation => "namespacePrefix" in op;
const isGet = (op: Operation): op is GetOperation => "key" in op && !("value" in op);
const isList = (op: Operation): op is ListNamespacesOperation => "limit" in op && "offset" in op && !("namespacePrefix" in op);

interface Draft {
  memoryId: string;
  content: string | null;
  contentType?: string;
  metadata?: JsonObject;
}

/** LangGraph.js's `BaseStore` over one agent's memories of a {@link MemoryManager}. */
export class ActroneStore extends BaseStore {
  readonly manager: MemoryManager;
  readonly agentId: string;
  /** The value's paths whose text is embedded (LangGraph's path syntax; `["$"]`: all of it). */
  readonly fields: readonly string[];

  constructor(manager: MemoryManager, agentId: string, options: { fields?: readonly string[] } = {}) {
    super();
    this.manager = manager;
    this.agentId = agentId;
    this.fields = options.fields ?? ["$"];
  }

  async batch<Op extends Operation[]>(operations: Op): Promise<OperationResults<Op>> {
    // Everything is checked before any I/O; reads see the state before the batch's writes.
    const puts = new Map<string, PutOperation>();
    for (const op of operations) {
      if (isPut(op)) {
        if (checkNamespace(op.namespace).length === 0) throw new ValidationError("an item's namespace cannot be empty");
        if (typeof op.key !== "string") throw new ValidationError("key must be a string");
        puts.set(JSON.stringify([op.namespace, op.key]), op);
      } else if (isSearch(op)) {
        checkNamespace(op.namespacePrefix, "namespacePrefix");
        metadataFilter(op.filter);
        checkWindow(op.limit, op.offset);
      } else if (isGet(op)) {
        checkNamespace(op.namespace);
        if (typeof op.key !== "string") throw new ValidationError("key must be a string");
      } else if (isList(op)) {
        for (const c of op.matchConditions ?? []) {
          if (c.matchType !== "prefix" && c.matchType !== "suffix") throw new ValidationError(`unknown matchType ${JSON.stringify(c.matchType)}`);
        }
        checkWindow(op.limit, op.offset);
      } else {
        throw new ValidationError("unknown store operation");
      }
    }
    const writes = [...puts.values()].map((op) => this.#draft(op));
    const results: unknown[] = [];
    for (const op of operations) {
      if (isPut(op)) results.push(undefined);
      else if (isSearch(op)) results.push(await this.#search(op));
      else if (isGet(op)) results.push(await this.#get(op.namespace, op.key));
      else results.push(await this.#listNamespaces(op as ListNamespacesOperation));
    }
    await this.#write(writes);
    return results as OperationResults<Op>;
  }

  #draft(op: PutOperation): Draft {
    const memoryId = itemId(op.namespace, op.key);
    if (op.value === null) return { memoryId, content: null };
    const value = op.value as JsonObject;
    const metadata: JsonObject = { namespace: positions(op.namespace), key: op.key, value };
    const paths = op.index === false ? [] : (op.index ?? this.fields);
    const texts = paths.flatMap((path) => textAt(value, path)).filter((t) => t.trim() !== "");
    if (texts.length > 0) return { memoryId, content: texts.join("\n"), contentType: INDEXED, metadata };
    return { memoryId, content: pythonJsonDumpsUnicode(sortKeys(value)), contentType: UNINDEXED, metadata };
  }

  async #write(writes: readonly Draft[]): Promise<void> {
    const fresh: MemoryItem[] = [];
    for (const d of writes) {
      if (d.content === null) {
        await this.manager.deleteMemory(this.agentId, d.memoryId);
        continue;
      }
      try {
        await this.manager.updateMemory(this.agentId, d.memoryId, {
          content: d.content,
          contentType: d.contentType!,
          metadata: d.metadata!,
          clearExpiry: true,
        });
      } catch (exc) {
        if (!(exc instanceof MemoryNotFoundError)) throw exc;
        fresh.push({ content: d.content, contentType: d.contentType!, metadata: d.metadata!, memoryId: d.memoryId, source: "langgraph" });
      }
    }
    if (fresh.length > 0) await this.manager.injectMemories(this.agentId, fresh);
  }

  async #get(namespace: readonly string[], key: string): Promise<Item | null> {
    const memory = await this.manager.getMemory(this.agentId, itemId(namespace, key));
    if (memory === null || (memory.contentType !== INDEXED && memory.contentType !== UNINDEXED)) return null;
    const item = itemOf(memory);
    if (item === null || item.key !== key || JSON.stringify(item.namespace) !== JSON.stringify(namespace)) return null;
    return item;
  }

  #filters(prefix: readonly string[], filter: Record<string, unknown> | undefined, query: boolean): MemoryFilters {
    const contains: JsonObject = {};
    if (prefix.length > 0) contains.namespace = positions(prefix);
    const value = metadataFilter(filter);
    if (Object.keys(value).length > 0) contains.value = value;
    const filters: MemoryFilters = { contentTypes: query ? [INDEXED] : [INDEXED, UNINDEXED] };
    if (Object.keys(contains).length > 0) filters.metadata = contains;
    return filters;
  }

  async #search(op: SearchOperation): Promise<SearchItem[]> {
    const [limit, offset] = checkWindow(op.limit, op.offset);
    if (limit === 0) return [];
    const filters = this.#filters(op.namespacePrefix, op.filter, op.query !== undefined && op.query !== null);
    if (op.query !== undefined && op.query !== null) {
      const hits = await this.manager.searchMemories(this.agentId, op.query, { limit: offset + limit, explain: true, filters });
      const out: SearchItem[] = [];
      for (const m of hits) {
        const item = itemOf(m);
        if (item !== null) out.push({ ...item, score: m.explain?.rerankScore ?? m.explain?.fusedScore });
      }
      return out.slice(offset);
    }
    const out: SearchItem[] = [];
    for await (const item of this.#each(filters, offset + limit)) out.push(item);
    return out.slice(offset);
  }

  async #listNamespaces(op: ListNamespacesOperation): Promise<string[][]> {
    const [limit, offset] = checkWindow(op.limit, op.offset);
    const conditions = op.matchConditions ?? [];
    const contains: Record<string, string> = {};
    for (const c of conditions) if (c.matchType === "prefix") Object.assign(contains, positions(c.path, true));
    const filters: MemoryFilters = { contentTypes: [INDEXED, UNINDEXED] };
    if (Object.keys(contains).length > 0) filters.metadata = { namespace: contains };
    const found = new Map<string, string[]>();
    for await (const item of this.#each(filters, null)) {
      if (!conditions.every((c) => matches(c, item.namespace))) continue;
      const ns = op.maxDepth === undefined ? item.namespace : item.namespace.slice(0, op.maxDepth);
      found.set(JSON.stringify(ns), ns);
    }
    return [...found.values()].sort(compareNamespaces).slice(offset, offset + limit);
  }

  async *#each(filters: MemoryFilters, most: number | null): AsyncGenerator<Item> {
    let cursor: string | null = null;
    let seen = 0;
    for (;;) {
      const size = most === null ? PAGE : Math.min(PAGE, most - seen);
      const page = await this.manager.listMemories(this.agentId, { filters, limit: size, cursor });
      for (const memory of page.items) {
        const item = itemOf(memory);
        if (item !== null) {
          seen += 1;
          yield item;
        }
      }
      cursor = page.nextCursor;
      if (cursor === null || (most !== null && seen >= most)) return;
    }
  }
}

/** The text at `path` of a value; `"$"` is the whole value as Python's `json.dumps` writes it. */
function textAt(value: JsonObject, path: string): string[] {
  if (path === "$") return [pythonJsonDumpsUnicode(value)];
  return getTextAtPath(value, path);
}

/** `json.dumps(value, ensure_ascii=False)`. */
function pythonJsonDumpsUnicode(value: JsonValue): string {
  return pythonJsonDumps(value).replace(/(?<!\\)((?:\\\\)*)\\u([0-9a-f]{4})/g, (m, lead: string, hex: string) => {
    const code = parseInt(hex, 16);
    return code >= 0x80 ? lead + String.fromCharCode(code) : m;
  });
}

function sortKeys(value: JsonValue): JsonValue {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((k) => [k, sortKeys(value[k]!)]),
    );
  }
  return value;
}

function compareNamespaces(a: readonly string[], b: readonly string[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    if (a[i] !== b[i]) return a[i]! < b[i]! ? -1 : 1;
  }
  return a.length - b.length;
}
