/** The manager's L2 writes and the memories' lifecycle: inject, update, history, list, erase. */
import { ValidationError, MemoryNotFoundError } from "../errors.js";
import { parseFilters } from "../filters.js";
import { decodeCursor, encodeCursor, memoryId } from "../ids.js";
import type { JsonObject, Memory, MemoryFilters, MemoryPage } from "../models.js";
import { micros } from "../ranking.js";
import type { MemoryRecord } from "../store.js";
import * as v from "../validation.js";
import type { ManagerContext } from "./context.js";

/** One memory to inject: its content and optional fields. */
export interface MemoryItem {
  content: string;
  sessionId?: string | null;
  contentType?: string;
  importance?: number;
  tags?: readonly string[];
  source?: string;
  sensitivity?: string;
  createdAt?: Date | null;
  metadata?: JsonObject | null;
  /** Replace the agent's memory with this id (by default the id derives from agent, session and content). */
  memoryId?: string | null;
  /** The moment from which the memory is never returned (must be in the future). */
  expiresAt?: Date | null;
  sourceTurnIds?: readonly string[];
  /** Text embedded before the content but not stored (the turn a reply answers). */
  embeddingContext?: string | null;
}

/** The fields of {@link MemoryManager.updateMemory}; those not given keep their values. */
export interface MemoryUpdate {
  content?: string;
  tags?: readonly string[];
  importance?: number;
  metadata?: JsonObject;
  contentType?: string;
  expiresAt?: Date;
  /** Remove the expiry (not with `expiresAt`). */
  clearExpiry?: boolean;
}

const ITEM_FIELDS = new Set([
  "content",
  "sessionId",
  "contentType",
  "importance",
  "tags",
  "source",
  "sensitivity",
  "createdAt",
  "metadata",
  "memoryId",
  "expiresAt",
  "sourceTurnIds",
  "embeddingContext",
]);

/** Write long-term memories and manage their lifecycle. */
export class Memories {
  readonly ctx: ManagerContext;

  constructor(ctx: ManagerContext) {
    this.ctx = ctx;
  }

  /**
   * Store many memories at once: all land or none does. Returns their ids in order. Each item
   * is a string (the content) or a {@link MemoryItem}.
   */
  async injectMemories(agentId: string, items: readonly (MemoryItem | string)[]): Promise<string[]> {
    v.checkId("agentId", agentId);
    if (typeof items === "string" || !Array.isArray(items)) {
      throw new ValidationError("items must be an array of memories (strings or objects)");
    }
    const now = new Date();
    const built = items.map((item, i) => this.#buildMemory(agentId, item, i, now));
    if (built.length === 0) return [];
    const unique = new Map<string, [Memory, string]>();
    for (const [m, embedded] of built) {
      const earlier = unique.get(m.id);
      if (earlier !== undefined && earlier[0].content !== m.content) {
        throw new ValidationError(`memory id ${JSON.stringify(m.id)} is given twice in one batch with different content`);
      }
      unique.set(m.id, [m, embedded]);
    }
    const entries = [...unique.values()];
    const vectors = await this.ctx.embed(entries.map(([, e]) => e));
    const records: MemoryRecord[] = entries.map(([memory], i) => ({ memory, vector: vectors[i]! }));
    await this.ctx.onStore(() => this.ctx.store.upsertMemories(records));
    return built.map(([m]) => m.id);
  }

  #buildMemory(agentId: string, raw: MemoryItem | string, index: number, now: Date): [Memory, string] {
    const item: Record<string, unknown> = typeof raw === "string" ? { content: raw } : (raw as unknown as Record<string, unknown>);
    if (item === null || typeof item !== "object" || Array.isArray(item)) {
      throw new ValidationError(`item ${index}: expected a string or an object, got ${item === null ? "null" : typeof item}`);
    }
    const unknown = Object.keys(item)
      .filter((k) => !ITEM_FIELDS.has(k) && item[k] !== undefined)
      .sort();
    if (unknown.length > 0) throw new ValidationError(`item ${index}: unknown field(s) ${JSON.stringify(unknown)}`);
    if (item.content === undefined) throw new ValidationError(`item ${index}: 'content' is required`);
    const limit = this.ctx.config.maxTextChars;
    const given = <T>(key: string, fallback: T): unknown => (item[key] === undefined || item[key] === null ? fallback : item[key]);
    try {
      const content = v.checkText("content", item.content, limit);
      const sessionId = given("sessionId", null);
      if (sessionId !== null) v.checkId("sessionId", sessionId);
      const created = given("createdAt", null);
      const createdAt = created === null ? now : v.checkDate("createdAt", created);
      const explicitId = given("memoryId", null);
      const id = explicitId === null ? memoryId(agentId, sessionId as string | null, content) : v.checkId("memoryId", explicitId);
      const context = given("embeddingContext", null);
      const embedded = context === null ? content : `${v.checkText("embeddingContext", context, limit)}\n${content}`;
      const memory: Memory = {
        id,
        agentId,
        sessionId: sessionId as string | null,
        content,
        contentType: v.checkLabel("contentType", given("contentType", "injected")),
        importance: v.checkImportance(given("importance", 0.5)),
        tags: v.checkTags(given("tags", [])),
        source: v.checkLabel("source", given("source", "injected")),
        sensitivity: v.checkLabel("sensitivity", given("sensitivity", "none")),
        createdAt,
        metadata: v.checkMetadata(given("metadata", null), limit),
        embedder: this.ctx.embedder.name,
        tokenCount: this.ctx.countTokens(content),
        expiresAt: checkExpiry(given("expiresAt", null), now),
        sourceTurnIds: v.checkTurnIds(given("sourceTurnIds", [])),
        version: 1,
        validFrom: now,
        validTo: null,
        explain: null,
      };
      return [memory, embedded];
    } catch (exc) {
      if (exc instanceof ValidationError) {
        const Kind = exc.constructor as new (message: string) => ValidationError;
        throw new Kind(`item ${index}: ${exc.message}`);
      }
      throw exc;
    }
  }

  /** Delete one of the agent's memories; false if the agent has no such memory. */
  async deleteMemory(agentId: string, memoryId: string): Promise<boolean> {
    v.checkId("agentId", agentId);
    v.checkId("memoryId", memoryId);
    return this.ctx.onStore(() => this.ctx.store.deleteMemory(agentId, memoryId));
  }

  /** The current version of one of the agent's memories, or null (also once expired). */
  async getMemory(agentId: string, memoryId: string): Promise<Memory | null> {
    v.checkId("agentId", agentId);
    v.checkId("memoryId", memoryId);
    const found = this.ctx.live(await this.ctx.onStore(() => this.ctx.store.getMemory(agentId, memoryId)), new Date());
    return found === null ? null : this.ctx.shown(found);
  }

  /**
   * Write a new version of a memory and return it; the replaced version is kept. Fields not
   * given keep their values; the content is embedded again. A missing or expired memory raises
   * {@link MemoryNotFoundError}.
   */
  async updateMemory(agentId: string, memoryId: string, update: MemoryUpdate = {}): Promise<Memory> {
    v.checkId("agentId", agentId);
    v.checkId("memoryId", memoryId);
    if (update === null || typeof update !== "object") throw new ValidationError("the update must be an object");
    const limit = this.ctx.config.maxTextChars;
    const changes: { -readonly [K in keyof Memory]?: Memory[K] } = {};
    if (update.content !== undefined) changes.content = v.checkText("content", update.content, limit);
    if (update.tags !== undefined) changes.tags = v.checkTags(update.tags);
    if (update.importance !== undefined) changes.importance = v.checkImportance(update.importance);
    if (update.metadata !== undefined) changes.metadata = v.checkMetadata(update.metadata, limit);
    if (update.contentType !== undefined) changes.contentType = v.checkLabel("contentType", update.contentType);
    const clear = update.clearExpiry ?? false;
    if (typeof clear !== "boolean") throw new ValidationError(`clearExpiry must be true or false, got ${String(clear)}`);
    if (clear && update.expiresAt !== undefined) {
      throw new ValidationError("pass either expiresAt (a new expiry) or clearExpiry: true (no expiry), not both");
    }
    if (update.expiresAt !== undefined) changes.expiresAt = checkExpiry(update.expiresAt, new Date());
    if (clear) changes.expiresAt = null;
    const found = this.ctx.live(await this.ctx.onStore(() => this.ctx.store.getMemory(agentId, memoryId)), new Date());
    if (found === null) throw new MemoryNotFoundError(`agent ${JSON.stringify(agentId)} has no memory ${JSON.stringify(memoryId)}`);
    const embedded = changes.content ?? found.content;
    const [prepared] = await this.ctx.embed([embedded]);
    const build = async (current: Memory): Promise<MemoryRecord> => {
      const now = new Date();
      if (this.ctx.live(current, now) === null) {
        throw new MemoryNotFoundError(`agent ${JSON.stringify(agentId)} has no memory ${JSON.stringify(memoryId)}`);
      }
      const text = changes.content ?? current.content;
      const vector = text === embedded ? prepared! : (await this.ctx.embed([text]))[0]!;
      const validFrom = current.validFrom !== null && current.validFrom.getTime() > now.getTime() ? current.validFrom : now;
      const memory: Memory = {
        ...current,
        ...changes,
        embedder: this.ctx.embedder.name,
        tokenCount: this.ctx.countTokens(text),
        version: current.version + 1,
        validFrom,
        validTo: null,
        explain: null,
      };
      return { memory, vector };
    };
    const written = await this.ctx.onStore(() => this.ctx.store.updateMemory(agentId, memoryId, build));
    if (written === null) throw new MemoryNotFoundError(`agent ${JSON.stringify(agentId)} has no memory ${JSON.stringify(memoryId)}`);
    return this.ctx.shown(written);
  }

  /** Every version of the memory, oldest first; `[]` if there is none (or it expired). */
  async memoryHistory(agentId: string, memoryId: string): Promise<Memory[]> {
    v.checkId("agentId", agentId);
    v.checkId("memoryId", memoryId);
    const versions = await this.ctx.onStore(() => this.ctx.store.memoryHistory(agentId, memoryId));
    if (versions.length === 0 || this.ctx.live(versions[versions.length - 1]!, new Date()) === null) return [];
    return versions.map((m) => this.ctx.shown(m));
  }

  /**
   * A page of the agent's current memories, newest first (`createdAt`, then id). Pass the
   * page's `nextCursor` back as `cursor` for the next page (null after the last).
   */
  async listMemories(
    agentId: string,
    options: { filters?: MemoryFilters | null; limit?: number; cursor?: string | null } = {},
  ): Promise<MemoryPage> {
    v.checkId("agentId", agentId);
    const { filters = null, limit = 100, cursor = null } = options ?? {};
    v.checkLimit("limit", limit);
    const filter = parseFilters(filters, this.ctx.config.maxTextChars);
    const after = cursor === null ? null : decodeCursor(cursor);
    const found = await this.ctx.onStore(() => this.ctx.store.listMemories(agentId, { now: new Date(), limit: limit + 1, after, filter }));
    const items = found.slice(0, limit);
    const last = items[items.length - 1];
    return {
      items: items.map((m) => this.ctx.shown(m)),
      nextCursor: found.length > limit && last !== undefined ? encodeCursor(micros(last.createdAt), last.id) : null,
    };
  }

  /** How many memories the agent has. */
  async countMemories(agentId: string): Promise<number> {
    v.checkId("agentId", agentId);
    return this.ctx.onStore(() => this.ctx.store.countMemories(agentId));
  }

  /** Remove every turn, session, memory and statistic of the agent. */
  async eraseAgent(agentId: string): Promise<void> {
    v.checkId("agentId", agentId);
    await this.ctx.onStore(() => this.ctx.store.eraseAgent(agentId));
  }

  /** Delete up to `limit` memories whose `expiresAt` has passed (every agent); returns how many. */
  async sweepExpired(limit = 10_000): Promise<number> {
    v.checkLimit("limit", limit);
    return this.ctx.onStore(() => this.ctx.store.sweepExpiredMemories({ limit }));
  }
}

function checkExpiry(value: unknown, now: Date): Date | null {
  if (value === null || value === undefined) return null;
  const expires = v.checkDate("expiresAt", value);
  if (expires.getTime() <= now.getTime()) {
    throw new ValidationError(
      `expiresAt ${expires.toISOString()} is not in the future; a memory that expired already would never be returned (omit it, or pass a later time)`,
    );
  }
  return expires;
}

