// The LangGraph.js BaseStore adapter in a real graph: one node remembers what the user says, the
// next answers with the memories a search of the store finds in its system prompt, through
// LangChain's own fake chat model (FakeChatModel echoes the messages it is given).
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { SystemMessage, HumanMessage } from "@langchain/core/messages";
import { FakeChatModel } from "@langchain/core/utils/testing";
import { Annotation, END, START, StateGraph, type LangGraphRunnableConfig } from "@langchain/langgraph";
import { ActroneStore, INDEXED, itemId } from "../src/adapters/langgraph.js";
import { MemoryManager, ValidationError } from "../src/index.js";
import { python } from "./helpers/pg.js";

async function manager(): Promise<MemoryManager> {
  return MemoryManager.create({ config: { backend: "memory", embeddingProvider: "hashing", relevanceThreshold: 0.05 } });
}

describe("ActroneStore (LangGraph.js BaseStore)", () => {
  test("a graph remembers in one run and answers from memory in the next", async () => {
    const mm = await manager();
    const store = new ActroneStore(mm, "graph-agent", { fields: ["text"] });
    const State = Annotation.Root({ user: Annotation<string>, answer: Annotation<string> });
    const model = new FakeChatModel({});
    const graph = new StateGraph(State)
      .addNode("remember", async (state, config: LangGraphRunnableConfig) => {
        if (state.user.startsWith("remember: ")) {
          await config.store!.put(["users", "u1", "facts"], `f${state.user.length}`, { text: state.user.slice("remember: ".length) });
        }
        return {};
      })
      .addNode("respond", async (state, config: LangGraphRunnableConfig) => {
        const found = await config.store!.search(["users", "u1"], { query: state.user, limit: 3 });
        const memories = found.map((i) => `- ${String(i.value.text)}`).join("\n");
        const reply = await model.invoke([new SystemMessage(`What you remember:\n${memories}`), new HumanMessage(state.user)]);
        return { answer: String(reply.content) };
      })
      .addEdge(START, "remember")
      .addEdge("remember", "respond")
      .addEdge("respond", END)
      .compile({ store });
    await graph.invoke({ user: "remember: my sister Ana lives in Lisbon" });
    await graph.invoke({ user: "remember: I am allergic to peanuts" });
    const out = await graph.invoke({ user: "where does my sister Ana live?" });
    assert.match(out.answer, /What you remember:\n- my sister Ana lives in Lisbon/);
    assert.match(out.answer, /where does my sister Ana live\?$/);
    await mm.close();
  });

  test("get, put (a new version), search with filters, list namespaces and delete", async () => {
    const mm = await manager();
    const store = new ActroneStore(mm, "a");
    await store.put(["docs", "x"], "k1", { text: "the blue whale is the largest animal", kind: "fact" });
    await store.put(["docs", "y"], "k2", { text: "whales sing long songs", kind: "note" });
    await store.put(["other"], "k3", { n: 1 }, false);
    const got = await store.get(["docs", "x"], "k1");
    assert.deepEqual(got?.value, { text: "the blue whale is the largest animal", kind: "fact" });
    await store.put(["docs", "x"], "k1", { text: "blue whales eat krill", kind: "fact" });
    assert.deepEqual(
      (await mm.memoryHistory("a", itemId(["docs", "x"], "k1"))).map((m) => m.metadata.value),
      [
        { text: "the blue whale is the largest animal", kind: "fact" },
        { text: "blue whales eat krill", kind: "fact" },
      ],
    );
    const found = await store.search(["docs"], { query: "whales", filter: { kind: "note" } });
    assert.deepEqual(
      found.map((i) => i.key),
      ["k2"],
    );
    assert.equal(typeof found[0]!.score, "number");
    const listed = await store.search(["docs"]);
    assert.deepEqual(new Set(listed.map((i) => i.key)), new Set(["k1", "k2"]));
    assert.deepEqual(await store.listNamespaces({ prefix: ["docs"] }), [
      ["docs", "x"],
      ["docs", "y"],
    ]);
    assert.deepEqual(await store.listNamespaces({ maxDepth: 1 }), [["docs"], ["other"]]);
    // an unindexed item is found by get and listings, never by a query
    assert.deepEqual((await store.get(["other"], "k3"))?.value, { n: 1 });
    assert.equal((await mm.getMemory("a", itemId(["other"], "k3")))!.contentType, "langgraph-unindexed");
    assert.equal((await mm.getMemory("a", itemId(["docs", "y"], "k2")))!.contentType, INDEXED);
    await assert.rejects(store.search(["docs"], { query: "x", filter: { kind: { $gt: 1 } } }), ValidationError);
    await store.delete(["docs", "y"], "k2");
    assert.equal(await store.get(["docs", "y"], "k2"), null);
    await mm.close();
  });

  test("items have the ids Python's ActroneStore gives them (one item, both languages)", async () => {
    const pairs: [string[], string][] = [
      [["users", "u1"], "k"],
      [["ünï", "☕ 🙂"], "clé \"quoted\""],
    ];
    const names = await python<{ ids: string[] }>("item_ids", { pairs });
    assert.deepEqual(
      pairs.map(([ns, k]) => itemId(ns, k)),
      names.ids,
    );
  });
});
