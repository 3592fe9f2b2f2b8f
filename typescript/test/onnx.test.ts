// The ONNX embedder on the MiniLM test model that scripts/test exports (Python's fixture names
// its directory): the same vectors as Python's OnnxEmbedder within 1e-5, the same name, length
// limit and calibrated threshold, and the default "local" provider finding the same model.
import assert from "node:assert/strict";
import { join, resolve } from "node:path";
import { test } from "node:test";

import { MemoryConfig } from "../src/config.js";
import { createEmbedder } from "../src/embedders/index.js";
import { OnnxEmbedder } from "../src/embedders/onnx.js";
import { ModelNotAvailableError } from "../src/errors.js";
import { modelsDir } from "../src/paths.js";
import { f32, fixture } from "./helpers.js";

interface OnnxFixture {
  directory: string;
  name: string;
  dimensions: number;
  max_length: number;
  threshold: number | null;
  recognised_as: string | null;
  texts: string[];
  vectors: string[];
  tokenized: [string, number[]][];
}

const fx = fixture<OnnxFixture | null>("onnx");
// In CI the model is exported by scripts/test: a missing one is a failure there, a skip elsewhere.
const skip = fx === null && process.env.CI !== "true" ? "no MiniLM test model (scripts/test exports it)" : false;

test("OnnxEmbedder gives Python's vectors, name, length limit and threshold", { skip }, async () => {
  assert.ok(fx !== null, "the fixture generator found no MiniLM test model");
  const embedder = await OnnxEmbedder.fromDirectory(fx.directory);
  try {
    assert.equal(embedder.name, fx.name);
    assert.equal(embedder.dimensions, fx.dimensions);
    assert.equal(embedder.maxLength, fx.max_length);
    assert.equal(embedder.relevanceThreshold, fx.threshold);
    assert.equal(embedder.recognisedAs, fx.recognised_as);
    const vectors = await embedder.embedBatch(fx.texts);
    let worst = 0;
    vectors.forEach((v, i) => {
      const expected = f32(fx.vectors[i]!);
      assert.equal(v.length, expected.length);
      v.forEach((x, d) => (worst = Math.max(worst, Math.abs(x - expected[d]!))));
    });
    assert.ok(worst < 1e-5, `largest difference from Python's vectors: ${worst}`);
  } finally {
    await embedder.close();
  }
});

test("the token ids of every text are those of Python's tokenizer", { skip }, async () => {
  assert.ok(fx !== null);
  const embedder = await OnnxEmbedder.fromDirectory(fx.directory);
  try {
    const differences = fx.tokenized.filter(([text, ids]) => JSON.stringify(embedder.tokenIds(text)) !== JSON.stringify(ids));
    assert.deepEqual(differences.slice(0, 5).map(([text]) => text), []);
  } finally {
    await embedder.close();
  }
});

test("the 'local' and 'onnx' providers find the model where Python does", { skip }, async () => {
  assert.ok(fx !== null);
  // In the models directory, the default provider finds it by itself; elsewhere it is named.
  const inModels = resolve(fx.directory) === join(modelsDir(), "all-MiniLM-L6-v2");
  const config = inModels ? {} : { embeddingModel: fx.directory };
  for (const provider of ["local", "onnx"]) {
    const embedder = await createEmbedder(new MemoryConfig({ ...config, embeddingProvider: provider }, {}));
    assert.ok(embedder instanceof OnnxEmbedder, provider);
    assert.equal(embedder.name, fx.name);
    assert.equal(embedder.relevanceThreshold, fx.threshold);
    await embedder.close?.();
  }
});

test("a directory without a model is a ModelNotAvailableError", async () => {
  await assert.rejects(OnnxEmbedder.fromDirectory("/nonexistent/model"), ModelNotAvailableError);
  await assert.rejects(OnnxEmbedder.fromDirectory(process.cwd()), ModelNotAvailableError);
});
