/**
 * Sentence embeddings from an ONNX model through `onnxruntime-node` and a tokenizer that reads
 * `tokenizer.json` (`@huggingface/tokenizers`), both optional peer dependencies: the vectors of
 * Python's `OnnxEmbedder` on the same model directory (within 1e-5), and the same calibrated
 * threshold for the same model, recognised by what it computes.
 *
 * A model directory holds `model.onnx` (or `onnx/model.onnx`) and `tokenizer.json`. Texts are
 * sorted by length and encoded `batchSize` at a time, padded to the longest of each batch and
 * truncated at `maxLength` tokens (all-MiniLM-L6-v2: 256, as in Python; the padding to 128 that
 * its exported `tokenizer.json` declares is ignored, as Python ignores it).
 */
import { existsSync, readFileSync, statSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";

import { ConfigurationError, EmbedderError, MissingDependencyError, ModelNotAvailableError } from "../errors.js";
import { codePointLength } from "../text.js";
import type { Embedder } from "./base.js";

/** all-MiniLM-L6-v2's calibrated threshold (Python's `MINILM_THRESHOLD`). */
export const MINILM_THRESHOLD = 0.267;
/** bge-small-en-v1.5's threshold (Python's `BGE_SMALL_THRESHOLD`; an estimate, not measured). */
export const BGE_SMALL_THRESHOLD = 0.65;

/** What is known about a built-in model. */
export interface Preset {
  readonly modelId: string;
  readonly pooling: "mean" | "cls";
  readonly maxLength: number;
  readonly dimensions: number;
  readonly relevanceThreshold: number;
  readonly aliases: readonly string[];
}

/** The built-in models, by hub id. */
export const PRESETS: ReadonlyMap<string, Preset> = new Map(
  (
    [
      ["sentence-transformers/all-MiniLM-L6-v2", "mean", 256, 384, MINILM_THRESHOLD, ["minilm", "all-minilm-l6-v2"]],
      ["BAAI/bge-small-en-v1.5", "cls", 512, 384, BGE_SMALL_THRESHOLD, ["bge-small", "bge-small-en-v1.5"]],
    ] as const
  ).map(([modelId, pooling, maxLength, dimensions, relevanceThreshold, aliases]) => [
    modelId,
    { modelId, pooling, maxLength, dimensions, relevanceThreshold, aliases },
  ]),
);

/** The model the "onnx" and "local" providers use when `embeddingModel` is unset. */
export const DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2";

/** The probe sentences whose cosines identify a model (Python's `_fingerprint.PROBES`). */
export const PROBES: readonly string[] = [
  "The user is allergic to peanuts.",
  "food allergies",
  "The quarterly report is due on Friday.",
  "A cat sleeps on the windowsill.",
  "Wie spät ist es?",
  "42",
];
/** Largest difference of any probe cosine from the record that is still the same model. */
export const FINGERPRINT_TOLERANCE = 0.01;
/** Model id -> cosines of the probe pairs (0,1), (0,2), … (4,5), to 4 decimals. */
export const FINGERPRINTS: ReadonlyMap<string, readonly number[]> = new Map([
  [
    "sentence-transformers/all-MiniLM-L6-v2",
    [0.5247, 0.0032, -0.0249, 0.0718, 0.0811, 0.0297, -0.0043, 0.097, 0.0633, -0.0345, -0.0154, -0.0638, -0.033, 0.064, 0.1214],
  ],
]);

/** The cosines between every pair of `vectors`, rounded to 4 decimals. */
export function fingerprint(vectors: readonly ArrayLike<number>[]): number[] {
  const unit = vectors.map((v) => {
    let s = 0;
    for (let i = 0; i < v.length; i++) s += v[i]! * v[i]!;
    const n = Math.max(Math.sqrt(s), 1e-12);
    return Array.from(v, (x) => x / n);
  });
  const out: number[] = [];
  for (let i = 0; i < unit.length; i++) {
    for (let j = i + 1; j < unit.length; j++) {
      let dot = 0;
      for (let d = 0; d < unit[i]!.length; d++) dot += unit[i]![d]! * unit[j]![d]!;
      out.push(Math.round(dot * 1e4) / 1e4);
    }
  }
  return out;
}

/** The id of the built-in model whose recorded fingerprint `vectors` match, else null. */
export function recognise(vectors: readonly ArrayLike<number>[]): string | null {
  const got = fingerprint(vectors);
  if (!got.every(Number.isFinite)) return null;
  for (const [modelId, recorded] of FINGERPRINTS) {
    if (recorded.length === got.length && got.every((g, i) => Math.abs(g - recorded[i]!) <= FINGERPRINT_TOLERANCE + 1e-12)) return modelId;
  }
  return null;
}

/** The hub id of `model`: a preset alias ("minilm", "bge-small") or the id itself. */
export function resolveModelId(model: string): string {
  const low = model.trim().toLowerCase();
  for (const p of PRESETS.values()) if (low === p.modelId.toLowerCase() || p.aliases.includes(low)) return p.modelId;
  return model.trim();
}

function presetFor(modelId: string): Preset | null {
  const low = modelId.toLowerCase();
  for (const p of PRESETS.values()) {
    if (low === p.modelId.toLowerCase() || p.aliases.includes(low)) return p;
    if (low === p.modelId.split("/").pop()!.toLowerCase()) return p;
  }
  return null;
}

type JsonRecord = Record<string, unknown>;

function readJson(path: string): JsonRecord {
  try {
    const data = JSON.parse(readFileSync(path, "utf8")) as unknown;
    return data !== null && typeof data === "object" && !Array.isArray(data) ? (data as JsonRecord) : {};
  } catch {
    return {};
  }
}

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/** The model directory's ONNX file, or null. */
export function findOnnx(directory: string): string | null {
  for (const name of ["model.onnx", join("onnx", "model.onnx")]) if (isFile(join(directory, name))) return join(directory, name);
  return null;
}

function idFromPath(directory: string): string {
  // A hub snapshot: .../models--org--name/snapshots/<revision>
  const parent = dirname(directory);
  const grand = basename(dirname(parent));
  if (basename(parent) === "snapshots" && grand.startsWith("models--")) return grand.slice("models--".length).split("--").join("/");
  return basename(directory);
}

function poolingFromSt(directory: string): "mean" | "cls" | null {
  const cfg = readJson(join(directory, "1_Pooling", "config.json"));
  if (cfg.pooling_mode_cls_token) return "cls";
  if (cfg.pooling_mode_mean_tokens) return "mean";
  return null;
}

function positiveInt(value: unknown): number | null {
  return typeof value === "number" && Number.isInteger(value) && value > 0 ? value : null;
}

/** The longest input in tokens: the model's own files, then the preset's, then 512 (Python's rule). */
function maxLengthOf(directory: string, meta: JsonRecord, preset: Preset | null): number {
  const positions = positiveInt(readJson(join(directory, "config.json")).max_position_embeddings);
  let length = positiveInt(meta.max_length) ?? positiveInt(readJson(join(directory, "sentence_bert_config.json")).max_seq_length);
  if (length === null && preset !== null) length = preset.maxLength;
  if (length === null) {
    const tokMax = positiveInt(readJson(join(directory, "tokenizer_config.json")).model_max_length);
    if (tokMax !== null && tokMax < 100_000) length = tokMax;
  }
  if (length === null) length = positions ?? 512;
  return positions !== null ? Math.min(length, positions) : length;
}

interface OrtTensor {
  readonly data: unknown;
  readonly dims: readonly number[];
}
interface OrtSession {
  readonly inputNames: readonly string[];
  readonly outputNames: readonly string[];
  run(feeds: Record<string, OrtTensor>): Promise<Record<string, OrtTensor>>;
  release?(): Promise<void>;
}
interface OrtModule {
  Tensor: new (type: "int64", data: BigInt64Array, dims: readonly number[]) => OrtTensor;
  InferenceSession: {
    create(path: string, options: Record<string, unknown>): Promise<OrtSession>;
  };
}
interface HfTokenizer {
  encode(text: string, options?: { add_special_tokens?: boolean }): { ids: number[] };
  token_to_id(token: string): number | undefined;
}
interface TokenizersModule {
  Tokenizer: new (tokenizer: object, config: object) => HfTokenizer;
}

async function importRuntime(): Promise<[OrtModule, TokenizersModule]> {
  let ort: OrtModule;
  let tokenizers: TokenizersModule;
  try {
    ort = (await import("onnxruntime-node")) as unknown as OrtModule;
  } catch (exc) {
    throw new MissingDependencyError("onnxruntime-node", { cause: exc });
  }
  try {
    tokenizers = (await import("@huggingface/tokenizers")) as unknown as TokenizersModule;
  } catch (exc) {
    throw new MissingDependencyError("@huggingface/tokenizers", { cause: exc });
  }
  return [ort, tokenizers];
}

/** Options of {@link OnnxEmbedder.fromDirectory}. */
export interface OnnxOptions {
  /** "mean" or "cls"; by default what the directory says, then the preset's, then "mean". */
  pooling?: "mean" | "cls";
  /** Names the embedder; by default the hub id a snapshot path encodes, else the directory's name. */
  modelId?: string;
  /** Longest input in tokens; by default what the directory says, then the preset's. */
  maxLength?: number;
  batchSize?: number;
  /** onnxruntime's intra-op threads (0: its choice). */
  threads?: number;
  /** Override the threshold; by default the calibrated one of a recognised model, else null. */
  relevanceThreshold?: number | null;
  name?: string;
}

/** An ONNX sentence encoder: tokenise, run, pool (mean or CLS), L2-normalise. */
export class OnnxEmbedder implements Embedder {
  readonly name: string;
  readonly modelId: string;
  readonly pooling: "mean" | "cls";
  readonly modelPath: string;
  readonly batchSize: number;
  maxLength: number;
  dimensions = 0;
  relevanceThreshold: number | null = null;
  /** The built-in model this one is (a preset id), and how it was known ("vectors" or "model id"). */
  recognisedAs: string | null = null;
  recognisedBy: "vectors" | "model id" | null = null;
  readonly #ort: OrtModule;
  readonly #session: OrtSession;
  readonly #tokenizer: HfTokenizer;
  readonly #prefix: number[];
  readonly #suffix: number[];
  readonly #padId: number;
  readonly #output: string;
  readonly #lowercases: boolean;

  private constructor(
    ort: OrtModule,
    session: OrtSession,
    tokenizer: HfTokenizer,
    lowercases: boolean,
    modelPath: string,
    { modelId, pooling, maxLength, batchSize, name }: { modelId: string; pooling: "mean" | "cls"; maxLength: number; batchSize: number; name: string | undefined },
  ) {
    this.#ort = ort;
    this.#session = session;
    this.#tokenizer = tokenizer;
    this.#lowercases = lowercases;
    this.modelPath = modelPath;
    this.modelId = modelId;
    this.pooling = pooling;
    this.maxLength = maxLength;
    this.batchSize = batchSize;
    const preset = presetFor(modelId);
    this.name = name ?? `onnx:${preset ? preset.modelId : modelId}`;
    // The special tokens the post-processor adds around a text ([CLS] … [SEP]).
    const withSpecial = tokenizer.encode("a", { add_special_tokens: true }).ids;
    const plain = tokenizer.encode("a", { add_special_tokens: false }).ids;
    let at = 0;
    while (at + plain.length <= withSpecial.length && !plain.every((id, i) => withSpecial[at + i] === id)) at++;
    this.#prefix = withSpecial.slice(0, at);
    this.#suffix = withSpecial.slice(at + plain.length);
    this.#padId = tokenizer.token_to_id("[PAD]") ?? tokenizer.token_to_id("<pad>") ?? 0;
    const outputs = session.outputNames;
    this.#output = ["last_hidden_state", "token_embeddings", "sentence_embedding"].find((n) => outputs.includes(n)) ?? outputs[0]!;
  }

  /**
   * Load `path/model.onnx` (or `path/onnx/model.onnx`) and `path/tokenizer.json`. The calibrated
   * threshold comes from what the model computes: all-MiniLM-L6-v2 is recognised by its vectors
   * wherever its files lie; bge-small-en-v1.5 by its id.
   */
  static async fromDirectory(path: string, options: OnnxOptions = {}): Promise<OnnxEmbedder> {
    const directory = resolve(path.startsWith("~") ? join(process.env.HOME ?? "", path.slice(1)) : path);
    if (!existsSync(directory) || !statSync(directory).isDirectory()) {
      throw new ModelNotAvailableError(
        `model directory ${directory} does not exist; it must hold model.onnx (or onnx/model.onnx) and tokenizer.json`,
      );
    }
    const onnxFile = findOnnx(directory);
    const tokenizerFile = join(directory, "tokenizer.json");
    const missing = [onnxFile === null ? "model.onnx" : null, isFile(tokenizerFile) ? null : "tokenizer.json"].filter((x) => x !== null);
    if (missing.length > 0 || onnxFile === null) {
      throw new ModelNotAvailableError(
        `model directory ${directory} lacks ${missing.join(" and ")}; export the model to ONNX (model.onnx) and save its fast tokenizer (tokenizer.json) there`,
      );
    }
    const { batchSize = 32, threads = 0 } = options;
    if (!Number.isInteger(batchSize) || batchSize < 1) throw new ConfigurationError("batchSize", `must be at least 1, got ${batchSize}`);
    if (!Number.isInteger(threads) || threads < 0) throw new ConfigurationError("threads", `must be 0 (automatic) or more, got ${threads}`);
    const meta = readJson(join(directory, "actrone_model.json"));
    const modelId = options.modelId ?? (typeof meta.model_id === "string" && meta.model_id ? meta.model_id : idFromPath(directory));
    const preset = presetFor(modelId);
    let pooling = options.pooling ?? (meta.pooling === "mean" || meta.pooling === "cls" ? meta.pooling : null) ?? poolingFromSt(directory);
    pooling ??= preset?.pooling ?? "mean";
    if (pooling !== "mean" && pooling !== "cls") throw new ConfigurationError("pooling", `must be "mean" or "cls", got ${JSON.stringify(pooling)}`);
    const declared = positiveInt(meta.max_length) ?? positiveInt(readJson(join(directory, "sentence_bert_config.json")).max_seq_length);
    const guessLength = options.maxLength === undefined && preset === null && declared === null;
    const maxLength = options.maxLength ?? maxLengthOf(directory, meta, preset);
    if (!Number.isInteger(maxLength) || maxLength < 2) throw new ConfigurationError("maxLength", `must be at least 2, got ${maxLength}`);

    const [ort, tokenizers] = await importRuntime();
    let tokenizer: HfTokenizer;
    let lowercases = false;
    try {
      const json = JSON.parse(readFileSync(tokenizerFile, "utf8")) as JsonRecord;
      // The file's own padding and truncation are off: the embedder sets its own (Python does too).
      json.padding = null;
      json.truncation = null;
      lowercases = normalizerLowercases(json.normalizer);
      tokenizer = new tokenizers.Tokenizer(json, readJson(join(directory, "tokenizer_config.json")));
    } catch (exc) {
      throw new ModelNotAvailableError(`cannot load the tokenizer ${tokenizerFile}: ${(exc as Error).message}`, { cause: exc });
    }
    let session: OrtSession;
    try {
      const sessionOptions: Record<string, unknown> = { executionProviders: ["cpu"], interOpNumThreads: 1, graphOptimizationLevel: "all" };
      if (threads) sessionOptions.intraOpNumThreads = threads;
      session = await ort.InferenceSession.create(onnxFile, sessionOptions);
    } catch (exc) {
      throw new ModelNotAvailableError(`cannot load the ONNX model ${onnxFile}: ${(exc as Error).message}`, { cause: exc });
    }
    const inputs = session.inputNames;
    if (!inputs.includes("input_ids") || !inputs.every((i) => ["input_ids", "attention_mask", "token_type_ids"].includes(i))) {
      throw new ModelNotAvailableError(
        `the ONNX model ${onnxFile} has inputs ${JSON.stringify(inputs)}; expected input_ids and optionally attention_mask and token_type_ids`,
      );
    }
    const embedder = new OnnxEmbedder(ort, session, tokenizer, lowercases, onnxFile, {
      modelId,
      pooling,
      maxLength,
      batchSize,
      name: options.name,
    });
    embedder.dimensions = (await embedder.#embed(["dimension probe"]))[0]!.length;
    if (preset !== null && preset.dimensions !== embedder.dimensions) {
      throw new ModelNotAvailableError(
        `${onnxFile} claims to be ${preset.modelId} but gives ${embedder.dimensions} dimensions, not ${preset.dimensions}`,
      );
    }
    if ([...FINGERPRINTS.keys()].some((m) => PRESETS.get(m)?.dimensions === embedder.dimensions)) {
      const found = recognise(await embedder.#embed([...PROBES]));
      if (found !== null) [embedder.recognisedAs, embedder.recognisedBy] = [found, "vectors"];
    }
    if (embedder.recognisedAs === null && preset !== null && !FINGERPRINTS.has(preset.modelId)) {
      [embedder.recognisedAs, embedder.recognisedBy] = [preset.modelId, "model id"];
    }
    if (options.relevanceThreshold !== undefined) embedder.relevanceThreshold = options.relevanceThreshold;
    else embedder.relevanceThreshold = PRESETS.get(embedder.recognisedAs ?? "")?.relevanceThreshold ?? null;
    if (guessLength && embedder.recognisedBy === "vectors" && embedder.recognisedAs !== null) {
      // Nothing in the directory says how long a text may be, but the model is known.
      embedder.maxLength = PRESETS.get(embedder.recognisedAs)!.maxLength;
    }
    return embedder;
  }

  /** Vectors of `texts`, unit length, in the order given. */
  async embedBatch(texts: readonly string[]): Promise<Float32Array[]> {
    return this.#embed([...texts]);
  }

  async close(): Promise<void> {
    await this.#session.release?.();
  }

  async #embed(texts: string[]): Promise<Float32Array[]> {
    // Sorted by length (Python's len: code points), so each batch pads little.
    const lengths = texts.map(codePointLength);
    const order = texts.map((_, i) => i).sort((i, j) => lengths[i]! - lengths[j]!);
    const out: Float32Array[] = new Array<Float32Array>(texts.length);
    for (let start = 0; start < order.length; start += this.batchSize) {
      const idx = order.slice(start, start + this.batchSize);
      const vectors = await this.#run(idx.map((i) => texts[i]!));
      idx.forEach((i, n) => (out[i] = vectors[n]!));
    }
    return out;
  }

  /** The token ids the model sees for `text`: special tokens added, truncated at `maxLength`. */
  tokenIds(text: string): number[] {
    return this.#encode(text);
  }

  #encode(text: string): number[] {
    // Rust's tokenizers lowercase one character at a time, so a word-final capital sigma
    // becomes σ there; JavaScript's toLowerCase makes it ς (Unicode's Final_Sigma rule), the
    // one context-dependent mapping it applies. Lowered here first, it is σ in both.
    const input = this.#lowercases ? text.replace(/Σ/g, "σ") : text;
    const body = this.#tokenizer.encode(input, { add_special_tokens: false }).ids;
    const room = this.maxLength - this.#prefix.length - this.#suffix.length;
    return [...this.#prefix, ...body.slice(0, Math.max(room, 0)), ...this.#suffix];
  }

  async #run(texts: string[]): Promise<Float32Array[]> {
    let encoded: number[][];
    try {
      encoded = texts.map((t) => this.#encode(t));
    } catch (exc) {
      throw new EmbedderError(`tokenizer failed: ${(exc as Error).message}`, { cause: exc });
    }
    const batch = encoded.length;
    const width = Math.max(...encoded.map((e) => e.length));
    const ids = new BigInt64Array(batch * width).fill(BigInt(this.#padId));
    const mask = new BigInt64Array(batch * width);
    encoded.forEach((e, b) =>
      e.forEach((id, t) => {
        ids[b * width + t] = BigInt(id);
        mask[b * width + t] = 1n;
      }),
    );
    const dims = [batch, width];
    const feeds: Record<string, OrtTensor> = { input_ids: new this.#ort.Tensor("int64", ids, dims) };
    if (this.#session.inputNames.includes("attention_mask")) feeds.attention_mask = new this.#ort.Tensor("int64", mask, dims);
    if (this.#session.inputNames.includes("token_type_ids")) feeds.token_type_ids = new this.#ort.Tensor("int64", new BigInt64Array(batch * width), dims);
    let result: OrtTensor;
    try {
      const outputs = await this.#session.run(feeds);
      result = outputs[this.#output]!;
    } catch (exc) {
      throw new EmbedderError(`${this.name}: inference failed: ${(exc as Error).message}`, { cause: exc });
    }
    const data = result.data as Float32Array;
    const vectors: Float32Array[] = [];
    if (result.dims.length === 2) {
      const size = result.dims[1]!;
      for (let b = 0; b < batch; b++) vectors.push(unit(Float64Array.from(data.subarray(b * size, (b + 1) * size))));
      return vectors;
    }
    const [, tokens, size] = result.dims as [number, number, number];
    for (let b = 0; b < batch; b++) {
      const pooled = new Float64Array(size);
      if (this.pooling === "cls") {
        for (let d = 0; d < size; d++) pooled[d] = data[b * tokens * size + d]!;
      } else {
        let count = 0;
        for (let t = 0; t < tokens; t++) {
          if (mask[b * width + t] === 0n) continue;
          count++;
          const base = (b * tokens + t) * size;
          for (let d = 0; d < size; d++) pooled[d] = pooled[d]! + data[base + d]!;
        }
        for (let d = 0; d < size; d++) pooled[d] = pooled[d]! / Math.max(count, 1e-9);
      }
      vectors.push(unit(pooled));
    }
    return vectors;
  }
}

// Whether a tokenizer.json normalizer lowercases (BERT's, or a Lowercase step of a sequence).
function normalizerLowercases(normalizer: unknown): boolean {
  if (normalizer === null || typeof normalizer !== "object") return false;
  const n = normalizer as { type?: unknown; lowercase?: unknown; normalizers?: unknown };
  if (n.type === "Lowercase" || (n.type === "BertNormalizer" && n.lowercase !== false)) return true;
  return Array.isArray(n.normalizers) && n.normalizers.some(normalizerLowercases);
}

function unit(v: Float64Array): Float32Array {
  let s = 0;
  for (const x of v) s += x * x;
  const n = Math.max(Math.sqrt(s), 1e-12);
  return Float32Array.from(v, (x) => x / n);
}
