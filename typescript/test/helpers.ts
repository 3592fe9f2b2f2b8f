// Shared by the tests: the fixtures Python wrote for this run, and conversions of their values.
import { readFileSync } from "node:fs";
import { join } from "node:path";

const dir = process.env.ACTRONE_TEST_FIXTURES ?? join(process.cwd(), "build-test", "fixtures");

/** The fixture `name` that test/fixtures/generate.py wrote. */
export function fixture<T>(name: string): T {
  return JSON.parse(readFileSync(join(dir, `${name}.json`), "utf8")) as T;
}

/** A float32 vector from its base64 little-endian bytes. */
export function f32(b64: string): Float32Array {
  const bytes = Buffer.from(b64, "base64");
  return new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
}

/** `snake_case` -> `camelCase`. */
export function camel(name: string): string {
  return name.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

/** An object's keys in camelCase (one level). */
export function camelKeys(obj: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(obj).map(([k, v]) => [camel(k), v]));
}

/** Python's snake_case filters as the TypeScript ones (dates as Dates). */
export function filtersOf(raw: Record<string, unknown> | undefined | null): Record<string, unknown> | null {
  if (raw === undefined || raw === null) return null;
  const out = camelKeys(raw);
  for (const key of ["createdAfter", "createdBefore"]) if (typeof out[key] === "string") out[key] = new Date(out[key] as string);
  return out;
}
