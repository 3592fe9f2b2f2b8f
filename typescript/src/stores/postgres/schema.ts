/**
 * The schema's revision: checked against the head of the Python package's migrations, and on a
 * schema that does not exist yet created at head from the migrations' own SQL files, run in the
 * order their manifest gives (`actrone_pg/migrations/sql/manifest.json`, carried in
 * generated.ts), the same revision then stamped in the same Alembic version table. Any other
 * revision is refused with the command that upgrades it.
 */
import type { PoolClient } from "pg";
import { blake2b } from "../../embedders/blake2b.js";
import { SchemaError } from "../../errors.js";
import { HEAD_REVISION, MANIFEST, UPGRADABLE_REVISIONS, VERSION_TABLE } from "./generated.js";
import { ident } from "./sql.js";

/** How pgvector is installed, as Python's migrations say it. */
export const PGVECTOR_HINT =
  "the pgvector extension is not available on this PostgreSQL server. Install it " +
  "(Debian/Ubuntu: apt install postgresql-<major>-pgvector; RHEL: dnf install pgvector_<major>; " +
  "macOS: brew install pgvector; Docker: use the pgvector/pgvector image; from source: " +
  "https://github.com/pgvector/pgvector#installation). Then run: actrone-pg migrate";

export { HEAD_REVISION, VERSION_TABLE };

/** The advisory-lock key of `schema`'s migrations, as Python's `migrations.lock_key`. */
export function lockKey(schema: string): bigint {
  const digest = blake2b(new TextEncoder().encode(`actrone_pg.migrate:${schema}`), 8);
  let value = 0n;
  for (const byte of digest) value = (value << 8n) | BigInt(byte);
  return BigInt.asIntN(64, value);
}

/** The revision `schema` is at, or null if it has never been migrated. */
export async function currentRevision(client: PoolClient, schema: string): Promise<string | null> {
  const table = `${ident(schema)}.${ident(VERSION_TABLE)}`;
  const exists = await client.query<{ e: boolean }>("SELECT to_regclass($1) IS NOT NULL AS e", [table]);
  if (!exists.rows[0]?.e) return null;
  const row = await client.query<{ version_num: string }>(`SELECT version_num FROM ${table}`);
  return row.rows[0]?.version_num ?? null;
}

/** A migration file with its placeholders filled (Python's `_files.fill`). */
export function fill(text: string, schema: string, vectorSchema: string): string {
  return text.replaceAll("{schema}", ident(schema)).replaceAll("{vector_schema}", ident(vectorSchema));
}

/**
 * The statements that create `schema` at head, as the manifest says: the schema, the extension,
 * Alembic's version table, each revision's tables and objects (and with `distribute`, its Citus
 * files), and the stamp.
 */
export function headStatements(schema: string, vectorSchema: string, distribute: boolean): string[] {
  const s = ident(schema);
  const out = [
    `CREATE SCHEMA IF NOT EXISTS ${s}`,
    `CREATE TABLE ${s}.${ident(VERSION_TABLE)} (version_num VARCHAR(32) NOT NULL, ` +
      `CONSTRAINT ${ident(`${VERSION_TABLE}_pkc`)} PRIMARY KEY (version_num))`,
  ];
  for (const revision of MANIFEST) {
    for (const file of [...revision.tables, ...revision.objects, ...(distribute ? revision.citus : [])]) {
      out.push(fill(file, schema, vectorSchema));
    }
  }
  out.push(`INSERT INTO ${s}.${ident(VERSION_TABLE)} (version_num) VALUES ('${HEAD_REVISION}')`);
  return out;
}

/**
 * Check `schema`'s revision; create it at head when it has none and `autoMigrate` allows. On a
 * Citus coordinator (`citus`) the new schema is distributed unless `distribute` is "off".
 */
export async function prepareSchema(
  client: PoolClient,
  schema: string,
  options: { autoMigrate: boolean; distribute: string; citus: boolean },
): Promise<void> {
  const current = await currentRevision(client, schema);
  if (current === HEAD_REVISION) return;
  const migrate = `actrone-pg migrate --schema ${schema}`;
  if (current !== null) {
    if (!(UPGRADABLE_REVISIONS as readonly string[]).includes(current)) {
      throw new SchemaError(
        `schema ${JSON.stringify(schema)} is at revision ${current}, which this version of actrone-pg does not know ` +
          `(its newest is ${HEAD_REVISION}): the database was migrated by a newer release; upgrade actrone-pg`,
      );
    }
    throw new SchemaError(
      `schema ${JSON.stringify(schema)} is at revision ${current}, but this version of actrone-pg needs revision ` +
        `${HEAD_REVISION}; run \`${migrate}\` (the Python package's command upgrades it in place)`,
    );
  }
  if (!options.autoMigrate) {
    throw new SchemaError(
      `schema ${JSON.stringify(schema)} has never been migrated, but this version of actrone-pg needs revision ` +
        `${HEAD_REVISION}; run \`${migrate}\` (or set postgresAutoMigrate: true)`,
    );
  }
  if (options.distribute === "citus" && !options.citus) {
    throw new SchemaError(
      `postgresDistribute "citus", but this server has no citus extension: connect to a Citus coordinator, or set postgresDistribute "auto" or "off"`,
    );
  }
  const available = await client.query<{ a: boolean }>(
    "SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector') AS a",
  );
  if (!available.rows[0]?.a) throw new SchemaError(PGVECTOR_HINT);
  await client.query("BEGIN");
  try {
    await client.query("SELECT pg_advisory_xact_lock($1)", [lockKey(schema).toString()]);
    // Another process may have created it while this one waited for the lock.
    const again = await currentRevision(client, schema);
    if (again === null) {
      await client.query("CREATE EXTENSION IF NOT EXISTS vector");
      const vector = await client.query<{ nspname: string }>(
        "SELECT n.nspname FROM pg_extension AS e JOIN pg_namespace AS n ON n.oid = e.extnamespace WHERE e.extname = 'vector'",
      );
      const vectorSchema = vector.rows[0]?.nspname ?? "public";
      const distribute = options.citus && options.distribute !== "off";
      // Each file as one simple-protocol query (no parameters), as the manifest says.
      for (const statement of headStatements(schema, vectorSchema, distribute)) await client.query(statement);
    } else if (again !== HEAD_REVISION) {
      throw new SchemaError(`schema ${JSON.stringify(schema)} is at revision ${again}; run \`${migrate}\``);
    }
    await client.query("COMMIT");
  } catch (exc) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw exc;
  }
}
