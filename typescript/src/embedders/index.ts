/**
 * The built-in embedders and the factory that picks one from a config (Python's
 * `create_embedder`): "hashing"; "onnx" (a model directory found as Python finds it); "local"
 * (an ONNX model if one is installed, else the hashing embedder, saying so once); "openai".
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

import type { MemoryConfig } from "../config.js";
import { MissingDependencyError, ModelNotAvailableError } from "../errors.js";
import { modelsDir } from "../paths.js";
import type { Embedder } from "./base.js";
import { HashingEmbedder } from "./hashing.js";
import { DEFAULT_MODEL, findOnnx, OnnxEmbedder, resolveModelId } from "./onnx.js";
import { DEFAULT_API_URL, DEFAULT_OPENAI_MODEL, KNOWN_DIMENSIONS, OpenAIEmbedder } from "./openai.js";

let fallbackNoticed = false;

function hubCache(): string {
  const explicit = (process.env.HF_HUB_CACHE ?? "").trim();
  if (explicit) return explicit;
  const home = (process.env.HF_HOME ?? "").trim();
  if (home) return join(home, "hub");
  const xdg = (process.env.XDG_CACHE_HOME ?? "").trim();
  return join(xdg || join(homedir(), ".cache"), "huggingface", "hub");
}

/** The hub cache's snapshot of `modelId` holding an ONNX file and tokenizer.json, or null. */
function hubSnapshot(modelId: string): string | null {
  const repo = join(hubCache(), `models--${modelId.split("/").join("--")}`);
  const candidates: string[] = [];
  try {
    candidates.push(join(repo, "snapshots", readFileSync(join(repo, "refs", "main"), "utf8").trim()));
  } catch {
    // no refs/main: any snapshot
  }
  try {
    candidates.push(...readdirSync(join(repo, "snapshots")).map((s) => join(repo, "snapshots", s)));
  } catch {
    return null;
  }
  return candidates.find((c) => findOnnx(c) !== null && existsSync(join(c, "tokenizer.json"))) ?? null;
}

function looksLikePath(model: string): boolean {
  return model.startsWith("/") || model.startsWith(".") || model.startsWith("~") || /^[A-Za-z]:[\\/]/.test(model) || existsSync(model);
}

/** The model directory `config` names, as Python looks for it (without downloading), or null. */
export function findModelDirectory(config: MemoryConfig): { directory: string; modelId: string | null } | null {
  const model = (config.embeddingModel ?? "").trim();
  if (model && looksLikePath(model)) return { directory: model, modelId: null };
  const candidates = model ? [resolveModelId(model)] : [DEFAULT_MODEL, "BAAI/bge-small-en-v1.5"];
  for (const modelId of candidates) {
    for (const local of [join(modelsDir(), modelId.split("/").pop()!), join(modelsDir(), modelId)]) {
      if (findOnnx(local) !== null && existsSync(join(local, "tokenizer.json"))) return { directory: local, modelId };
    }
    const snapshot = hubSnapshot(modelId);
    if (snapshot !== null) return { directory: snapshot, modelId };
  }
  return null;
}

async function onnxFromConfig(config: MemoryConfig): Promise<OnnxEmbedder> {
  const found = findModelDirectory(config);
  if (found === null) {
    throw new ModelNotAvailableError(
      `no local ONNX model in ${modelsDir()} nor in the hub cache; put a directory holding model.onnx ` +
        `and tokenizer.json there (or set ACTRONE_EMBEDDING_MODEL=/that/directory)`,
    );
  }
  const embedder = await OnnxEmbedder.fromDirectory(found.directory, {
    ...(found.modelId !== null ? { modelId: found.modelId } : {}),
    batchSize: config.embeddingBatchSize,
    threads: config.embeddingThreads,
  });
  if (config.embeddingDimensions !== null && config.embeddingDimensions !== embedder.dimensions) {
    const { ConfigurationError } = await import("../errors.js");
    throw new ConfigurationError(
      "embeddingDimensions",
      `${embedder.name} gives ${embedder.dimensions} dimensions, not ${config.embeddingDimensions}; unset embeddingDimensions or pick another model`,
    );
  }
  return embedder;
}

/** The embedder `config.embeddingProvider` names. */
export async function createEmbedder(config: MemoryConfig): Promise<Embedder> {
  switch (config.embeddingProvider) {
    case "hashing":
      return new HashingEmbedder();
    case "onnx":
      return onnxFromConfig(config);
    case "openai": {
      const model = config.embeddingModel ?? DEFAULT_OPENAI_MODEL;
      const options = {
        model,
        apiUrl: config.embeddingApiUrl ?? DEFAULT_API_URL,
        apiKey: config.embeddingApiKey ?? process.env.OPENAI_API_KEY ?? null,
        sendDimensions: config.embeddingDimensions !== null,
      };
      if (config.embeddingDimensions === null && !KNOWN_DIMENSIONS.has(model)) return OpenAIEmbedder.probe(options);
      return new OpenAIEmbedder({ ...options, dimensions: config.embeddingDimensions });
    }
    default:
      try {
        return await onnxFromConfig(config);
      } catch (exc) {
        if (!(exc instanceof MissingDependencyError || exc instanceof ModelNotAvailableError)) throw exc;
        if (!fallbackNoticed) {
          fallbackNoticed = true;
          process.emitWarning(
            `no local ONNX embedding model available (${exc.message}); using the keyword-only hashing embedder. ` +
              "Install onnxruntime-node and @huggingface/tokenizers and a model for semantic recall.",
            { code: "ACTRONE_HASHING_FALLBACK" },
          );
        }
        return new HashingEmbedder();
      }
  }
}

export { asVectors, normalise, type Embedder } from "./base.js";
export { HASHING_THRESHOLD, HashingEmbedder } from "./hashing.js";
export { MINILM_THRESHOLD, BGE_SMALL_THRESHOLD, OnnxEmbedder, PRESETS, type OnnxOptions } from "./onnx.js";
export { OpenAIEmbedder, embeddingsUrl, type OpenAIEmbedderOptions } from "./openai.js";
