// Bad input (spec §5): Python recorded, for each call, the error class it raised or its result;
// the same call here must raise the same class (or give the same result), and a refused call
// writes nothing.
import assert from "node:assert/strict";
import { test } from "node:test";

import { HashingEmbedder } from "../src/embedders/hashing.js";
import { ActroneError } from "../src/errors.js";
import { MemoryManager } from "../src/manager.js";
import { camelKeys, filtersOf, fixture } from "./helpers.js";

type Call = Record<string, unknown> & { op: string; error?: string; result?: unknown };

const calls = fixture<Call[]>("validation");
const OWN = new Set(["op", "agent", "content", "session", "query", "budget", "limit", "filters", "user", "assistant", "memory", "cursor", "error", "result"]);

function extras(call: Call): Record<string, unknown> {
  const out = camelKeys(Object.fromEntries(Object.entries(call).filter(([k]) => !OWN.has(k))));
  if (typeof out.expiresAt === "string") out.expiresAt = new Date(out.expiresAt);
  if (call.op === "turn") return { toolResults: out.toolResults };
  return out;
}

async function run(mm: MemoryManager, call: Call): Promise<unknown> {
  const agent = call.agent as string;
  switch (call.op) {
    case "inject":
      return mm.injectMemory(agent, call.content as string, extras(call));
    case "retrieve": {
      const ctx = await mm.retrieveContext(agent, call.session as string, call.query as string, call.budget as number);
      return [ctx.sessionBudget, ctx.episodicBudget];
    }
    case "search":
      return (await mm.searchMemories(agent, call.query as string, { limit: (call.limit as number | undefined) ?? 10, filters: filtersOf(call.filters as Record<string, unknown> | undefined) as never })).length;
    case "turn":
      return (await mm.storeTurn(agent, call.session as string, call.user as string, call.assistant as string, extras(call) as never)).tokenCount;
    case "update":
      await mm.updateMemory(agent, call.memory as string, extras(call));
      return null;
    case "list":
      return (await mm.listMemories(agent, { limit: (call.limit as number | undefined) ?? 100, cursor: (call.cursor as string | undefined) ?? null })).items.length;
    case "history":
      return (await mm.memoryHistory(agent, call.memory as string)).length;
    case "delete":
      return mm.deleteMemory(agent, call.memory as string);
    default:
      throw new Error(`unknown op ${call.op}`);
  }
}

test("every bad input gets Python's error class, every good one Python's result", async () => {
  assert.ok(calls.length > 40);
  const differences: string[] = [];
  for (const call of calls) {
    const mm = await MemoryManager.create({ config: { consolidator: "none" }, embedder: new HashingEmbedder() });
    const where = JSON.stringify(call).slice(0, 120);
    try {
      let got: unknown;
      let error: unknown = null;
      try {
        got = await run(mm, call);
      } catch (exc) {
        error = exc;
      }
      if (error !== null && !(error instanceof ActroneError)) differences.push(`${where}: not an ActroneError: ${String(error)}`);
      else if (call.error !== undefined) {
        if (error === null) differences.push(`${where}: no error, Python raised ${call.error}`);
        else if ((error as ActroneError).name !== call.error) differences.push(`${where}: ${(error as ActroneError).name} (${(error as Error).message}), Python raised ${call.error}`);
        else if ((await mm.countMemories("a")) !== 0) differences.push(`${where}: a refused call wrote something`);
      } else if (error !== null) {
        differences.push(`${where}: ${(error as Error).name}: ${(error as Error).message}; Python returned ${JSON.stringify(call.result)}`);
      } else if (JSON.stringify(got) !== JSON.stringify(call.result ?? null)) {
        differences.push(`${where}: returned ${JSON.stringify(got)}, Python ${JSON.stringify(call.result)}`);
      }
    } finally {
      await mm.close();
    }
  }
  assert.deepEqual(differences, []);
});
