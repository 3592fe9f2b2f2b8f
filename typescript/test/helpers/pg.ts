// What the PostgreSQL tests share: the run's server (test/run.mjs starts it and sets
// ACTRONE_TEST_POSTGRES_DSN), a fresh schema name per test, and Python's side of the
// cross-language tests (test/helpers/cross.py, run with the repository's Python).
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";

const here = dirname(fileURLToPath(import.meta.url));
/** test/helpers of the source tree (the compiled file lives in build-test/test/helpers). */
export const helpersDir = resolve(here, "..", "..", "..", "test", "helpers");

/** The run's PostgreSQL; tests that need it are skipped without it. */
export const DSN = process.env.ACTRONE_TEST_POSTGRES_DSN ?? "";

/** A schema name no other test uses. */
export function freshSchema(prefix = "ts"): string {
  return `${prefix}_${randomBytes(5).toString("hex")}`;
}

/** Drop `schema` (and everything in it). */
export async function dropSchema(schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: DSN });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await client.end();
  }
}

/** One query on its own connection. */
export async function sql<T extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: DSN });
  await client.connect();
  try {
    return (await client.query<T>(text, values)).rows;
  } finally {
    await client.end();
  }
}

/**
 * Run Python's side (test/helpers/cross.py `command`) with `input` as JSON on stdin; its JSON
 * answer. Python is ACTRONE_TEST_PYTHON (set by test/run.mjs), the repository on PYTHONPATH.
 */
export function python<T>(command: string, input: unknown): Promise<T> {
  const exe = process.env.ACTRONE_TEST_PYTHON ?? resolve(helpersDir, "..", "..", "..", ".venv", "bin", "python");
  return new Promise((done, fail) => {
    const { ACTRONE_TEST_PYTHON: _, ...env } = process.env; // not a setting of actrone_pg
    const child = spawn(exe, [join(helpersDir, "cross.py"), command], { stdio: ["pipe", "pipe", "pipe"], env });
    let out = "";
    let err = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString("utf8")));
    child.stderr.on("data", (d: Buffer) => (err += d.toString("utf8")));
    child.on("error", fail);
    child.on("exit", (code) => {
      if (code !== 0) fail(new Error(`cross.py ${command} exited with ${code}:\n${err}`));
      else {
        try {
          done(JSON.parse(out) as T);
        } catch (exc) {
          fail(new Error(`cross.py ${command} printed no JSON: ${out}\n${err}`, { cause: exc }));
        }
      }
    });
    child.stdin.end(JSON.stringify(input));
  });
}

/** A server of test/helpers/pg_server.py (`citus`: a Citus cluster) for one test file. */
export interface Server {
  readonly dsn: string | null;
  /** Why there is none. */
  readonly unavailable: string | null;
  stop(): Promise<void>;
}

export async function startServer(kind: "citus" | "postgres"): Promise<Server> {
  const exe = process.env.ACTRONE_TEST_PYTHON ?? resolve(helpersDir, "..", "..", "..", ".venv", "bin", "python");
  const child = spawn(exe, [join(helpersDir, "pg_server.py"), ...(kind === "citus" ? ["citus"] : [])], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const exited = new Promise<void>((done) => child.on("exit", () => done()));
  let buffer = "";
  const line = await new Promise<string>((done) => {
    child.stdout.on("data", (d: Buffer) => {
      buffer += d.toString("utf8");
      const i = buffer.indexOf("\n");
      if (i >= 0) done(buffer.slice(0, i));
    });
    child.on("exit", () => done(buffer));
  });
  const stop = async () => {
    child.stdin.end();
    await exited;
  };
  if (line.startsWith("DSN ")) return { dsn: line.slice(4), unavailable: null, stop };
  await stop();
  return { dsn: null, unavailable: line.replace(/^UNAVAILABLE /, "") || "the server helper gave no DSN", stop: async () => {} };
}
