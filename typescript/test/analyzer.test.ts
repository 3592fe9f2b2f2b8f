import assert from "node:assert/strict";
import { test } from "node:test";

import { analyzer, dateText, tokenize } from "../src/analyzer.js";
import { fixture } from "./helpers.js";

interface AnalyzerFixture {
  texts: { text: string; tokens: string[]; english: string[]; simple: string[]; query: string[]; query_all: string[] }[];
  queries: [string, string[]][];
  stems: Record<string, string>;
  dates: [string, string][];
  documents: [string, string, string[]][];
}

const fx = fixture<AnalyzerFixture>("analyzer");

test("tokens and terms equal Python's for every text", () => {
  const english = analyzer("english");
  const simple = analyzer("simple");
  for (const t of fx.texts) {
    assert.deepEqual(tokenize(t.text), t.tokens, `tokens of ${JSON.stringify(t.text)}`);
    assert.deepEqual(english.terms(t.text), t.english, `english terms of ${JSON.stringify(t.text)}`);
    assert.deepEqual(simple.terms(t.text), t.simple);
    assert.deepEqual(english.queryTerms(t.text, { dropQuestionWords: true }), t.query);
    assert.deepEqual(english.queryTerms(t.text), t.query_all);
  }
});

test("query terms of every question equal Python's", () => {
  const english = analyzer("english");
  for (const [text, terms] of fx.queries) assert.deepEqual(english.queryTerms(text, { dropQuestionWords: true }), terms, text);
});

test("the Snowball stem of every token of the corpus equals Python's", () => {
  const english = analyzer("english");
  const tokens = Object.keys(fx.stems);
  assert.ok(tokens.length > 20);
  const mismatches = tokens.filter((t) => english.termsOf([t])[0] !== fx.stems[t]);
  assert.deepEqual(mismatches.slice(0, 10).map((t) => [t, english.termsOf([t])[0], fx.stems[t]]), []);
});

test("date texts and dated documents equal Python's", () => {
  for (const [when, text] of fx.dates) assert.equal(dateText(new Date(when)), text);
  const dated = analyzer("english", true);
  for (const [content, when, terms] of fx.documents) assert.deepEqual(dated.documentTerms(content, new Date(when)), terms);
});
