/**
 * actrone-pg: memory for LLM agents. Recent turns (L1) and the long-term memories relevant to
 * a query (L2), ranked by hybrid retrieval and packed inside a token budget; the same API,
 * defaults, errors and ranking as the Python package of the same name.
 */
export { MemoryManager, createMemoryManager, type CreateOptions, type MemoryItem, type MemoryUpdate, type Reranker } from "./manager.js";
export {
  MemoryConfig,
  BACKENDS,
  EMBEDDING_PROVIDERS,
  DEFAULT_RRF_WEIGHTS,
  envName,
  type MemoryConfigFields,
  type MemoryConfigOptions,
} from "./config.js";
export {
  ActroneError,
  ConfigurationError,
  ConsolidationError,
  DimensionMismatchError,
  EmbedderError,
  LockLostError,
  MemoryNotFoundError,
  MissingDependencyError,
  ModelNotAvailableError,
  RerankerError,
  SchemaError,
  StoreError,
  StoreUnavailableError,
  ValidationError,
} from "./errors.js";
export type {
  Explain,
  JsonObject,
  JsonValue,
  Memory,
  MemoryFilters,
  MemoryPage,
  RetrievedContext,
  ScoredMemory,
  SessionInfo,
  Turn,
} from "./models.js";
export type { BuildVersion, MemoryRecord, PackedSearch, SearchRequest, Store } from "./store.js";
export { InMemoryStore, createStore, type InMemoryStoreOptions } from "./stores/index.js";
export {
  HashingEmbedder,
  OnnxEmbedder,
  OpenAIEmbedder,
  HASHING_THRESHOLD,
  MINILM_THRESHOLD,
  BGE_SMALL_THRESHOLD,
  createEmbedder,
  normalise,
  type Embedder,
  type OnnxOptions,
  type OpenAIEmbedderOptions,
} from "./embedders/index.js";
export { Analyzer, analyzer, tokenize, dateText, QUESTION_WORDS } from "./analyzer.js";
export { heuristicTokenCount, pythonJsonDumps, type TokenCounter } from "./text.js";
export { splitBudget, type Shares } from "./budget.js";
export { DEFAULT_RELEVANCE_THRESHOLD, BM25_B, BM25_K1, type RankingParams, type CorpusStats } from "./ranking.js";
export { parseFilters, jsonContains, FILTER_KEYS, type MemoryFilter } from "./filters.js";
export { modelsDir, userCacheDir, userDataDir } from "./paths.js";
