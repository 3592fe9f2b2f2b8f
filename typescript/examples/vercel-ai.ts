// Memory in the system prompt of a Vercel AI SDK model, through the SDK's middleware: before each
// call the agent's recent turns and the memories relevant to the user's last message are
// retrieved inside a token budget and put first in the prompt; after it, the exchange is stored
// as a turn. Any model of the SDK works (here the test's MockLanguageModelV2).
import { generateText, wrapLanguageModel, type LanguageModel, type LanguageModelMiddleware } from "ai";
import type { MemoryManager, RetrievedContext } from "actrone-pg";

/** The memory part of a system prompt. */
export function memoryPrompt(ctx: RetrievedContext): string {
  const lines = ["What you remember about this user:"];
  for (const m of ctx.episodicMemories) lines.push(`- ${m.content}`);
  if (ctx.recentTurns.length > 0) {
    lines.push("", "The conversation so far:");
    for (const t of ctx.recentTurns) lines.push(`User: ${t.userMessage}`, `Assistant: ${t.assistantMessage}`);
  }
  return lines.join("\n");
}

/** A middleware that puts `agentId`'s memory for the session first in every prompt. */
export function memoryMiddleware(
  mm: MemoryManager,
  options: { agentId: string; sessionId: string; tokenBudget?: number },
): LanguageModelMiddleware {
  return {
    transformParams: async ({ params }) => {
      const lastUser = [...params.prompt].reverse().find((m) => m.role === "user");
      const query = lastUser ? lastUser.content.map((part) => (part.type === "text" ? part.text : "")).join(" ") : "";
      if (!query.trim()) return params;
      const ctx = await mm.retrieveContext(options.agentId, options.sessionId, query, options.tokenBudget ?? 2000);
      return { ...params, prompt: [{ role: "system", content: memoryPrompt(ctx) }, ...params.prompt] };
    },
  };
}

/** One exchange: the model answers with memory in its prompt, and the turn is remembered. */
export async function chat(
  model: LanguageModel,
  mm: MemoryManager,
  ids: { agentId: string; sessionId: string },
  userMessage: string,
): Promise<string> {
  const withMemory = wrapLanguageModel({ model: model as Parameters<typeof wrapLanguageModel>[0]["model"], middleware: memoryMiddleware(mm, ids) });
  const { text } = await generateText({ model: withMemory, prompt: userMessage });
  await mm.storeTurn(ids.agentId, ids.sessionId, userMessage, text);
  return text;
}
