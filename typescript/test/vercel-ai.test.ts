// The Vercel AI SDK example (examples/vercel-ai.ts) with the SDK's own mock model: what the model
// is given holds the injected memory and the earlier turn; the exchange is stored as a turn.
import assert from "node:assert/strict";
import { test } from "node:test";
import { MockLanguageModelV2 } from "ai/test";
import { MemoryManager } from "actrone-pg";
import { chat } from "../examples/vercel-ai.js";

test("memory reaches the model's system prompt through the SDK's middleware", async () => {
  const prompts: unknown[] = [];
  const replies = ["Noted!", "You are allergic to peanuts, so skip the satay."];
  const model = new MockLanguageModelV2({
    doGenerate: async (options) => {
      prompts.push(options.prompt);
      return {
        content: [{ type: "text", text: replies[prompts.length - 1]! }],
        finishReason: "stop",
        usage: { inputTokens: 10, outputTokens: 5, totalTokens: 15 },
        warnings: [],
      };
    },
  });
  const mm = await MemoryManager.create({ config: { backend: "memory", embeddingProvider: "hashing", relevanceThreshold: 0.05 } });
  try {
    await mm.injectMemory("user-7", "The user is allergic to peanuts");
    const ids = { agentId: "user-7", sessionId: "chat-1" };
    assert.equal(await chat(model, mm, ids, "Hi, I am planning dinner."), "Noted!");
    const answer = await chat(model, mm, ids, "Can I order chicken satay with peanut sauce?");
    assert.equal(answer, replies[1]);
    const second = prompts[1] as { role: string; content: unknown }[];
    assert.equal(second[0]!.role, "system");
    assert.match(String(second[0]!.content), /- The user is allergic to peanuts/);
    assert.match(String(second[0]!.content), /User: Hi, I am planning dinner\.\nAssistant: Noted!/);
    assert.equal(second.at(-1)!.role, "user");
    const turns = await mm.getRecentTurns("user-7", "chat-1");
    assert.deepEqual(
      turns.map((t) => [t.userMessage, t.assistantMessage]),
      [
        ["Hi, I am planning dinner.", "Noted!"],
        ["Can I order chicken satay with peanut sauce?", replies[1]],
      ],
    );
  } finally {
    await mm.close();
  }
});
