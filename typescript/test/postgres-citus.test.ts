// The postgres backend on a Citus coordinator: a schema Python's migrations distributed by
// agent_id, every search one call of retrieve() and every batch through agent_write(), each
// run on the agent's worker; the store's contract, and Python and TypeScript ranking one memory
// alike.
// The cluster is the Python suite's (ACTRONE_TEST_CITUS_DSN, else a local one of ../shared/citus);
// without one the tests are skipped, except in CI (CI=true), where they fail.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { MemoryConfig, MemoryManager, PostgresStore } from "../src/index.js";
import { storeContract } from "./helpers/contract.js";
import { freshSchema, python, startServer, type Server } from "./helpers/pg.js";

const inCi = ["1", "true", "yes"].includes((process.env.CI ?? "").toLowerCase());
let server: Server | null = null;

before(async () => {
  server = await startServer("citus");
  if (server.dsn === null && inCi) throw new Error(`CI runs the Citus tests, but ${server.unavailable}`);
});
after(async () => {
  await server?.stop();
});

function dsn(t: { skip(message: string): void }): string | null {
  if (server?.dsn == null) {
    t.skip(`no Citus cluster: ${server?.unavailable ?? "not started"}`);
    return null;
  }
  return server.dsn;
}

const THRESHOLD = 0.1;

describe("on a Citus coordinator", () => {
  test("TypeScript creates the schema distributed (the manifest's Citus files), and the store's contract holds", async (t) => {
    const coordinator = dsn(t);
    if (coordinator === null) return;
    const schema = freshSchema("ts_citus");
    const store = new PostgresStore(
      new MemoryConfig({ backend: "postgres", postgresDsn: coordinator, postgresSchema: schema }),
    );
    const mm = await MemoryManager.create({
      config: { backend: "postgres", postgresDsn: coordinator, postgresSchema: schema, embeddingProvider: "hashing", relevanceThreshold: 0.01 },
      store,
    });
    try {
      assert.equal(store.distributed, true, "the schema created on the coordinator is distributed");
      await storeContract(mm);
    } finally {
      await mm.close();
      await store.close();
    }
  });

  test("Python writes, TypeScript ranks alike (filters included), through retrieve()", async (t) => {
    const coordinator = dsn(t);
    if (coordinator === null) return;
    const schema = freshSchema("ts_citus_x");
    await python("migrate", { dsn: coordinator, schema });
    const agent = "citus-agent";
    const items = [
      "Caroline went to the LGBTQ support group on Tuesday",
      "Melanie painted a sunrise over the lake",
      "Caroline is researching adoption agencies",
      "Melanie ran a charity race for mental health",
      "Caroline's friends gave her a hand-painted bowl",
      "Melanie took the kids camping in the mountains",
    ].map((content, i) => ({ content, sessionId: `s${i % 2}`, createdAt: new Date(Date.UTC(2023, 4, 1 + i)).toISOString(), tags: [i % 2 ? "melanie" : "caroline"] }));
    await python("write", { dsn: coordinator, schema, threshold: THRESHOLD, agent, items });
    const queries = ["what did Caroline research", "painting", "camping trip with kids", "support group"];
    const py = await python<{ results: { search: string[]; context: string[] }[] }>("read", {
      dsn: coordinator,
      schema,
      threshold: THRESHOLD,
      agent,
      session: "s0",
      queries,
      budget: 2000,
      limit: 5,
    });
    const pyFiltered = await python<{ results: { search: string[] }[] }>("read", {
      dsn: coordinator,
      schema,
      threshold: THRESHOLD,
      agent,
      session: "s0",
      queries,
      budget: 2000,
      limit: 5,
      filters: { tags_any: ["melanie"] },
    });
    const mm = await MemoryManager.create({
      config: { backend: "postgres", postgresDsn: coordinator, postgresSchema: schema, embeddingProvider: "hashing", relevanceThreshold: THRESHOLD },
    });
    try {
      for (const [i, q] of queries.entries()) {
        const hits = await mm.searchMemories(agent, q, { limit: 5 });
        assert.deepEqual(
          hits.map((m) => m.id),
          py.results[i]!.search,
          q,
        );
        const ctx = await mm.retrieveContext(agent, "s0", q, 2000);
        assert.deepEqual(
          ctx.episodicMemories.map((m) => m.id),
          py.results[i]!.context,
          q,
        );
        const filtered = await mm.searchMemories(agent, q, { limit: 5, filters: { tagsAny: ["melanie"] } });
        assert.deepEqual(
          filtered.map((m) => m.id),
          pyFiltered.results[i]!.search,
          q,
        );
      }
      assert.ok(py.results.some((r) => r.search.length > 0));
    } finally {
      await mm.close();
    }
  });
});
