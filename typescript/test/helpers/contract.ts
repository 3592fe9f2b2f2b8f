// The store's contract, run by the PostgreSQL tests on one server and on a Citus cluster.
import assert from "node:assert/strict";
import { MemoryNotFoundError, type MemoryManager } from "../../src/index.js";

/** Turns, memories, search, filters, update, history, listing, delete and erase through `mm`. */
export async function storeContract(mm: MemoryManager): Promise<void> {
  const agent = "agent-1";
  await mm.storeTurn(agent, "s1", "hello there", "hi!", { toolResults: [{ tool: "x", value: 1.5 }] });
  await mm.storeTurn(agent, "s1", "what is my cat called?", "Miso, you said.");
  const turns = await mm.getRecentTurns(agent, "s1");
  assert.deepEqual(
    turns.map((t) => t.userMessage),
    ["hello there", "what is my cat called?"],
  );
  assert.deepEqual(turns[0]!.toolResults, [{ tool: "x", value: 1.5 }]);

  const ids = await mm.injectMemories(agent, [
    { content: "The user's cat is called Miso", tags: ["pets"], createdAt: new Date("2026-01-01T00:00:00Z") },
    { content: "The user lives in Lisbon", tags: ["home"], createdAt: new Date("2026-01-02T00:00:00Z") },
    { content: "The user plays the cello on Sundays", tags: ["hobby"], createdAt: new Date("2026-01-03T00:00:00Z") },
  ]);
  assert.equal(ids.length, 3);
  const hits = await mm.searchMemories(agent, "cat Miso", { limit: 2, explain: true });
  assert.equal(hits[0]!.id, ids[0]);
  assert.equal(hits[0]!.explain!.lexicalRank, 1);
  assert.equal(hits[0]!.explain!.denseRank !== null, true);

  const ctx = await mm.retrieveContext(agent, "s1", "where does the user live", 4000);
  assert.deepEqual(
    ctx.recentTurns.map((t) => t.userMessage),
    ["hello there", "what is my cat called?"],
  );
  assert.equal(ctx.episodicMemories[0]!.id, ids[1]);
  assert.equal(ctx.episodicTokens, ctx.episodicMemories.reduce((s, m) => s + m.tokenCount, 0));

  const filtered = await mm.searchMemories(agent, "user", { limit: 10, filters: { tagsAny: ["hobby", "home"] } });
  assert.deepEqual(new Set(filtered.map((m) => m.id)), new Set([ids[1], ids[2]]));

  const updated = await mm.updateMemory(agent, ids[1]!, { content: "The user lives in Porto" });
  assert.equal(updated.id, ids[1]);
  assert.equal(updated.version, 2);
  const history = await mm.memoryHistory(agent, ids[1]!);
  assert.deepEqual(
    history.map((m) => m.content),
    ["The user lives in Lisbon", "The user lives in Porto"],
  );
  const porto = await mm.searchMemories(agent, "Porto", { limit: 1 });
  assert.equal(porto[0]!.id, ids[1]);

  const page1 = await mm.listMemories(agent, { limit: 2 });
  assert.deepEqual(
    page1.items.map((m) => m.id),
    [ids[2], ids[1]],
  );
  const page2 = await mm.listMemories(agent, { limit: 2, cursor: page1.nextCursor });
  assert.deepEqual(
    page2.items.map((m) => m.id),
    [ids[0]],
  );
  assert.equal(page2.nextCursor, null);

  assert.equal(await mm.deleteMemory(agent, ids[0]!), true);
  assert.equal(await mm.getMemory(agent, ids[0]!), null);
  await assert.rejects(mm.updateMemory(agent, ids[0]!, { content: "x" }), MemoryNotFoundError);

  await mm.eraseAgent(agent);
  assert.deepEqual(await mm.getRecentTurns(agent, "s1"), []);
  assert.equal((await mm.listMemories(agent)).items.length, 0);
}
