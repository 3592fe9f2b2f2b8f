/** Ids derived as Python derives them: memory ids (UUIDv5) and list cursors. */
import { createHash, randomUUID } from "node:crypto";

import { ValidationError } from "./errors.js";
import { checkId, MAX_ID_CHARS } from "./validation.js";

// Memory ids default to a UUID derived from the agent, session and content (Python's namespace),
// so a retried inject writes the same memory, from either language.
const MEMORY_NAMESPACE = Buffer.from("6f3a7d2e5c1b4e8a9d0f2b7c4e6a8f10", "hex");

/** Python's `uuid.uuid5(namespace, name)` for the memory namespace. */
export function memoryId(agentId: string, sessionId: string | null, content: string): string {
  const hash = createHash("sha1").update(MEMORY_NAMESPACE).update(`${agentId}\u0000${sessionId ?? ""}\u0000${content}`, "utf8").digest();
  const b = hash.subarray(0, 16);
  b[6] = (b[6]! & 0x0f) | 0x50;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const hex = b.toString("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** A new random turn id (UUIDv4). */
export function turnId(): string {
  return randomUUID();
}

/** The opaque cursor after a memory: its `[createdAt µs, id]` key as URL-safe base64 JSON. */
export function encodeCursor(createdUs: number, id: string): string {
  return Buffer.from(`[${createdUs}, ${JSON.stringify(id)}]`, "utf8").toString("base64url");
}

/** The `[createdAt µs, id]` key of a cursor `encodeCursor` made (in either language). */
export function decodeCursor(cursor: unknown): [number, string] {
  if (typeof cursor !== "string" || !cursor || cursor.length > 4 * MAX_ID_CHARS) {
    throw new ValidationError("cursor must be a nextCursor string from listMemories");
  }
  try {
    if (!/^[A-Za-z0-9_-]+$/.test(cursor)) throw new Error("not base64url");
    const parsed = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")) as unknown;
    if (!Array.isArray(parsed) || parsed.length !== 2 || !Number.isSafeInteger(parsed[0])) throw new Error("not a key");
    return [parsed[0] as number, checkId("cursor id", parsed[1])];
  } catch {
    throw new ValidationError("cursor is not one listMemories returned (pass nextCursor as it is)");
  }
}
