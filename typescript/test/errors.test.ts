import assert from "node:assert/strict";
import { test } from "node:test";

import * as actrone from "../src/index.js";

test("every error class derives from ActroneError and keeps its cause", () => {
  const cause = new Error("driver said no");
  const err = new actrone.StoreUnavailableError("cannot reach the server", { cause });
  assert.ok(err instanceof actrone.StoreError);
  assert.ok(err instanceof actrone.ActroneError);
  assert.equal(err.cause, cause);
  assert.equal(err.name, "StoreUnavailableError");
  assert.ok(new actrone.MemoryNotFoundError("x") instanceof actrone.ValidationError);
  assert.ok(new actrone.SchemaError("x") instanceof actrone.StoreError);
  const config = new actrone.ConfigurationError("rrfK", "must be at least 1");
  assert.equal(config.field, "rrfK");
  assert.equal(config.message, "rrfK: must be at least 1");
});
