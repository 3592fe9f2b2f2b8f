// The OpenAI-compatible embedder against a small local HTTP server that speaks the protocol.
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, test } from "node:test";

import { MemoryConfig } from "../src/config.js";
import { createEmbedder } from "../src/embedders/index.js";
import { embeddingsUrl, OpenAIEmbedder } from "../src/embedders/openai.js";
import { ConfigurationError, EmbedderError } from "../src/errors.js";
import { MemoryManager } from "../src/manager.js";

let server: Server;
let base = "";
const requests: { auth: string | undefined; body: { model: string; input: string[]; dimensions?: number } }[] = [];
let failNext = 0;

function vectorOf(text: string, dims: number): number[] {
  // A different direction per text: its characters' codes folded into `dims` buckets.
  const v = new Array<number>(dims).fill(0);
  for (const [i, ch] of [...text].entries()) v[(ch.codePointAt(0)! + i) % dims]! += 1;
  return v;
}

async function read(req: IncomingMessage): Promise<string> {
  let data = "";
  for await (const chunk of req) data += chunk;
  return data;
}

before(async () => {
  server = createServer((req, res) => {
    void (async () => {
      const body = JSON.parse(await read(req)) as { model: string; input: string[]; dimensions?: number };
      requests.push({ auth: req.headers.authorization, body });
      if (failNext > 0) {
        failNext--;
        res.writeHead(503, { "retry-after": "0" }).end(JSON.stringify({ error: { message: "busy" } }));
        return;
      }
      if (req.headers.authorization !== "Bearer sk-test") {
        res.writeHead(401).end(JSON.stringify({ error: { message: "bad key" } }));
        return;
      }
      const dims = body.dimensions ?? 6;
      // Answer out of order: the client sorts by index.
      const data = body.input.map((t, index) => ({ index, embedding: vectorOf(t, dims) })).reverse();
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ data }));
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});

after(() => new Promise<void>((resolve) => server.close(() => resolve())));

test("the endpoint rule is Python's", () => {
  assert.equal(embeddingsUrl("http://h/v1"), "http://h/v1/embeddings");
  assert.equal(embeddingsUrl("http://h/v1/"), "http://h/v1/embeddings");
  assert.equal(embeddingsUrl("http://h"), "http://h/v1/embeddings");
  assert.equal(embeddingsUrl("http://h/v1/embeddings"), "http://h/v1/embeddings");
});

test("vectors come back in input order, with the key and the dimensions sent", async () => {
  const embedder = new OpenAIEmbedder({ model: "m", dimensions: 6, apiUrl: base, apiKey: "sk-test", sendDimensions: true, maxBatch: 2 });
  assert.equal(embedder.name, "openai:m:6");
  assert.equal(embedder.relevanceThreshold, null);
  requests.length = 0;
  const texts = ["alpha", "beta", "gamma"];
  const vectors = await embedder.embedBatch(texts);
  assert.deepEqual(vectors, texts.map((t) => vectorOf(t, 6)));
  assert.equal(requests.length, 2); // maxBatch 2
  assert.deepEqual(requests[0]!.body, { model: "m", input: ["alpha", "beta"], dimensions: 6 });
});

test("a transient failure is retried; a refused key is an EmbedderError naming the setting", async () => {
  const embedder = new OpenAIEmbedder({ model: "m", dimensions: 6, apiUrl: base, apiKey: "sk-test", backoff: 0 });
  failNext = 2;
  assert.equal((await embedder.embedBatch(["x"])).length, 1);
  const wrong = new OpenAIEmbedder({ model: "m", dimensions: 6, apiUrl: base, apiKey: "nope" });
  await assert.rejects(wrong.embedBatch(["x"]), (exc: unknown) => exc instanceof EmbedderError && /embeddingApiKey/.test(exc.message));
  const gone = new OpenAIEmbedder({ model: "m", dimensions: 6, apiUrl: "http://127.0.0.1:9/v1", maxRetries: 0 });
  await assert.rejects(gone.embedBatch(["x"]), EmbedderError);
});

test("the config's provider probes an unknown model's size once, and the manager uses it", async () => {
  assert.throws(() => new OpenAIEmbedder({ model: "unknown" }), ConfigurationError);
  const embedder = await createEmbedder(
    new MemoryConfig({ embeddingProvider: "openai", embeddingModel: "m", embeddingApiUrl: base, embeddingApiKey: "sk-test" }, {}),
  );
  assert.equal(embedder.dimensions, 6);
  const mm = await MemoryManager.create({ config: { consolidator: "none", relevanceThreshold: 0.5 }, embedder });
  try {
    await mm.injectMemory("a", "alpha");
    await mm.injectMemory("a", "zzzz");
    const hits = await mm.searchMemories("a", "alpha");
    assert.equal(hits[0]!.content, "alpha");
  } finally {
    await mm.close();
  }
});
