// The public surface of spec §12: its names are exported, and no public declaration uses `any`.
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import * as actrone from "../src/index.js";

test("the names of spec §12 are exported", () => {
  for (const name of [
    "MemoryManager",
    "createMemoryManager",
    "MemoryConfig",
    "HashingEmbedder",
    "OnnxEmbedder",
    "OpenAIEmbedder",
    "ActroneError",
    "ValidationError",
    "ConfigurationError",
    "StoreError",
    "StoreUnavailableError",
    "SchemaError",
    "MemoryNotFoundError",
    "InMemoryStore",
  ]) {
    assert.equal(typeof (actrone as Record<string, unknown>)[name], "function", name);
  }
  for (const method of [
    "storeTurn",
    "injectMemory",
    "injectMemories",
    "retrieveContext",
    "searchMemories",
    "getRecentTurns",
    "getMemory",
    "updateMemory",
    "memoryHistory",
    "listMemories",
    "deleteMemory",
    "clearSession",
    "eraseAgent",
    "close",
  ]) {
    assert.equal(typeof (actrone.MemoryManager.prototype as unknown as Record<string, unknown>)[method], "function", method);
  }
  assert.equal(typeof actrone.MemoryManager.prototype[Symbol.asyncDispose], "function");
});

function declarations(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return declarations(path);
    return name.endsWith(".d.ts") ? [path] : [];
  });
}

test("no public declaration uses any", () => {
  const files = declarations(join(process.cwd(), "dist"));
  assert.ok(files.length > 10, "the package is built (npm run build) before its tests");
  for (const file of files) {
    const code = readFileSync(file, "utf8")
      .replace(/\/\*[\s\S]*?\*\//g, "")
      .replace(/\/\/.*$/gm, "");
    assert.doesNotMatch(code, /\bany\b/, file);
  }
});
