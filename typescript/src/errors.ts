/**
 * Every error actrone-pg raises: the tree of Python's `actrone_pg.errors`, class for class.
 *
 * ```text
 * ActroneError
 * ├── ConfigurationError             a MemoryConfig field is invalid (`field` names it)
 * ├── ValidationError                an argument of a call is invalid; nothing was written
 * │   ├── DimensionMismatchError     a vector of the wrong length
 * │   └── MemoryNotFoundError        the agent has no such (current) memory
 * ├── MissingDependencyError         an optional peer dependency is not installed
 * ├── StoreError                     a backend failed
 * │   ├── StoreUnavailableError      cannot reach the server (timeout, refused, lost)
 * │   ├── SchemaError                schema missing or behind, or no pgvector
 * │   └── LockLostError              a write made under a lock no longer held
 * ├── EmbedderError                  an embedder failed or returned bad vectors
 * │   └── ModelNotAvailableError     an embedding or rerank model cannot be loaded
 * ├── RerankerError                  a reranker failed
 * └── ConsolidationError             turning turns into memories failed this time
 * ```
 *
 * Every public method of `MemoryManager` rejects only with these; an error of a store, embedder,
 * reranker or token counter arrives as the matching class, the original as `cause`.
 */

/** Options every error takes: the error it was caused by. */
export interface ErrorOptions {
  cause?: unknown;
}

/** Root of every error raised by actrone-pg. */
export class ActroneError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A configuration value is invalid; the message names the field. */
export class ConfigurationError extends ActroneError {
  /** The field (in camelCase) whose value is invalid. */
  readonly field: string;

  constructor(field: string, message: string, options?: ErrorOptions) {
    super(`${field}: ${message}`, options);
    this.field = field;
  }
}

/** An argument is invalid. Nothing was written. */
export class ValidationError extends ActroneError {}

/** A vector's length differs from the embedder's (or the stored vectors') dimensions. */
export class DimensionMismatchError extends ValidationError {}

/** The agent has no memory with this id (never had, deleted, or expired). */
export class MemoryNotFoundError extends ValidationError {}

/** An optional peer dependency is missing; the message gives the npm line that installs it. */
export class MissingDependencyError extends ActroneError {
  /** The npm package that is missing. */
  readonly packageName: string;

  constructor(packageName: string, options?: ErrorOptions) {
    super(`this feature needs the ${JSON.stringify(packageName)} package: npm install ${packageName}`, options);
    this.packageName = packageName;
  }
}

/** A storage backend failed. */
export class StoreError extends ActroneError {}

/**
 * The backend's server could not be reached, or was lost during the call. A write that fails
 * with it may still have been committed: retry it with the same id (writes are idempotent by id).
 */
export class StoreUnavailableError extends StoreError {}

/** The database schema is missing, out of date, or pgvector is not installed. */
export class SchemaError extends StoreError {}

/** A write made under a lock found the lock no longer held by its writer; nothing was written. */
export class LockLostError extends StoreError {}

/** An embedder failed or returned unusable vectors. */
export class EmbedderError extends ActroneError {}

/** A model could not be found or loaded. */
export class ModelNotAvailableError extends EmbedderError {}

/** A reranker failed. */
export class RerankerError extends ActroneError {}

/** A consolidation could not be done now; nothing was written for the turns concerned. */
export class ConsolidationError extends ActroneError {}
