/**
 * The schema's revision: checked against the head of the Python package's Alembic migrations,
 * and on a schema that does not exist yet created at head from the statements those migrations
 * execute (generated.ts's `DDL`, recorded from Alembic at build time), the same revision then
 * stamped in the same version table. Any other revision is refused with the command that
 * upgrades it.
 */
import type { PoolClient } from "pg";
import { blake2b } from "../../embedders/blake2b.js";
import { SchemaError } from "../../errors.js";
import { DDL, DDL_VECTOR_SCHEMA, HEAD_REVISION, KNOWN_REVISIONS, VERSION_TABLE } from "./generated.js";
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

/** The DDL of the head schema for `schema` (Python's templates fill `{schema}` unquoted). */
export function headDdl(schema: string): string[] {
  return DDL.map((statement) => statement.replaceAll("{schema}", schema));
}

/**
 * Check `schema`'s revision; create it at head when it has none and `autoMigrate` allows.
 * `citus`: the server is a Citus coordinator (Python's migrations distribute the tables there:
 * TypeScript leaves that to `actrone-pg migrate`).
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
    if (!(KNOWN_REVISIONS as readonly string[]).includes(current)) {
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
  if (options.citus && options.distribute !== "off") {
    throw new SchemaError(
      `schema ${JSON.stringify(schema)} does not exist and the server is a Citus coordinator: its tables are ` +
        `distributed by Python's migrations; run \`${migrate}\` once (or set postgresDistribute: "off")`,
    );
  }
  if (options.distribute === "citus") {
    throw new SchemaError(`postgresDistribute "citus" needs a Citus coordinator, and this server has no citus extension`);
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
      const vector = await client.query<{ nspname: string }>(
        "SELECT n.nspname FROM pg_extension AS e JOIN pg_namespace AS n ON n.oid = e.extnamespace WHERE e.extname = 'vector'",
      );
      const where = vector.rows[0]?.nspname;
      if (where !== undefined && where !== DDL_VECTOR_SCHEMA) {
        throw new SchemaError(
          `pgvector is installed in schema ${JSON.stringify(where)} of this database, not ${JSON.stringify(DDL_VECTOR_SCHEMA)}: ` +
            `run \`${migrate}\` to create the schema`,
        );
      }
      for (const statement of headDdl(schema)) await client.query(statement);
    } else if (again !== HEAD_REVISION) {
      throw new SchemaError(`schema ${JSON.stringify(schema)} is at revision ${again}; run \`${migrate}\``);
    }
    await client.query("COMMIT");
  } catch (exc) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw exc;
  }
}
