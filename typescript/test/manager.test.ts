// The manager's behaviour beyond ranking: lifecycle (versions, expiry, listing, erasure), L1,
// closing, and errors of its components arriving as ActroneError subclasses.
import assert from "node:assert/strict";
import { test } from "node:test";

import type { Embedder } from "../src/embedders/base.js";
import { HashingEmbedder } from "../src/embedders/hashing.js";
import {
  ConfigurationError,
  DimensionMismatchError,
  EmbedderError,
  MemoryNotFoundError,
  RerankerError,
  StoreError,
  ValidationError,
} from "../src/errors.js";
import { createMemoryManager, MemoryManager, type CreateOptions } from "../src/manager.js";
import { InMemoryStore } from "../src/stores/memory.js";

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function manager(options: CreateOptions = {}): Promise<MemoryManager> {
  return MemoryManager.create({ embedder: new HashingEmbedder(), ...options, config: { consolidator: "none", ...(options.config ?? {}) } });
}

test("an update writes a new version under the same id and keeps the old one", async () => {
  const mm = await manager();
  const id = await mm.injectMemory("a", "The user likes tea.", { tags: ["drinks"], importance: 0.4, metadata: { v: 1 } });
  const updated = await mm.updateMemory("a", id, { content: "The user likes green tea." });
  assert.equal(updated.id, id);
  assert.equal(updated.version, 2);
  assert.deepEqual(updated.tags, ["drinks"]);
  assert.equal(updated.importance, 0.4);
  assert.equal(updated.tokenCount, Math.ceil("The user likes green tea.".length / 4));
  await mm.updateMemory("a", id, { importance: 0.9, tags: ["tea"] });
  const history = await mm.memoryHistory("a", id);
  assert.deepEqual(history.map((m) => [m.version, m.content, m.importance]), [
    [1, "The user likes tea.", 0.4],
    [2, "The user likes green tea.", 0.4],
    [3, "The user likes green tea.", 0.9],
  ]);
  assert.equal(history[0]!.validTo!.getTime(), history[1]!.validFrom!.getTime());
  assert.equal(history[2]!.validTo, null);
  assert.equal((await mm.getMemory("a", id))!.version, 3);
  // Searches see the current version only.
  assert.deepEqual((await mm.searchMemories("a", "green tea")).map((m) => m.version), [3]);
  await assert.rejects(mm.updateMemory("a", "missing", { content: "x" }), MemoryNotFoundError);
  await assert.rejects(mm.updateMemory("b", id, { content: "x" }), MemoryNotFoundError);
  await assert.rejects(mm.updateMemory("a", id, { expiresAt: new Date(Date.now() + 1000), clearExpiry: true }), ValidationError);
});

test("an expired memory is never returned, and the sweeper deletes it", async () => {
  const mm = await manager();
  const soon = await mm.injectMemory("a", "Ephemeral peanut note", { expiresAt: new Date(Date.now() + 60) });
  await mm.injectMemory("a", "Lasting peanut note");
  assert.equal((await mm.searchMemories("a", "peanut note")).length, 2);
  await sleep(100);
  assert.equal(await mm.getMemory("a", soon), null);
  assert.deepEqual((await mm.searchMemories("a", "peanut note")).map((m) => m.content), ["Lasting peanut note"]);
  assert.deepEqual((await mm.listMemories("a")).items.map((m) => m.content), ["Lasting peanut note"]);
  assert.deepEqual(await mm.memoryHistory("a", soon), []);
  assert.equal(await mm.countMemories("a"), 2);
  assert.equal(await mm.sweepExpired(), 1);
  assert.equal(await mm.countMemories("a"), 1);
  await assert.rejects(mm.injectMemory("a", "x", { expiresAt: new Date(Date.now() - 1) }), ValidationError);
});

test("listing pages newest first with cursors, and filters apply", async () => {
  const mm = await manager();
  const base = Date.UTC(2024, 0, 1);
  const items = Array.from({ length: 23 }, (_, i) => ({
    content: `memory ${i}`,
    createdAt: new Date(base + Math.floor(i / 2) * 1000), // pairs share a time: ids break the tie
    tags: i % 3 === 0 ? ["three"] : [],
  }));
  const ids = await mm.injectMemories("a", items);
  const seen: string[] = [];
  let cursor: string | null = null;
  do {
    const page = await mm.listMemories("a", { limit: 5, cursor });
    assert.ok(page.items.length <= 5);
    seen.push(...page.items.map((m) => m.id));
    cursor = page.nextCursor;
  } while (cursor !== null);
  const expected = ids
    .map((id, i) => ({ id, t: items[i]!.createdAt.getTime() }))
    .sort((x, y) => y.t - x.t || (x.id < y.id ? 1 : -1))
    .map((x) => x.id);
  assert.deepEqual(seen, expected);
  const three = await mm.listMemories("a", { filters: { tagsAny: ["three"] } });
  assert.equal(three.items.length, 8);
  await assert.rejects(mm.listMemories("a", { cursor: "not a cursor" }), ValidationError);
});

test("recent turns: trimmed, idempotent by id, packed newest first without holes", async () => {
  const mm = await manager({ config: { maxSessionTurns: 4 } });
  for (let i = 0; i < 6; i++) await mm.storeTurn("a", "s", `user ${i}`, "x".repeat(i * 40), { turnId: `t${i}` });
  await mm.storeTurn("a", "s", "user 5", "x".repeat(200), { turnId: "t5" }); // a retry: ignored
  const turns = await mm.getRecentTurns("a", "s");
  assert.deepEqual(turns.map((t) => t.id), ["t2", "t3", "t4", "t5"]);
  // Budget 200: L1 share 70 tokens; t5 costs 2 + 50 = 52, t4 costs 2 + 40 = 42: only t5 fits.
  const ctx = await mm.retrieveContext("a", "s", "anything", 200);
  assert.deepEqual(ctx.recentTurns.map((t) => t.id), ["t5"]);
  assert.equal(ctx.sessionTokens, 52);
  assert.equal(ctx.sessionBudget, 70);
  await mm.clearSession("a", "s");
  assert.deepEqual(await mm.getRecentTurns("a", "s"), []);
});

test("erasing an agent removes its memories and turns, and no other agent's", async () => {
  const mm = await manager();
  await mm.injectMemory("a", "secret plan");
  await mm.injectMemory("b", "secret plan");
  await mm.storeTurn("a", "s", "hi", "hello");
  await mm.eraseAgent("a");
  assert.equal(await mm.countMemories("a"), 0);
  assert.deepEqual(await mm.getRecentTurns("a", "s"), []);
  assert.equal(await mm.countMemories("b"), 1);
});

test("redacted sensitivities come back redacted; the threshold defaults to 0.7", async () => {
  const plain: Embedder = {
    name: "plain",
    dimensions: 3,
    relevanceThreshold: null,
    embedBatch: async (texts) => texts.map((t) => [1, t.length % 5, 0.5]),
  };
  const mm = await manager({ embedder: plain, config: { redactSensitivities: ["secret"] } });
  assert.equal(mm.relevanceThreshold, 0.7);
  const id = await mm.injectMemory("a", "the code is 1234", { sensitivity: "secret" });
  assert.equal((await mm.getMemory("a", id))!.content, "[redacted: secret]");
  const withThreshold = await manager({ config: { relevanceThreshold: 0.5 } });
  assert.equal(withThreshold.relevanceThreshold, 0.5);
});

test("await using closes the manager at the end of the scope", async () => {
  let closed = 0;
  {
    await using mm = await createMemoryManager({ config: { consolidator: "none", embeddingProvider: "hashing" } });
    const close = mm.close.bind(mm);
    mm.close = async () => {
      closed++;
      await close();
    };
    await mm.injectMemory("a", "x");
  }
  assert.equal(closed, 1);
});

test("errors of components arrive as ActroneError subclasses with their cause", async () => {
  const broken = new InMemoryStore();
  broken.search = async () => {
    throw new TypeError("driver exploded");
  };
  const mm = await manager({ store: broken });
  await assert.rejects(mm.searchMemories("a", "q"), (exc: unknown) => exc instanceof StoreError && exc.cause instanceof TypeError);

  const garbage = (out: unknown): Embedder => ({ name: "g", dimensions: 2, relevanceThreshold: null, embedBatch: async () => out as number[][] });
  for (const out of [[[1, Number.NaN]], [[0, 0]], "nope", [[1, 2], [3, 4]]]) {
    const g = await manager({ embedder: garbage(out) });
    await assert.rejects(g.injectMemory("a", "x"), EmbedderError, JSON.stringify(out));
    assert.equal(await g.countMemories("a"), 0);
  }
  const wrongSize = await manager({ embedder: garbage([[1, 2, 3]]) });
  await assert.rejects(wrongSize.injectMemory("a", "x"), DimensionMismatchError);
  const throwing: Embedder = { name: "t", dimensions: 2, relevanceThreshold: null, embedBatch: async () => Promise.reject(new Error("down")) };
  await assert.rejects((await manager({ embedder: throwing })).injectMemory("a", "x"), EmbedderError);

  const reranked = await manager({
    config: { relevanceThreshold: 0.01 },
    reranker: { score: async () => [1] },
  });
  await reranked.injectMemories("a", ["peanut one", "peanut two"]);
  await assert.rejects(reranked.searchMemories("a", "peanut"), RerankerError);
  const failing = await manager({ reranker: { score: async () => Promise.reject(new Error("model gone")) }, config: { relevanceThreshold: 0.01 } });
  await failing.injectMemory("a", "peanut");
  await assert.rejects(failing.searchMemories("a", "peanut"), RerankerError);

  const counter = await manager({ tokenCounter: () => -1 });
  await assert.rejects(counter.injectMemory("a", "x"), ConfigurationError);
  await assert.rejects(manager({ config: { rerankEnabled: true } }), ConfigurationError);
  await assert.rejects(manager({ config: { rrfK: 0 } }), (exc: unknown) => exc instanceof ConfigurationError && exc.field === "rrfK");
});

test("a reranker reorders the top rerankTopK and records its score", async () => {
  const mm = await manager({
    config: { relevanceThreshold: 0.01, rerankTopK: 2 },
    reranker: { score: async (_q, texts) => texts.map((t) => t.length) },
  });
  await mm.injectMemories("a", ["peanut", "peanut butter sandwich", "peanut allergy is serious today"]);
  const hits = await mm.searchMemories("a", "peanut", { explain: true });
  assert.equal(hits.length, 2); // only the window is reranked and returned
  assert.ok(hits[0]!.content.length >= hits[1]!.content.length);
  assert.equal(hits[0]!.explain!.rerankScore, hits[0]!.content.length);
});
