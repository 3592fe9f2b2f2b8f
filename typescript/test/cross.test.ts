// One memory, two languages: a LoCoMo conversation written by Python is ranked by TypeScript
// exactly as Python ranks it (same memories, same order, same scores, for every question), the
// reverse, and the lifecycle of a memory seen alike from both sides. The conversations are read
// at test time from ../shared/eval/locomo-dev (ACTRONE_EVAL_DIR), never copied here.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { after, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { MemoryManager, type Memory } from "../src/index.js";
import { DSN, dropSchema, freshSchema, helpersDir, python } from "./helpers/pg.js";

const evalDir = process.env.ACTRONE_EVAL_DIR ?? resolve(helpersDir, "..", "..", "..", "..", "shared", "eval", "locomo-dev");
const skip = !DSN
  ? "no PostgreSQL (test/run.mjs starts one; or set ACTRONE_TEST_POSTGRES_DSN)"
  : !existsSync(evalDir)
    ? `no LoCoMo conversations at ${evalDir} (set ACTRONE_EVAL_DIR): the cross-language ranking tests need them`
    : false;

/** The same threshold on both sides, set explicitly (the languages' defaults differ: 0.72 vs 0.7). */
const THRESHOLD = 0.1;
const BUDGET = 3000;
const LIMIT = 10;

interface Explained {
  cosine: number;
  denseRank: number | null;
  lexicalRank: number | null;
  recencyRank: number | null;
  fusedScore: number;
}
interface Answer {
  context: string[];
  contextScores: Explained[];
  turns: string[];
  episodicTokens: number;
  sessionTokens: number;
  search: string[];
  searchScores: Explained[];
}
interface Conversation {
  id: string;
  items: { content: string; sessionId: string; createdAt: string; metadata: { dia_id: string } }[];
  questions: string[];
}

const schemas: string[] = [];
after(async () => {
  if (DSN) for (const s of schemas) await dropSchema(s);
});

function config(schema: string) {
  return { backend: "postgres", postgresDsn: DSN, postgresSchema: schema, embeddingProvider: "hashing", relevanceThreshold: THRESHOLD } as const;
}

function explained(m: Memory): Explained {
  const e = m.explain!;
  return { cosine: e.cosine, denseRank: e.denseRank, lexicalRank: e.lexicalRank, recencyRank: e.recencyRank, fusedScore: e.fusedScore };
}

/** TypeScript's answers to `queries`, as cross.py's `read` gives Python's. */
async function tsRead(schema: string, agent: string, session: string, queries: readonly string[]): Promise<Answer[]> {
  const mm = await MemoryManager.create({ config: config(schema) });
  try {
    const out: Answer[] = [];
    for (const query of queries) {
      const ctx = await mm.retrieveContext(agent, session, query, BUDGET, { explain: true });
      const hits = await mm.searchMemories(agent, query, { limit: LIMIT, explain: true });
      out.push({
        context: ctx.episodicMemories.map((m) => m.id),
        contextScores: ctx.episodicMemories.map(explained),
        turns: ctx.recentTurns.map((t) => t.id),
        episodicTokens: ctx.episodicTokens,
        sessionTokens: ctx.sessionTokens,
        search: hits.map((m) => m.id),
        searchScores: hits.map(explained),
      });
    }
    return out;
  } finally {
    await mm.close();
  }
}

function assertSameAnswers(ts: readonly Answer[], py: readonly Answer[], queries: readonly string[]): void {
  assert.equal(ts.length, py.length);
  const found = py.filter((a) => a.search.length > 0).length;
  assert.ok(found > queries.length / 2, `most questions find memories (${found} of ${queries.length})`);
  for (let i = 0; i < py.length; i++) {
    assert.deepEqual(ts[i], py[i], `question ${i}: ${JSON.stringify(queries[i])}`);
  }
}

async function conversation(file: string): Promise<Conversation> {
  return python<Conversation>("locomo", { file: join(evalDir, file) });
}

describe("cross-language ranking on LoCoMo conversations", { skip }, () => {
  test("Python writes conv-26; TypeScript returns the same memories in the same order for every question", async () => {
    const schema = freshSchema("x_py");
    schemas.push(schema);
    const conv = await conversation("conv-26.json");
    const agent = `locomo-${conv.id}`;
    const turns = [
      { sessionId: "live", user: "I just got back from the support group.", assistant: "How did it go?", toolResults: [{ n: 1, ok: true, x: 0.1 }] },
      { sessionId: "live", user: "Good! We talked about painting.", assistant: "Nice." },
    ];
    await python("write", { dsn: DSN, schema, threshold: THRESHOLD, agent, items: conv.items, turns });
    const py = await python<{ results: Answer[] }>("read", {
      dsn: DSN,
      schema,
      threshold: THRESHOLD,
      agent,
      session: "live",
      queries: conv.questions,
      budget: BUDGET,
      limit: LIMIT,
    });
    const ts = await tsRead(schema, agent, "live", conv.questions);
    assert.equal(py.results[0]!.turns.length, 2);
    assertSameAnswers(ts, py.results, conv.questions);
  });

  test("TypeScript writes conv-30; Python returns the same memories in the same order for every question", async () => {
    const schema = freshSchema("x_ts");
    schemas.push(schema);
    const conv = await conversation("conv-30.json");
    const agent = `locomo-${conv.id}`;
    const mm = await MemoryManager.create({ config: config(schema) });
    try {
      await mm.injectMemories(
        agent,
        conv.items.map((it) => ({ content: it.content, sessionId: it.sessionId, createdAt: new Date(it.createdAt), metadata: it.metadata })),
      );
      await mm.storeTurn(agent, "live", "Tell me about the dance studio.", "It opened last month.", { toolResults: [{ price: 12.5, tags: ["a", "b"] }] });
    } finally {
      await mm.close();
    }
    const py = await python<{ results: Answer[] }>("read", {
      dsn: DSN,
      schema,
      threshold: THRESHOLD,
      agent,
      session: "live",
      queries: conv.questions,
      budget: BUDGET,
      limit: LIMIT,
    });
    const ts = await tsRead(schema, agent, "live", conv.questions);
    assert.equal(ts[0]!.turns.length, 1);
    assertSameAnswers(ts, py.results, conv.questions);
  });
});

describe("the lifecycle seen from both sides", { skip: DSN ? false : "no PostgreSQL" }, () => {
  test("update, history, filters, expiry and erase", async () => {
    const schema = freshSchema("x_life");
    schemas.push(schema);
    const agent = "life";
    const mm = await MemoryManager.create({ config: config(schema) });
    try {
      const ids = await mm.injectMemories(agent, [
        { content: "Alice adopted a dog named Biscuit", tags: ["pets"], createdAt: new Date("2026-03-01T10:00:00.000Z") },
        { content: "Alice moved to Porto in March", tags: ["home"], createdAt: new Date("2026-03-02T10:00:00.000Z") },
        { content: "Alice's dog Biscuit likes the beach", tags: ["pets", "places"], createdAt: new Date("2026-03-03T10:00:00.000Z") },
      ]);
      // The same turn stored by each side: token counts of tool results (json.dumps with its
      // ASCII escapes and separators on one side, its port on the other) must agree.
      const tools = [{ a: 1.5, b: "é ☕ 🙂", c: [1, 2, { d: null, e: true }], "k\"ey": "line\nbreak" }];
      await mm.storeTurn(agent, "s", "hi ☕", "hello", { toolResults: tools });
      await python("write", { dsn: DSN, schema, threshold: THRESHOLD, agent, items: [], turns: [{ sessionId: "p", user: "hi ☕", assistant: "hello", toolResults: tools }] });
      // Python updates what TypeScript wrote; TypeScript sees the new version and the history.
      await python("update", { dsn: DSN, schema, threshold: THRESHOLD, agent, memoryId: ids[1], content: "Alice moved to Lisbon in April" });
      const current = await mm.getMemory(agent, ids[1]!);
      assert.equal(current!.content, "Alice moved to Lisbon in April");
      assert.equal(current!.version, 2);
      assert.deepEqual(
        (await mm.memoryHistory(agent, ids[1]!)).map((m) => m.content),
        ["Alice moved to Porto in March", "Alice moved to Lisbon in April"],
      );
      // TypeScript updates; Python sees the same versions.
      await mm.updateMemory(agent, ids[0]!, { tags: ["pets", "dogs"] });
      const seen = await python<{ memory: { tags: string[]; version: number }; history: { version: number; tags: string[] }[]; listed: string[]; turns: { tokenCount: number }[] }>(
        "lifecycle",
        { dsn: DSN, schema, threshold: THRESHOLD, agent, memoryId: ids[0], session: "s", pageSize: 2 },
      );
      assert.deepEqual(seen.memory.tags, ["pets", "dogs"]);
      assert.deepEqual(
        seen.history.map((m) => m.version),
        [1, 2],
      );
      const tsList: string[] = [];
      let cursor: string | null = null;
      do {
        const page = await mm.listMemories(agent, { limit: 2, cursor });
        tsList.push(...page.items.map((m) => m.id));
        cursor = page.nextCursor;
      } while (cursor !== null);
      assert.deepEqual(tsList, seen.listed);
      const [ours] = await mm.getRecentTurns(agent, "s");
      const [theirs] = await mm.getRecentTurns(agent, "p");
      assert.equal(ours!.tokenCount, theirs!.tokenCount);
      assert.deepEqual(ours!.toolResults, theirs!.toolResults);
      assert.equal(seen.turns[0]!.tokenCount, ours!.tokenCount);
      // Filters: the same memories, the same order, from both sides.
      const filters = { tags_any: ["pets"] };
      const py = await python<{ results: Answer[] }>("read", {
        dsn: DSN,
        schema,
        threshold: THRESHOLD,
        agent,
        session: "s",
        queries: ["where does the dog like to go", "Alice"],
        budget: BUDGET,
        limit: LIMIT,
        filters,
      });
      for (const [i, query] of ["where does the dog like to go", "Alice"].entries()) {
        const hits = await mm.searchMemories(agent, query, { limit: LIMIT, explain: true, filters: { tagsAny: ["pets"] } });
        assert.deepEqual(
          hits.map((m) => m.id),
          py.results[i]!.search,
        );
        assert.deepEqual(hits.map(explained), py.results[i]!.searchScores);
        assert.ok(hits.every((m) => m.tags.includes("pets")));
      }
      // Expiry: from its moment, neither side returns the memory.
      const soon = new Date(Date.now() + 1500);
      ids.push(await mm.injectMemory(agent, "Alice has a dentist appointment soon", { tags: ["health"], expiresAt: soon }));
      assert.ok((await mm.searchMemories(agent, "dentist appointment")).some((m) => m.id === ids[3]));
      await sleep(Math.max(0, soon.getTime() - Date.now() + 200));
      assert.ok(!(await mm.searchMemories(agent, "dentist appointment")).some((m) => m.id === ids[3]));
      const later = await python<{ listed: string[] }>("lifecycle", { dsn: DSN, schema, threshold: THRESHOLD, agent, memoryId: ids[3] });
      assert.ok(!later.listed.includes(ids[3]!));
      // Erase from Python: TypeScript sees nothing of the agent.
      await python("erase", { dsn: DSN, schema, threshold: THRESHOLD, agent });
      assert.equal((await mm.listMemories(agent)).items.length, 0);
      assert.deepEqual(await mm.getRecentTurns(agent, "s"), []);
    } finally {
      await mm.close();
    }
  });
});
