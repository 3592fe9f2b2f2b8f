// docs/typescript.md's MCP example: the official TypeScript MCP SDK's client talks to Python's
// `actrone-pg mcp` over stdio, on the PostgreSQL schema a TypeScript manager uses too, so what
// one writes the other finds.
import assert from "node:assert/strict";
import { after, test } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { MemoryManager } from "../src/index.js";
import { DSN, dropSchema, freshSchema } from "./helpers/pg.js";

const schema = freshSchema("ts_mcp");
after(async () => {
  if (DSN) await dropSchema(schema);
});

test("a TypeScript MCP client and a TypeScript manager share one memory through actrone-pg mcp", { skip: DSN ? false : "no PostgreSQL" }, async () => {
  const mm = await MemoryManager.create({ config: { backend: "postgres", postgresDsn: DSN, postgresSchema: schema, embeddingProvider: "hashing" } });
  const { ACTRONE_TEST_PYTHON: python, ...env } = process.env;
  const client = new Client({ name: "my-agent", version: "1.0.0" });
  try {
    await mm.injectMemory("agent-1", "The user's favourite dish is mushroom risotto.");
    await client.connect(
      new StdioClientTransport({
        command: python!,
        args: ["-m", "actrone_pg.cli", "mcp", "--agent", "agent-1", "--backend", "postgres", "--dsn", DSN, "--schema", schema, "--embedder", "hashing"],
        env: env as Record<string, string>,
      }),
    );
    const injected = await client.callTool({ name: "inject_memory", arguments: { agent_id: "agent-1", content: "The user is allergic to peanuts." } });
    assert.notEqual(injected.isError, true, JSON.stringify(injected.content));
    const result = await client.callTool({
      name: "retrieve_context",
      arguments: { agent_id: "agent-1", session_id: "s1", query: "Is the user allergic to peanuts?", token_budget: 2000 },
    });
    assert.notEqual(result.isError, true);
    const text = JSON.stringify(result.structuredContent ?? result.content);
    assert.match(text, /allergic to peanuts/);
    // what the MCP server wrote, TypeScript finds; what TypeScript wrote, the server finds
    const hits = await mm.searchMemories("agent-1", "allergic peanuts", { limit: 1 });
    assert.equal(hits[0]?.content, "The user is allergic to peanuts.");
    const risotto = await client.callTool({ name: "search_memories", arguments: { agent_id: "agent-1", query: "favourite dish risotto", limit: 1 } });
    assert.match(JSON.stringify(risotto.structuredContent ?? risotto.content), /mushroom risotto/);
    const refused = await client.callTool({ name: "get_recent_turns", arguments: { agent_id: "agent-2", session_id: "s1" } });
    assert.equal(refused.isError, true, "the server serves only the agents it is given");
  } finally {
    await client.close();
    await mm.close();
  }
});
