/**
 * MemoryConfig: every setting, from code or from `ACTRONE_*` variables, as Python's.
 *
 * A field given in code wins; otherwise `ACTRONE_<FIELD_NAME_IN_CAPITALS>` (the Python name:
 * `rerankTopK` is `ACTRONE_RERANK_TOP_K`) is read from the environment; otherwise the default
 * applies. Every value is checked when the object is built, and an invalid one throws a
 * {@link ConfigurationError} naming the field.
 */
import { ConfigurationError } from "./errors.js";
import { defaultDataDir } from "./paths.js";

/** The backends a config can name. */
export const BACKENDS = ["memory", "postgres", "redis_qdrant"] as const;
/** The embedding providers a config can name. */
export const EMBEDDING_PROVIDERS = ["local", "hashing", "onnx", "openai"] as const;
/** `postgresDistribute`'s modes. */
export const DISTRIBUTE_MODES = ["auto", "citus", "off"] as const;
/** `consolidator`'s values. */
export const CONSOLIDATORS = ["extractive", "llm", "none"] as const;
/** `textAnalyzer`'s values. */
export const ANALYZERS = ["english", "simple"] as const;
/** The rankings RRF fuses, in the order of `rrfWeights`. */
export const CHANNEL_NAMES = ["dense", "lexical", "recency"] as const;
/** `rrfWeights`' default: each ranking's measured weight (Python's `DEFAULT_RRF_WEIGHTS`). */
export const DEFAULT_RRF_WEIGHTS: readonly number[] = Object.freeze([1.0, 4.0, 0.1]);

/** Every field of {@link MemoryConfig}; each is optional in the options object. */
export interface MemoryConfigFields {
  backend: string;
  postgresDsn: string | null;
  postgresSchema: string;
  postgresDistribute: string;
  postgresRowSecurity: boolean;
  postgresAutoMigrate: boolean;
  postgresDataDir: string;
  postgresPoolMinSize: number;
  postgresPoolMaxSize: number;
  postgresConnectTimeout: number;
  postgresStatementTimeout: number;
  postgresTextSearchConfig: string;
  postgresAnnMinMemories: number;
  postgresAnnEfSearch: number;
  redisUrl: string;
  qdrantUrl: string;
  qdrantApiKey: string | null;
  qdrantCollectionPrefix: string;
  redisTimeout: number;
  qdrantTimeout: number;
  redisPoolSize: number;
  redisSessionGraceHours: number;
  embeddingProvider: string;
  embeddingModel: string | null;
  embeddingApiUrl: string | null;
  embeddingApiKey: string | null;
  embeddingDimensions: number | null;
  embeddingBatchSize: number;
  embeddingThreads: number;
  queryCacheSize: number;
  maxSessionTurns: number;
  sessionTtlHours: number;
  relevanceThreshold: number | null;
  maxEpisodicMemories: number;
  hybridRetrieval: boolean;
  rrfK: number;
  rrfWeights: readonly number[];
  textAnalyzer: string;
  lexicalDates: boolean | null;
  bm25K1: number;
  bm25B: number;
  dropQuestionWords: boolean;
  neighbourWeight: number;
  relevanceWeight: number;
  recencyWeight: number;
  rerankEnabled: boolean;
  rerankTopK: number;
  rerankModel: string;
  consolidator: string;
  consolidateAfterTurns: number;
  consolidateCooldownSeconds: number;
  consolidatorApiUrl: string | null;
  consolidatorModel: string | null;
  consolidatorApiKey: string | null;
  consolidatorTimeout: number;
  consolidatorRetries: number;
  budgetFractionSession: number;
  budgetFractionEpisodic: number;
  redactSensitivities: readonly string[];
  maxTextChars: number;
  otelEnabled: boolean;
  otelRecordContent: boolean;
}

/** What `new MemoryConfig(options)` takes: any of the fields. */
export type MemoryConfigOptions = Partial<MemoryConfigFields>;

type Kind = "str" | "str?" | "int" | "int?" | "float" | "float?" | "bool" | "bool?" | "floats" | "labels";

// Each field's kind and default, in Python's declaration order.
const FIELDS: { [K in keyof MemoryConfigFields]: [Kind, () => MemoryConfigFields[K]] } = {
  backend: ["str", () => "memory"],
  postgresDsn: ["str?", () => null],
  postgresSchema: ["str", () => "actrone"],
  postgresDistribute: ["str", () => "auto"],
  postgresRowSecurity: ["bool", () => false],
  postgresAutoMigrate: ["bool", () => true],
  postgresDataDir: ["str", defaultDataDir],
  postgresPoolMinSize: ["int", () => 1],
  postgresPoolMaxSize: ["int", () => 10],
  postgresConnectTimeout: ["float", () => 5.0],
  postgresStatementTimeout: ["float", () => 30.0],
  postgresTextSearchConfig: ["str", () => "simple"],
  postgresAnnMinMemories: ["int", () => 50_000],
  postgresAnnEfSearch: ["int", () => 800],
  redisUrl: ["str", () => "redis://localhost:6379"],
  qdrantUrl: ["str", () => "http://localhost:6333"],
  qdrantApiKey: ["str?", () => null],
  qdrantCollectionPrefix: ["str", () => "actrone"],
  redisTimeout: ["float", () => 5.0],
  qdrantTimeout: ["float", () => 10.0],
  redisPoolSize: ["int", () => 20],
  redisSessionGraceHours: ["float", () => 48.0],
  embeddingProvider: ["str", () => "local"],
  embeddingModel: ["str?", () => null],
  embeddingApiUrl: ["str?", () => null],
  embeddingApiKey: ["str?", () => null],
  embeddingDimensions: ["int?", () => null],
  embeddingBatchSize: ["int", () => 32],
  embeddingThreads: ["int", () => 0],
  queryCacheSize: ["int", () => 1024],
  maxSessionTurns: ["int", () => 50],
  sessionTtlHours: ["float", () => 24.0],
  relevanceThreshold: ["float?", () => null],
  maxEpisodicMemories: ["int", () => 500],
  hybridRetrieval: ["bool", () => true],
  rrfK: ["int", () => 60],
  rrfWeights: ["floats", () => DEFAULT_RRF_WEIGHTS],
  textAnalyzer: ["str", () => "english"],
  lexicalDates: ["bool?", () => null],
  bm25K1: ["float", () => 1.2],
  bm25B: ["float", () => 0.3],
  dropQuestionWords: ["bool", () => true],
  neighbourWeight: ["float", () => 0.0],
  relevanceWeight: ["float", () => 0.7],
  recencyWeight: ["float", () => 0.3],
  rerankEnabled: ["bool", () => false],
  rerankTopK: ["int", () => 20],
  rerankModel: ["str", () => "Xenova/ms-marco-MiniLM-L-6-v2"],
  consolidator: ["str", () => "extractive"],
  consolidateAfterTurns: ["int", () => 20],
  consolidateCooldownSeconds: ["float", () => 300.0],
  consolidatorApiUrl: ["str?", () => null],
  consolidatorModel: ["str?", () => null],
  consolidatorApiKey: ["str?", () => null],
  consolidatorTimeout: ["float", () => 60.0],
  consolidatorRetries: ["int", () => 3],
  budgetFractionSession: ["float", () => 0.35],
  budgetFractionEpisodic: ["float", () => 0.25],
  redactSensitivities: ["labels", () => []],
  maxTextChars: ["int", () => 200_000],
  otelEnabled: ["bool", () => true],
  otelRecordContent: ["bool", () => false],
};

const FIELD_NAMES = Object.keys(FIELDS) as (keyof MemoryConfigFields)[];

/** The environment variable of a field: `rerankTopK` -> `ACTRONE_RERANK_TOP_K`. */
export function envName(field: string): string {
  return "ACTRONE_" + field.replace(/([A-Z0-9])/g, (c) => (/[0-9]/.test(c) ? c : "_" + c)).toUpperCase();
}

const ENV_NAMES = new Map(FIELD_NAMES.map((f) => [envName(f), f]));
const NOT_SETTINGS_PREFIXES = ["ACTRONE_TEST_", "ACTRONE_BENCH_", "ACTRONE_EXPORT_"];
const NOT_SETTINGS = new Set(["ACTRONE_MCP_TOKEN"]);
const warnedEnv = new Set<string>();
const TRUE = new Set(["1", "true", "yes", "on"]);
const FALSE = new Set(["0", "false", "no", "off"]);

function show(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(show).join(", ")}]`;
  return String(value);
}

function parseEnv(name: string, kind: Kind, raw: string): unknown {
  const text = raw.trim();
  const optional = kind.endsWith("?");
  if (optional && ["", "none", "null"].includes(text.toLowerCase())) return null;
  const base = kind.replace("?", "");
  switch (base) {
    case "bool": {
      const low = text.toLowerCase();
      if (TRUE.has(low)) return true;
      if (FALSE.has(low)) return false;
      throw new ConfigurationError(name, `expected true or false, got ${show(text)}`);
    }
    case "int": {
      // Python's int(): an optional sign, digits, single underscores between digits.
      if (!/^[+-]?\d+(_\d+)*$/.test(text)) {
        throw new ConfigurationError(name, `expected a whole number, got ${show(text)}`);
      }
      return Number(text.replace(/_/g, ""));
    }
    case "float": {
      const value = parsePythonFloat(text);
      if (value === undefined) throw new ConfigurationError(name, `expected a number, got ${show(text)}`);
      return value;
    }
    case "labels": {
      if (text.startsWith("[")) {
        try {
          return JSON.parse(text) as unknown;
        } catch {
          throw new ConfigurationError(name, `expected a JSON list of strings or a,b,c; got ${show(text)}`);
        }
      }
      return text
        .split(",")
        .map((p) => p.trim())
        .filter((p) => p !== "");
    }
    case "floats": {
      let parsed: unknown;
      try {
        if (text.startsWith("[")) parsed = JSON.parse(text) as unknown;
        else
          parsed = text.split(",").map((p) => {
            const v = parsePythonFloat(p.trim());
            if (v === undefined) throw new Error(p);
            return v;
          });
      } catch {
        throw new ConfigurationError(name, `expected a list of numbers such as '[1, 1, 0.3]', got ${show(text)}`);
      }
      if (!Array.isArray(parsed)) throw new ConfigurationError(name, `expected a list of numbers, got ${show(text)}`);
      return parsed;
    }
    default:
      return raw;
  }
}

/** Python's `float(text)`: decimal or exponent notation, `inf`, `nan`, underscores between digits. */
function parsePythonFloat(text: string): number | undefined {
  const t = text.trim().toLowerCase();
  const m = /^([+-]?)(inf|infinity|nan)$/.exec(t);
  if (m) return m[2] === "nan" ? NaN : m[1] === "-" ? -Infinity : Infinity;
  const digits = "\\d+(?:_\\d+)*";
  const re = new RegExp(`^[+-]?(?:${digits}(?:\\.(?:${digits})?)?|\\.${digits})(?:e[+-]?${digits})?$`);
  if (!re.test(t)) return undefined;
  return Number(t.replace(/_/g, ""));
}

function coerce(name: string, kind: Kind, value: unknown): unknown {
  const optional = kind.endsWith("?");
  if (value === null || value === undefined) {
    if (optional) return null;
    throw new ConfigurationError(name, "must not be null");
  }
  switch (kind.replace("?", "")) {
    case "bool":
      if (typeof value !== "boolean") throw new ConfigurationError(name, `expected true or false, got ${show(value)}`);
      return value;
    case "int":
      if (typeof value !== "number" || !Number.isInteger(value)) {
        throw new ConfigurationError(name, `expected a whole number, got ${show(value)}`);
      }
      return value;
    case "float":
      if (typeof value !== "number") throw new ConfigurationError(name, `expected a number, got ${show(value)}`);
      if (!Number.isFinite(value)) throw new ConfigurationError(name, `expected a finite number, got ${show(value)}`);
      return value;
    case "str":
      if (typeof value !== "string") throw new ConfigurationError(name, `expected text, got ${show(value)}`);
      return value;
    case "labels": {
      if (!Array.isArray(value)) throw new ConfigurationError(name, `expected a list of strings, got ${show(value)}`);
      if (!value.every((v) => typeof v === "string" && v.trim() !== "")) {
        throw new ConfigurationError(name, `expected non-empty strings, got ${show(value)}`);
      }
      return Object.freeze([...(value as string[])]);
    }
    case "floats": {
      if (!Array.isArray(value) && !(value instanceof Float64Array) && !(value instanceof Float32Array)) {
        throw new ConfigurationError(name, `expected numbers, got ${show(value)}`);
      }
      return Object.freeze(Array.from(value as ArrayLike<unknown>, (v) => coerce(name, "float", v) as number));
    }
    default:
      throw new ConfigurationError(name, `unsupported value ${show(value)}`);
  }
}

const IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;
const TEXT_SEARCH_CONFIG = /^[a-z_][a-z0-9_]*$/;
const COLLECTION_PREFIX = /^[A-Za-z0-9_-]{1,64}$/;
const SYSTEM_SCHEMA = /^(pg_[\s\S]*|information_schema)$/;

/** Why `schema` cannot hold the actrone tables, or `null` if it can (Python's `schema_problem`). */
export function schemaProblem(schema: unknown): string | null {
  if (typeof schema !== "string" || !IDENTIFIER.test(schema)) {
    return (
      `${show(schema)} is not a plain identifier (lower-case letters, digits and underscores, ` +
      "starting with a letter or underscore, at most 63 characters)"
    );
  }
  if (SYSTEM_SCHEMA.test(schema)) {
    return (
      `${show(schema)} is a PostgreSQL system schema (pg_* and information_schema are the ` +
      "server's own); choose a schema of your own, such as the default 'actrone'"
    );
  }
  return null;
}

const DSN_EXAMPLES =
  "a URI such as postgresql://user:password@localhost:5432/dbname or key=value pairs such as " +
  "'host=localhost port=5432 dbname=actrone user=actrone'; leave it unset for the embedded server";

/**
 * Settings of a {@link MemoryManager} and its store. Immutable; {@link MemoryConfig.replace}
 * makes a changed copy.
 */
export class MemoryConfig implements MemoryConfigFields {
  readonly backend!: string;
  readonly postgresDsn!: string | null;
  readonly postgresSchema!: string;
  readonly postgresDistribute!: string;
  /** Row-level security per agent (Python only for now: the TypeScript store refuses it). */
  readonly postgresRowSecurity!: boolean;
  readonly postgresAutoMigrate!: boolean;
  readonly postgresDataDir!: string;
  readonly postgresPoolMinSize!: number;
  readonly postgresPoolMaxSize!: number;
  readonly postgresConnectTimeout!: number;
  readonly postgresStatementTimeout!: number;
  readonly postgresTextSearchConfig!: string;
  readonly postgresAnnMinMemories!: number;
  readonly postgresAnnEfSearch!: number;
  readonly redisUrl!: string;
  readonly qdrantUrl!: string;
  readonly qdrantApiKey!: string | null;
  readonly qdrantCollectionPrefix!: string;
  readonly redisTimeout!: number;
  readonly qdrantTimeout!: number;
  readonly redisPoolSize!: number;
  readonly redisSessionGraceHours!: number;
  readonly embeddingProvider!: string;
  readonly embeddingModel!: string | null;
  readonly embeddingApiUrl!: string | null;
  readonly embeddingApiKey!: string | null;
  readonly embeddingDimensions!: number | null;
  readonly embeddingBatchSize!: number;
  readonly embeddingThreads!: number;
  readonly queryCacheSize!: number;
  readonly maxSessionTurns!: number;
  readonly sessionTtlHours!: number;
  readonly relevanceThreshold!: number | null;
  readonly maxEpisodicMemories!: number;
  readonly hybridRetrieval!: boolean;
  readonly rrfK!: number;
  readonly rrfWeights!: readonly number[];
  readonly textAnalyzer!: string;
  readonly lexicalDates!: boolean | null;
  readonly bm25K1!: number;
  readonly bm25B!: number;
  readonly dropQuestionWords!: boolean;
  readonly neighbourWeight!: number;
  readonly relevanceWeight!: number;
  readonly recencyWeight!: number;
  readonly rerankEnabled!: boolean;
  readonly rerankTopK!: number;
  readonly rerankModel!: string;
  readonly consolidator!: string;
  readonly consolidateAfterTurns!: number;
  readonly consolidateCooldownSeconds!: number;
  readonly consolidatorApiUrl!: string | null;
  readonly consolidatorModel!: string | null;
  readonly consolidatorApiKey!: string | null;
  readonly consolidatorTimeout!: number;
  readonly consolidatorRetries!: number;
  readonly budgetFractionSession!: number;
  readonly budgetFractionEpisodic!: number;
  readonly redactSensitivities!: readonly string[];
  readonly maxTextChars!: number;
  readonly otelEnabled!: boolean;
  readonly otelRecordContent!: boolean;

  /** Build a config: `options` on top of `ACTRONE_*` variables of `process.env`, on top of defaults. */
  constructor(options: MemoryConfigOptions = {}, env: Readonly<Record<string, string | undefined>> = process.env) {
    if (options === null || typeof options !== "object") {
      throw new ConfigurationError("config", `expected an object of settings, got ${show(options)}`);
    }
    const given = options as Record<string, unknown>;
    const unknown = Object.keys(given)
      .filter((k) => !(k in FIELDS) && given[k] !== undefined)
      .sort();
    if (unknown.length > 0) {
      throw new ConfigurationError(unknown[0]!, `unknown setting; valid ones are ${[...FIELD_NAMES].sort().join(", ")}`);
    }
    warnUnknownEnv(env);
    const self = this as unknown as Record<string, unknown>;
    for (const name of FIELD_NAMES) {
      const [kind, byDefault] = FIELDS[name];
      const variable = envName(name);
      if (given[name] !== undefined) {
        self[name] = coerce(name, kind, given[name]);
      } else if (env[variable] !== undefined) {
        self[name] = coerce(name, kind, parseEnv(name, kind, env[variable]!));
      } else {
        self[name] = byDefault();
      }
    }
    validate(this);
    Object.freeze(this);
  }

  /** A config from `env` (default `process.env`) with `overrides` on top. */
  static fromEnv(env: Readonly<Record<string, string | undefined>> = process.env, overrides: MemoryConfigOptions = {}): MemoryConfig {
    return new MemoryConfig(overrides, env);
  }

  /** `sessionTtlHours` in seconds, as the stores take it. */
  get sessionTtlSeconds(): number {
    return this.sessionTtlHours * 3600.0;
  }

  /** A copy with `changes` applied (checked again; the environment is not read again). */
  replace(changes: MemoryConfigOptions): MemoryConfig {
    return new MemoryConfig({ ...this.toFields(), ...changes }, {});
  }

  /** Every field as a plain object (secrets included: use {@link MemoryConfig.toJSON} to show one). */
  toFields(): MemoryConfigFields {
    const out: Record<string, unknown> = {};
    for (const name of FIELD_NAMES) out[name] = (this as unknown as Record<string, unknown>)[name];
    return out as unknown as MemoryConfigFields;
  }

  /** The fields with API keys masked and passwords removed from URLs, for logs. */
  toJSON(): Record<string, unknown> {
    const out: Record<string, unknown> = { ...this.toFields() };
    for (const key of ["qdrantApiKey", "embeddingApiKey", "consolidatorApiKey"]) {
      if (out[key]) out[key] = "***";
    }
    for (const key of ["postgresDsn", "redisUrl", "qdrantUrl", "embeddingApiUrl", "consolidatorApiUrl"]) {
      if (typeof out[key] === "string") out[key] = redact(out[key] as string);
    }
    return out;
  }
}

/** A connection string or URL with its password replaced by `***`. */
export function redact(text: string): string {
  return text
    .replace(/(\/\/[^:/@\s]*:)[^@/\s]*@/g, "$1***@")
    .replace(/(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)/gi, "$1***");
}

function warnUnknownEnv(env: Readonly<Record<string, string | undefined>>): void {
  for (const variable of Object.keys(env)) {
    if (
      !variable.startsWith("ACTRONE_") ||
      ENV_NAMES.has(variable) ||
      warnedEnv.has(variable) ||
      NOT_SETTINGS.has(variable) ||
      NOT_SETTINGS_PREFIXES.some((p) => variable.startsWith(p))
    ) {
      continue;
    }
    warnedEnv.add(variable);
    process.emitWarning(`${variable} is not a setting of actrone-pg and is ignored`, { code: "ACTRONE_UNKNOWN_SETTING" });
  }
}

function validate(cfg: MemoryConfig): void {
  const fail = (field: string, message: string): never => {
    throw new ConfigurationError(field, message);
  };
  const oneOf = (field: keyof MemoryConfigFields, what: string, values: readonly string[]): void => {
    const value = cfg[field] as string;
    if (!values.includes(value)) fail(field, `unknown ${what} ${show(value)}; choose one of ${values.join(", ")}`);
  };
  oneOf("backend", "backend", BACKENDS);
  oneOf("embeddingProvider", "provider", EMBEDDING_PROVIDERS);
  const problem = schemaProblem(cfg.postgresSchema);
  if (problem !== null) fail("postgresSchema", problem);
  oneOf("postgresDistribute", "mode", DISTRIBUTE_MODES);
  if (!TEXT_SEARCH_CONFIG.test(cfg.postgresTextSearchConfig)) {
    fail("postgresTextSearchConfig", `${show(cfg.postgresTextSearchConfig)} is not a plain identifier`);
  }
  if (!COLLECTION_PREFIX.test(cfg.qdrantCollectionPrefix)) {
    fail("qdrantCollectionPrefix", "use letters, digits, '_' or '-' (at most 64)");
  }
  if (cfg.postgresDsn !== null) validateDsn(cfg.postgresDsn);
  for (const name of [
    "maxSessionTurns",
    "maxEpisodicMemories",
    "rrfK",
    "rerankTopK",
    "postgresPoolMinSize",
    "postgresPoolMaxSize",
    "embeddingBatchSize",
    "queryCacheSize",
    "maxTextChars",
    "redisPoolSize",
  ] as const) {
    if (cfg[name] < 1) fail(name, `must be at least 1, got ${cfg[name]}`);
  }
  if (cfg.embeddingThreads < 0) fail("embeddingThreads", "must be 0 (let onnxruntime decide) or a positive count");
  if (cfg.embeddingDimensions !== null && cfg.embeddingDimensions < 1) fail("embeddingDimensions", "must be at least 1");
  if (cfg.postgresPoolMaxSize < cfg.postgresPoolMinSize) fail("postgresPoolMaxSize", "must be at least postgresPoolMinSize");
  oneOf("consolidator", "consolidator", CONSOLIDATORS);
  if (cfg.consolidator === "llm") {
    for (const name of ["consolidatorApiUrl", "consolidatorModel"] as const) {
      if (!(cfg[name] ?? "").trim()) fail(name, "is required with consolidator='llm' (an OpenAI-compatible server)");
    }
  }
  if (!(cfg.neighbourWeight >= 0 && cfg.neighbourWeight <= 1)) {
    fail("neighbourWeight", `must be between 0 (off) and 1, got ${cfg.neighbourWeight}`);
  }
  if (cfg.consolidateAfterTurns < 0) fail("consolidateAfterTurns", "must be 0 (never by itself) or a number of turns");
  if (cfg.consolidateCooldownSeconds < 0) fail("consolidateCooldownSeconds", "must be at least 0");
  if (!(cfg.redisSessionGraceHours >= 0)) {
    fail("redisSessionGraceHours", `must be 0 (none) or a number of hours, got ${cfg.redisSessionGraceHours}`);
  }
  if (cfg.consolidatorRetries < 1) fail("consolidatorRetries", `must be at least 1, got ${cfg.consolidatorRetries}`);
  if (cfg.postgresAnnMinMemories < 0) fail("postgresAnnMinMemories", "must be 0 (never) or a number of memories");
  if (!(cfg.postgresAnnEfSearch >= 1 && cfg.postgresAnnEfSearch <= 1000)) {
    fail("postgresAnnEfSearch", `must lie in [1, 1000], got ${cfg.postgresAnnEfSearch}`);
  }
  for (const name of [
    "sessionTtlHours",
    "postgresConnectTimeout",
    "postgresStatementTimeout",
    "redisTimeout",
    "qdrantTimeout",
    "consolidatorTimeout",
  ] as const) {
    if (cfg[name] <= 0) fail(name, `must be greater than 0, got ${cfg[name]}`);
  }
  if (cfg.relevanceThreshold !== null && !(cfg.relevanceThreshold > 0 && cfg.relevanceThreshold < 1)) {
    fail("relevanceThreshold", `must lie in (0, 1), got ${cfg.relevanceThreshold}`);
  }
  if (!(ANALYZERS as readonly string[]).includes(cfg.textAnalyzer)) {
    fail("textAnalyzer", `unknown analyzer ${show(cfg.textAnalyzer)}; choose ${ANALYZERS.join(" or ")}`);
  }
  if (!(cfg.bm25K1 > 0)) fail("bm25K1", `must be greater than 0, got ${cfg.bm25K1}`);
  if (!(cfg.bm25B >= 0 && cfg.bm25B <= 1)) fail("bm25B", `must lie in [0, 1], got ${cfg.bm25B}`);
  if (cfg.rrfWeights.length !== CHANNEL_NAMES.length) {
    fail("rrfWeights", `expected ${CHANNEL_NAMES.length} weights (${CHANNEL_NAMES.join(", ")}), got ${show(cfg.rrfWeights)}`);
  }
  if (cfg.rrfWeights.some((w) => w < 0) || !cfg.rrfWeights.some((w) => w > 0)) {
    fail("rrfWeights", `weights must be ≥ 0 with at least one > 0, got ${show(cfg.rrfWeights)}`);
  }
  for (const name of ["relevanceWeight", "recencyWeight"] as const) {
    if (!(cfg[name] >= 0 && cfg[name] <= 1)) fail(name, `must lie in [0, 1], got ${cfg[name]}`);
  }
  if (Math.abs(cfg.relevanceWeight + cfg.recencyWeight - 1.0) > 1e-9) {
    fail(
      "relevanceWeight",
      `relevanceWeight + recencyWeight must equal 1.0, got ${cfg.relevanceWeight} + ${cfg.recencyWeight}`,
    );
  }
  for (const name of ["budgetFractionSession", "budgetFractionEpisodic"] as const) {
    if (!(cfg[name] > 0 && cfg[name] < 1)) fail(name, `must lie in (0, 1), got ${cfg[name]}`);
  }
  if (cfg.budgetFractionSession + cfg.budgetFractionEpisodic > 1.0 + 1e-9) {
    fail("budgetFractionEpisodic", "budgetFractionSession + budgetFractionEpisodic must be at most 1.0");
  }
  if (!cfg.rerankModel.trim()) fail("rerankModel", "must name a model id or directory");
}

function validateDsn(dsn: string): void {
  if (!dsn.trim()) throw new ConfigurationError("postgresDsn", `is empty; expected ${DSN_EXAMPLES}`);
  const words = dsn.trim().split(/\s+/);
  if (/^postgres(ql)?:\/\//.test(dsn) || (words.length > 0 && words.every((w) => w.includes("=")))) return;
  throw new ConfigurationError(
    "postgresDsn",
    `${show(redact(dsn))} is not a PostgreSQL connection string (neither a postgresql:// URI nor key=value pairs); expected ${DSN_EXAMPLES}`,
  );
}
