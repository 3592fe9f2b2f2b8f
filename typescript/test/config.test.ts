import assert from "node:assert/strict";
import { test } from "node:test";

import { MemoryConfig, envName } from "../src/config.js";
import { ConfigurationError } from "../src/errors.js";
import { HASHING_THRESHOLD } from "../src/embedders/hashing.js";
import { BGE_SMALL_THRESHOLD, FINGERPRINTS, MINILM_THRESHOLD, PROBES } from "../src/embedders/onnx.js";
import { QUESTION_WORDS } from "../src/analyzer.js";
import { BM25_B, BM25_K1 } from "../src/ranking.js";
import { defaultDataDir, modelsDir } from "../src/paths.js";
import { camel, fixture } from "./helpers.js";

interface Constants {
  config_fields: Record<string, unknown>;
  default_data_dir: string;
  models_dir: string;
  hashing_threshold: number;
  minilm_threshold: number;
  bge_small_threshold: number;
  question_words: string[];
  bm25_k1: number;
  bm25_b: number;
  default_rrf_weights: number[];
  probes: string[];
  fingerprints: Record<string, number[]>;
}

const constants = fixture<Constants>("constants");
const cases = fixture<{ field: string; env: string; value?: unknown; error?: string }[]>("config");

test("every Python setting exists in camelCase with the same default and variable", () => {
  const cfg = new MemoryConfig({}, {});
  const fields = cfg.toFields() as unknown as Record<string, unknown>;
  const pythonNames = Object.keys(constants.config_fields);
  assert.deepEqual(Object.keys(fields).sort(), pythonNames.map(camel).sort());
  for (const [name, value] of Object.entries(constants.config_fields)) {
    assert.deepEqual(fields[camel(name)], value, name);
    assert.equal(envName(camel(name)), `ACTRONE_${name.toUpperCase()}`);
  }
});

test("the directories and constants are Python's", () => {
  assert.equal(defaultDataDir(), constants.default_data_dir);
  assert.equal(modelsDir(), constants.models_dir);
  assert.equal(HASHING_THRESHOLD, constants.hashing_threshold);
  assert.equal(MINILM_THRESHOLD, constants.minilm_threshold);
  assert.equal(BGE_SMALL_THRESHOLD, constants.bge_small_threshold);
  assert.deepEqual([...QUESTION_WORDS].sort(), constants.question_words);
  assert.equal(BM25_K1, constants.bm25_k1);
  assert.equal(BM25_B, constants.bm25_b);
  assert.deepEqual(new MemoryConfig({}, {}).rrfWeights, constants.default_rrf_weights);
  assert.deepEqual(PROBES, constants.probes);
  assert.deepEqual(Object.fromEntries(FINGERPRINTS), constants.fingerprints);
});

test("ACTRONE_* values parse and fail as in Python", () => {
  for (const c of cases) {
    const env = { [`ACTRONE_${c.field.toUpperCase()}`]: c.env };
    if (c.error !== undefined) {
      assert.throws(
        () => new MemoryConfig({}, env),
        (exc: unknown) => exc instanceof ConfigurationError && exc.field === camel(c.error!),
        `${c.field}=${JSON.stringify(c.env)} should fail on ${c.error}`,
      );
    } else {
      const cfg = new MemoryConfig({}, env) as unknown as Record<string, unknown>;
      assert.deepEqual(cfg[camel(c.field)], c.value, `${c.field}=${JSON.stringify(c.env)}`);
    }
  }
});

test("a value in code wins over the environment, and unknown settings are refused", () => {
  const cfg = new MemoryConfig({ rrfK: 10 }, { ACTRONE_RRF_K: "30", ACTRONE_MAX_SESSION_TURNS: "7" });
  assert.equal(cfg.rrfK, 10);
  assert.equal(cfg.maxSessionTurns, 7);
  assert.throws(() => new MemoryConfig({ rrfk: 1 } as never, {}), ConfigurationError);
  assert.throws(() => new MemoryConfig({ relevanceWeight: 0.6 }, {}), /relevanceWeight/);
  assert.equal(cfg.replace({ rrfK: 5 }).rrfK, 5);
  assert.ok(Object.isFrozen(cfg));
  const shown = new MemoryConfig({ embeddingApiKey: "sk-secret", postgresDsn: "postgresql://u:pw@h/db" }, {}).toJSON();
  assert.equal(shown.embeddingApiKey, "***");
  assert.equal(shown.postgresDsn, "postgresql://u:***@h/db");
});
