import assert from "node:assert/strict";
import { test } from "node:test";

import { splitBudget } from "../src/budget.js";
import { heuristicTokenCount, pythonFloatRepr, pythonJsonDumps } from "../src/text.js";
import { fixture } from "./helpers.js";

interface TextFixture {
  counts: [string, number][];
  tool_results: { json: string; dumps: string; tokens: number }[];
  budgets: [number, number, number, number, number][];
}

const fx = fixture<TextFixture>("text");

test("token counts are Python's (code points, not UTF-16 units)", () => {
  for (const [text, n] of fx.counts) assert.equal(heuristicTokenCount(text), n, JSON.stringify(text));
  assert.equal(heuristicTokenCount("😀😀😀😀😀"), 2); // five code points, ten UTF-16 units
});

test("tool results serialise as Python's json.dumps and count alike", () => {
  for (const c of fx.tool_results) {
    const dumped = pythonJsonDumps(JSON.parse(c.json));
    assert.equal(dumped, c.dumps);
    assert.equal(heuristicTokenCount(dumped), c.tokens);
  }
});

test("floats print as Python's repr", () => {
  const cases: [number, string][] = [
    [0.1, "0.1"],
    [1e-5, "1e-05"],
    [1e16, "1e+16"],
    [1.5e15, "1500000000000000.0"],
    [123.0, "123.0"],
    [-0.0, "-0.0"],
    [5e-324, "5e-324"],
    [0.0001, "0.0001"],
  ];
  for (const [x, text] of cases) assert.equal(pythonFloatRepr(x), text);
});

test("budget shares are Python's exact decimal floors", () => {
  for (const [budget, fs, fe, session, episodic] of fx.budgets) {
    assert.deepEqual(splitBudget(budget, fs, fe), { session, episodic }, `${budget} × (${fs}, ${fe})`);
  }
});
