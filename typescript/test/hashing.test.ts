import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { test } from "node:test";

import { blake2b } from "../src/embedders/blake2b.js";
import { normalise } from "../src/embedders/base.js";
import { HashingEmbedder } from "../src/embedders/hashing.js";
import { f32, fixture } from "./helpers.js";

interface HashingFixture {
  texts: string[];
  embedders: Record<string, { name: string; raw: string[]; normalised: string[] }>;
}

const fx = fixture<HashingFixture>("hashing");

test("BLAKE2b-512 equals Node's for messages around the block size", () => {
  for (const size of [0, 1, 3, 127, 128, 129, 255, 256, 1000]) {
    const data = Buffer.alloc(size, 0).map((_, i) => (i * 31 + 7) & 0xff);
    const ours = Buffer.from(blake2b(data, 64)).toString("hex");
    assert.equal(ours, createHash("blake2b512").update(data).digest("hex"), `size ${size}`);
  }
});

test("hashing vectors are Python's bit for bit, raw and normalised", () => {
  for (const [dims, expected] of Object.entries(fx.embedders)) {
    const embedder = new HashingEmbedder({ dimensions: Number(dims) });
    assert.equal(embedder.name, expected.name);
    fx.texts.forEach((text, i) => {
      const raw = embedder.embedOne(text);
      assert.deepEqual(raw, f32(expected.raw[i]!), `raw vector of ${JSON.stringify(text)} (${dims})`);
      assert.deepEqual(normalise(raw, Number(dims)), f32(expected.normalised[i]!), `normalised vector of ${JSON.stringify(text)}`);
    });
  }
});
