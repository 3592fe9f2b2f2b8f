// TypeScript's retrieveContext against Python's retrieve_context on the same data, in one run:
// `npm run bench -- [--dsn URL] [--memories N] [--queries N] [--rounds N]`.
//
// PostgreSQL: Python writes N memories (and a few turns) of one agent; then the two languages
// time retrieve_context over the same queries on that data, in alternating blocks (Python,
// TypeScript, Python, TypeScript, ...) so that drift of a shared, noisy machine falls on both.
// In-memory: each language loads the same memories into its own in-process store and times the
// same queries. Prints p50 and p99 (ms) per side and the TypeScript / Python ratios.
// The server is --dsn, else ACTRONE_TEST_POSTGRES_DSN, else the embedded one of the Python suite.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import pg from "pg";
import { MemoryManager } from "../dist/index.js";

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, "..", "..");
const python = process.env.ACTRONE_TEST_PYTHON || resolve(repo, ".venv", "bin", "python");
const { ACTRONE_TEST_PYTHON: _, ...inherited } = process.env; // not a setting of actrone_pg
const env = { ...inherited, PYTHONPATH: [repo, process.env.PYTHONPATH].filter(Boolean).join(":") };
const { values: opts } = parseArgs({
  options: {
    dsn: { type: "string" },
    memories: { type: "string", default: "2000" },
    queries: { type: "string", default: "50" },
    rounds: { type: "string", default: "4" },
    blocks: { type: "string", default: "3" },
  },
});
const N = Number(opts.memories);
const Q = Number(opts.queries);
const ROUNDS = Number(opts.rounds);
const BLOCKS = Number(opts.blocks);
const THRESHOLD = 0.1;
const BUDGET = 4000;
const AGENT = "bench-agent";

// -- deterministic data: sentences over a small vocabulary (seeded PRNG) --
let seed = 42;
const rand = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
const words = (
  "alice bob carol dave paris lisbon tokyo dog cat bird guitar piano painting soccer tennis coffee tea " +
  "birthday wedding trip school work project deadline meeting doctor dentist sister brother mother father " +
  "bought visited moved adopted learned finished started loves hates plays reads cooks runs swims hikes"
).split(" ");
const sentence = (n) => Array.from({ length: n }, () => words[Math.floor(rand() * words.length)]).join(" ");
const items = Array.from({ length: N }, (_, i) => ({
  content: `${sentence(8 + Math.floor(rand() * 12))}.`,
  sessionId: `s${i % 20}`,
  createdAt: new Date(Date.UTC(2025, 0, 1) + i * 3_600_000).toISOString(),
}));
const queries = Array.from({ length: Q }, () => `${sentence(5)}?`);

function py(command, input) {
  return new Promise((done, fail) => {
    const child = spawn(python, [join(here, "python_side.py"), command], { env, stdio: ["pipe", "pipe", "inherit"] });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.on("exit", (code) => (code === 0 ? done(JSON.parse(out)) : fail(new Error(`python_side.py ${command} exited ${code}`))));
    child.stdin.end(JSON.stringify(input));
  });
}

async function tsTimes(config, load) {
  const mm = await MemoryManager.create({ config });
  try {
    if (load) await mm.injectMemories(AGENT, items.map((it) => ({ ...it, createdAt: new Date(it.createdAt) })));
    for (const q of queries.slice(0, 10)) await mm.retrieveContext(AGENT, "bench", q, BUDGET);
    const out = [];
    for (let r = 0; r < ROUNDS; r++) {
      for (const q of queries) {
        const start = performance.now();
        await mm.retrieveContext(AGENT, "bench", q, BUDGET);
        out.push(performance.now() - start);
      }
    }
    return out;
  } finally {
    await mm.close();
  }
}

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const row = (name, xs) => `${name.padEnd(38)} ${pct(xs, 50).toFixed(2).padStart(8)} ${pct(xs, 99).toFixed(2).padStart(8)} ${String(xs.length).padStart(6)}`;

async function server() {
  const given = opts.dsn || process.env.ACTRONE_TEST_POSTGRES_DSN;
  if (given) return { dsn: given, stop: async () => {} };
  const child = spawn(python, [join(here, "..", "test", "helpers", "pg_server.py")], { env, stdio: ["pipe", "pipe", "inherit"] });
  for await (const line of createInterface({ input: child.stdout })) {
    if (line.startsWith("DSN ")) {
      return {
        dsn: line.slice(4),
        stop: async () => {
          child.stdin.end();
          await new Promise((d) => child.on("exit", d));
        },
      };
    }
  }
  throw new Error("no PostgreSQL");
}

const srv = await server();
const schema = `bench_${randomBytes(4).toString("hex")}`;
try {
  console.log(`retrieve_context / retrieveContext: ${N} memories, ${Q} queries x ${ROUNDS} rounds x ${BLOCKS} blocks per side, budget ${BUDGET}, hashing embedder, threshold ${THRESHOLD}`);
  await py("write", { backend: "postgres", dsn: srv.dsn, schema, agent: AGENT, threshold: THRESHOLD, items, turns: 20 });
  const pgConfig = { backend: "postgres", postgresDsn: srv.dsn, postgresSchema: schema, embeddingProvider: "hashing", relevanceThreshold: THRESHOLD };
  const pyPg = [];
  const tsPg = [];
  for (let b = 0; b < BLOCKS; b++) {
    pyPg.push(...(await py("time", { backend: "postgres", dsn: srv.dsn, schema, agent: AGENT, threshold: THRESHOLD, queries, rounds: ROUNDS, warmup: 10, budget: BUDGET, items: [] })).ms);
    tsPg.push(...(await tsTimes(pgConfig, false)));
  }
  const memConfig = { backend: "memory", embeddingProvider: "hashing", relevanceThreshold: THRESHOLD };
  const pyMem = (await py("time", { backend: "memory", agent: AGENT, threshold: THRESHOLD, queries, rounds: ROUNDS, warmup: 10, budget: BUDGET, items })).ms;
  const tsMem = await tsTimes(memConfig, true);
  console.log(`${"".padEnd(38)} ${"p50 ms".padStart(8)} ${"p99 ms".padStart(8)} ${"calls".padStart(6)}`);
  console.log(row("postgres   Python retrieve_context", pyPg));
  console.log(row("postgres   TypeScript retrieveContext", tsPg));
  console.log(row("memory     Python retrieve_context", pyMem));
  console.log(row("memory     TypeScript retrieveContext", tsMem));
  console.log(`ratio TypeScript / Python, postgres: p50 ${(pct(tsPg, 50) / pct(pyPg, 50)).toFixed(2)}x  p99 ${(pct(tsPg, 99) / pct(pyPg, 99)).toFixed(2)}x  (target: within 1.2x)`);
  console.log(`ratio TypeScript / Python, memory:   p50 ${(pct(tsMem, 50) / pct(pyMem, 50)).toFixed(2)}x  p99 ${(pct(tsMem, 99) / pct(pyMem, 99)).toFixed(2)}x`);
} finally {
  const client = new pg.Client({ connectionString: srv.dsn });
  await client.connect();
  await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await client.end();
  await srv.stop();
}
