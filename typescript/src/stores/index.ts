/** The store a config names (Python's `create_store`). */
import type { MemoryConfig } from "../config.js";
import { ConfigurationError } from "../errors.js";
import type { Store } from "../store.js";
import { InMemoryStore } from "./memory.js";

/** Build the store `config.backend` names (not yet set up: the manager calls `setup()`). */
export async function createStore(config: MemoryConfig): Promise<Store> {
  switch (config.backend) {
    case "memory":
      return new InMemoryStore({ textAnalyzer: config.textAnalyzer, lexicalDates: config.lexicalDates });
    case "redis_qdrant":
      throw new ConfigurationError("backend", "the redis_qdrant backend is Python's only; use \"memory\" or \"postgres\" from TypeScript");
    default:
      throw new ConfigurationError("backend", `the ${JSON.stringify(config.backend)} backend is not available in this version of the TypeScript package`);
  }
}

export { InMemoryStore, type InMemoryStoreOptions } from "./memory.js";
