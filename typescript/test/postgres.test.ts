// The postgres backend on the schema Python's migrations install: created at head by TypeScript
// exactly as Alembic creates it, refused at any other revision, and the store's contract.
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { ConfigurationError, MemoryManager, SchemaError, ValidationError } from "../src/index.js";
import { storeContract } from "./helpers/contract.js";
import { HEAD_REVISION } from "../src/stores/postgres/schema.js";
import { annIndexName } from "../src/stores/postgres/store.js";
import { DSN, dropSchema, freshSchema, python, sql } from "./helpers/pg.js";

const skip = DSN ? false : "no PostgreSQL (test/run.mjs starts one; or set ACTRONE_TEST_POSTGRES_DSN)";
const schemas: string[] = [];
after(async () => {
  if (DSN) for (const s of schemas) await dropSchema(s);
});

function schema(prefix = "ts"): string {
  const s = freshSchema(prefix);
  schemas.push(s);
  return s;
}

async function manager(name: string, extra: Record<string, unknown> = {}): Promise<MemoryManager> {
  return MemoryManager.create({
    config: { backend: "postgres", postgresDsn: DSN, postgresSchema: name, embeddingProvider: "hashing", ...extra },
  });
}

describe("the schema", { skip }, () => {
  test("TypeScript creates the head schema and stamps Alembic's revision in its version table", async () => {
    const name = schema();
    const mm = await manager(name);
    await mm.close();
    const rows = await sql<{ version_num: string }>(`SELECT version_num FROM "${name}".actrone_alembic_version`);
    assert.deepEqual(
      rows.map((r) => r.version_num),
      [HEAD_REVISION],
    );
    // Python's own check of the revision accepts it: it opens the schema without migrating.
    const seen = await python<{ revision: string }>("migrate", { dsn: DSN, schema: name });
    assert.equal(seen.revision, HEAD_REVISION);
  });

  test("the catalogue TypeScript creates is the one Alembic creates", async () => {
    const ours = schema("ts_cat");
    const theirs = schema("py_cat");
    await (await manager(ours)).close();
    await python("migrate", { dsn: DSN, schema: theirs });
    const a = await python<Record<string, unknown[]>>("catalogue", { dsn: DSN, schema: ours });
    const b = await python<Record<string, unknown[]>>("catalogue", { dsn: DSN, schema: theirs });
    assert.ok((a.functions ?? []).length >= 5, "the schema has its SQL functions");
    assert.ok((a.indexes ?? []).length >= 5, "the schema has its indexes");
    for (const key of Object.keys(b)) assert.deepEqual(a[key], b[key], `catalogue part ${key}`);
  });

  test("a schema at an older revision is refused with the command that upgrades it; nothing is changed", async () => {
    const name = schema();
    await (await manager(name)).close();
    // 0023: the last pre-release revision, which Python's `actrone-pg migrate` takes to head.
    await sql(`UPDATE "${name}".actrone_alembic_version SET version_num = '0023'`);
    await assert.rejects(manager(name), (exc: unknown) => {
      assert.ok(exc instanceof SchemaError);
      assert.match(exc.message, /revision 0023/);
      assert.match(exc.message, new RegExp(`actrone-pg migrate --schema ${name}`));
      return true;
    });
    const rows = await sql<{ version_num: string }>(`SELECT version_num FROM "${name}".actrone_alembic_version`);
    assert.deepEqual(
      rows.map((r) => r.version_num),
      ["0023"],
    );
  });

  test("a revision this package does not know is refused as a newer release's", async () => {
    const name = schema();
    await (await manager(name)).close();
    await sql(`UPDATE "${name}".actrone_alembic_version SET version_num = '9999'`);
    await assert.rejects(manager(name), (exc: unknown) => exc instanceof SchemaError && /newer release/.test(exc.message));
  });

  test("with postgresAutoMigrate off, a missing schema is a SchemaError and is not created", async () => {
    const name = schema();
    await assert.rejects(manager(name, { postgresAutoMigrate: false }), (exc: unknown) => {
      return exc instanceof SchemaError && exc.message.includes("actrone-pg migrate");
    });
    const rows = await sql<{ n: string }>("SELECT count(*) AS n FROM pg_namespace WHERE nspname = $1", [name]);
    assert.equal(Number(rows[0]!.n), 0);
  });

  test("no DSN is a ConfigurationError naming postgresDsn", async () => {
    await assert.rejects(
      MemoryManager.create({ config: { backend: "postgres", postgresDsn: null, embeddingProvider: "hashing" } }),
      (exc: unknown) => exc instanceof ConfigurationError && exc.field === "postgresDsn",
    );
  });

  test("postgresRowSecurity true is a ConfigurationError naming it (the Python store's only)", async () => {
    await assert.rejects(
      MemoryManager.create({
        config: { backend: "postgres", postgresDsn: "postgresql://127.0.0.1:1/none", postgresRowSecurity: true, embeddingProvider: "hashing" },
      }),
      (exc: unknown) => exc instanceof ConfigurationError && exc.field === "postgresRowSecurity",
    );
  });
});

test("an agent's HNSW index is looked up by the name Python's store gives it", async () => {
  const pairs = [
    ["agent-1", "hashing-384"],
    ["ägent ☕ 🙂", "onnx:all-MiniLM-L6-v2"],
    ["a".repeat(256), "x"],
  ];
  const { names } = await python<{ names: string[] }>("ann_names", { pairs });
  assert.deepEqual(
    pairs.map(([a, e]) => annIndexName(a!, e!)),
    names,
  );
});

describe("the store", { skip }, () => {
  test("turns, memories, search, update, history, listing, delete and erase", async () => {
    const mm = await manager(schema(), { relevanceThreshold: 0.01 });
    try {
      await storeContract(mm);
    } finally {
      await mm.close();
    }
  });

  test("bad input is a ValidationError and writes nothing", async () => {
    const mm = await manager(schema());
    try {
      await assert.rejects(mm.injectMemory("a", "nul \u0000 byte"), ValidationError);
      await assert.rejects(mm.retrieveContext("a", "s", "q", 0), ValidationError);
      // tsquery operators and punctuation simply work
      assert.deepEqual(await mm.searchMemories("a", "!(&|:*) <-> 'x'"), []);
      assert.equal((await mm.listMemories("a")).items.length, 0);
    } finally {
      await mm.close();
    }
  });
});
