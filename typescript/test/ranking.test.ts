// Python wrote agents through its manager on its in-memory store and recorded what every search
// and context returned; the same calls here must give the same ids in the same order, the same
// ranks and fused scores (bit for bit), and the same budgets and token counts. Python's float32
// cosines come from its BLAS (their last bit depends on the CPU's kernel): they are replayed, and
// ours are checked against them within float32 rounding.
import assert from "node:assert/strict";
import { test } from "node:test";

import { MemoryConfig } from "../src/config.js";
import { HashingEmbedder } from "../src/embedders/hashing.js";
import { cosines, InMemoryStore } from "../src/stores/memory.js";
import { MemoryManager } from "../src/manager.js";
import type { Explain, Memory } from "../src/models.js";
import { codePointLength } from "../src/text.js";
import { camelKeys, f32, filtersOf, fixture } from "./helpers.js";

interface Expected {
  id: string;
  content: string;
  token_count: number;
  version: number;
  explain: Record<string, number | null>;
}
interface Case {
  name: string;
  agent: string;
  config: Record<string, unknown>;
  reranker?: boolean;
  token_counter?: boolean;
  memories: Record<string, unknown>[];
  updates?: ({ index: number } & Record<string, unknown>)[];
  deletes?: number[];
  turns?: { session_id: string; user: string; assistant: string; tool_results?: unknown[] }[];
  searches: { query: string; limit: number; filters?: Record<string, unknown>; expected: Expected[] }[];
  contexts: {
    session_id: string;
    query: string;
    budget: number;
    filters?: Record<string, unknown>;
    expected: {
      session_budget: number;
      episodic_budget: number;
      session_tokens: number;
      episodic_tokens: number;
      candidates_considered: number;
      relevance_threshold: number;
      turns: [string, number][];
      memories: Expected[];
    };
  }[];
  ids: string[];
  listing: string[];
  threshold: number;
  scans: string[];
}

const cases = fixture<Case[]>("ranking");

const EXPLAIN_FIELDS: [keyof Explain, string][] = [
  ["cosine", "cosine"],
  ["denseRank", "dense_rank"],
  ["lexicalRank", "lexical_rank"],
  ["recencyRank", "recency_rank"],
  ["fusedScore", "fused_score"],
  ["rerankScore", "rerank_score"],
  ["bm25", "bm25"],
  ["neighbourScore", "neighbour_score"],
];

function compare(got: Memory[], expected: Expected[], where: string): void {
  assert.deepEqual(
    got.map((m) => m.id),
    expected.map((e) => e.id),
    `${where}: ids`,
  );
  got.forEach((m, i) => {
    const e = expected[i]!;
    assert.equal(m.content, e.content, `${where}: content of ${m.id}`);
    assert.equal(m.tokenCount, e.token_count, `${where}: tokens of ${m.id}`);
    assert.equal(m.version, e.version, `${where}: version of ${m.id}`);
    for (const [ours, theirs] of EXPLAIN_FIELDS) {
      const a = m.explain![ours];
      const b = e.explain[theirs];
      if (ours === "bm25" && a !== null && b !== null) {
        // An IDF is a logarithm: ours is correctly rounded, the C library's may be one unit in
        // the last place off (a few arguments in ten thousand); ranks are unaffected.
        assert.ok(Math.abs((a as number) - (b as number)) <= 8 * Number.EPSILON * Math.abs(b as number), `${where}: bm25 of ${m.id}: ${a} vs ${b}`);
      } else {
        assert.equal(a, b, `${where}: ${ours} of ${m.id}`);
      }
    }
  });
}

function item(raw: Record<string, unknown>): Record<string, unknown> {
  const out = camelKeys(raw);
  if (typeof out.createdAt === "string") out.createdAt = new Date(out.createdAt);
  return out;
}

for (const c of cases) {
  test(`ranking parity: ${c.name}`, async () => {
    // Python's cosine scans, replayed in call order (its float32 sums follow its BLAS); ours
    // must agree with each within float32 rounding.
    let call = 0;
    let worst = 0;
    const scan = (query: Float32Array, matrix: Float32Array, count: number): Float64Array => {
      assert.ok(call < c.scans.length, "TypeScript scanned more often than Python");
      const theirs = Float64Array.from(f32(c.scans[call++]!));
      const ours = cosines(query, matrix, count);
      assert.equal(ours.length, theirs.length, "a scan over another number of memories");
      ours.forEach((x, i) => (worst = Math.max(worst, Math.abs(x - theirs[i]!))));
      return theirs;
    };
    const config = new MemoryConfig({ ...camelKeys(c.config), consolidator: "none" }, {});
    const mm = await MemoryManager.create({
      config,
      store: new InMemoryStore({ textAnalyzer: config.textAnalyzer, lexicalDates: config.lexicalDates, scan }),
      embedder: new HashingEmbedder(),
      reranker: c.reranker ? { score: async (_q, texts) => texts.map((t) => codePointLength(t) % 13) } : undefined,
      tokenCounter: c.token_counter ? (t) => Math.floor(codePointLength(t) / 3) + 1 : undefined,
    });
    try {
      assert.equal(mm.relevanceThreshold, c.threshold);
      const ids = await mm.injectMemories(c.agent, c.memories.map(item) as never);
      assert.deepEqual(ids, c.ids);
      for (const { index, ...changes } of c.updates ?? []) await mm.updateMemory(c.agent, ids[index]!, camelKeys(changes));
      for (const index of c.deletes ?? []) assert.equal(await mm.deleteMemory(c.agent, ids[index]!), true);
      for (const t of c.turns ?? []) await mm.storeTurn(c.agent, t.session_id, t.user, t.assistant, { toolResults: t.tool_results ?? null });
      for (const s of c.searches) {
        const hits = await mm.searchMemories(c.agent, s.query, { limit: s.limit, explain: true, filters: filtersOf(s.filters) });
        compare(hits, s.expected, `search ${JSON.stringify(s.query)} ${JSON.stringify(s.filters ?? {})}`);
      }
      for (const x of c.contexts) {
        const ctx = await mm.retrieveContext(c.agent, x.session_id, x.query, x.budget, { explain: true, filters: filtersOf(x.filters) });
        const e = x.expected;
        const where = `context ${JSON.stringify(x.query)} budget ${x.budget}`;
        assert.deepEqual(
          [ctx.sessionBudget, ctx.episodicBudget, ctx.sessionTokens, ctx.episodicTokens, ctx.candidatesConsidered, ctx.relevanceThreshold],
          [e.session_budget, e.episodic_budget, e.session_tokens, e.episodic_tokens, e.candidates_considered, e.relevance_threshold],
          where,
        );
        assert.deepEqual(
          ctx.recentTurns.map((t) => [t.userMessage, t.tokenCount]),
          e.turns,
          `${where}: turns`,
        );
        compare(ctx.episodicMemories, e.memories, where);
      }
      const listing: string[] = [];
      let page = await mm.listMemories(c.agent, { limit: 7 });
      listing.push(...page.items.map((m) => m.id));
      while (page.nextCursor !== null) {
        page = await mm.listMemories(c.agent, { limit: 7, cursor: page.nextCursor });
        listing.push(...page.items.map((m) => m.id));
      }
      assert.deepEqual(listing, c.listing);
      assert.equal(call, c.scans.length, "TypeScript scanned less often than Python");
      assert.ok(worst <= 2.5e-7, `cosines differ from Python's by up to ${worst}`);
    } finally {
      await mm.close();
    }
  });
}
