/**
 * Embeddings from any OpenAI-compatible `/v1/embeddings` server (OpenAI, vLLM, Ollama, TEI…)
 * over `fetch`, as Python's `OpenAIEmbedder`: the same endpoint rule, the same name
 * (`openai:<model>:<dimensions>`), the same retries of transient failures (connection errors,
 * timeouts, HTTP 408, 429, 500, 502, 503, 504, honouring `Retry-After`). It declares no
 * threshold: the default (0.7) applies until you calibrate one.
 */
import { ConfigurationError, EmbedderError } from "../errors.js";
import type { Embedder } from "./base.js";

/** OpenAI's API. */
export const DEFAULT_API_URL = "https://api.openai.com/v1";
/** The model used when `embeddingModel` is unset. */
export const DEFAULT_OPENAI_MODEL = "text-embedding-3-small";
/** Sizes of well-known models, so no request is needed to learn them. */
export const KNOWN_DIMENSIONS: ReadonlyMap<string, number> = new Map([
  ["text-embedding-3-small", 1536],
  ["text-embedding-3-large", 3072],
  ["text-embedding-ada-002", 1536],
]);
const TRANSIENT_STATUS = new Set([408, 429, 500, 502, 503, 504]);

/** The `/embeddings` endpoint of `base` (a server root, a `/v1` URL or the endpoint). */
export function embeddingsUrl(base: string): string {
  const url = base.replace(/\/+$/, "");
  if (url.endsWith("/embeddings")) return url;
  if (url.endsWith("/v1")) return url + "/embeddings";
  return url + "/v1/embeddings";
}

/** Options of {@link OpenAIEmbedder}. */
export interface OpenAIEmbedderOptions {
  model?: string;
  /** The vector size; required unless the model is in {@link KNOWN_DIMENSIONS} (or use `probe`). */
  dimensions?: number | null;
  apiUrl?: string;
  apiKey?: string | null;
  /** Send `dimensions` with each request (models that can shorten their vectors). */
  sendDimensions?: boolean;
  /** Seconds per request. */
  timeout?: number;
  maxRetries?: number;
  /** Seconds before the first retry, doubled each time. */
  backoff?: number;
  maxBatch?: number;
}

/** Client of an OpenAI-compatible embeddings endpoint. */
export class OpenAIEmbedder implements Embedder {
  readonly name: string;
  readonly model: string;
  readonly dimensions: number;
  readonly relevanceThreshold: number | null = null;
  readonly url: string;
  readonly #headers: Record<string, string>;
  readonly #sendDimensions: boolean;
  readonly #timeout: number;
  readonly #maxRetries: number;
  readonly #backoff: number;
  readonly #maxBatch: number;

  constructor({
    model = DEFAULT_OPENAI_MODEL,
    dimensions = null,
    apiUrl = DEFAULT_API_URL,
    apiKey = null,
    sendDimensions = false,
    timeout = 30,
    maxRetries = 3,
    backoff = 0.5,
    maxBatch = 256,
  }: OpenAIEmbedderOptions = {}) {
    if (!model.trim()) throw new ConfigurationError("embeddingModel", "must name the server's model");
    const dims = dimensions ?? KNOWN_DIMENSIONS.get(model) ?? null;
    if (dims === null) {
      throw new ConfigurationError(
        "embeddingDimensions",
        `the size of model ${JSON.stringify(model)} is not known here; set embeddingDimensions (ACTRONE_EMBEDDING_DIMENSIONS) to the vector length the server returns`,
      );
    }
    if (!Number.isInteger(dims) || dims < 1) throw new ConfigurationError("embeddingDimensions", `must be at least 1, got ${dims}`);
    if (!(timeout > 0) || !(maxRetries >= 0) || !(backoff >= 0) || !(maxBatch >= 1)) {
      throw new ConfigurationError("embedding", "timeout and maxBatch must be positive, retries and backoff ≥ 0");
    }
    this.model = model;
    this.dimensions = dims;
    this.url = embeddingsUrl(apiUrl);
    this.name = `openai:${model}:${dims}`;
    this.#headers = { "Content-Type": "application/json" };
    if (apiKey) this.#headers.Authorization = `Bearer ${apiKey}`;
    this.#sendDimensions = sendDimensions;
    this.#timeout = timeout;
    this.#maxRetries = maxRetries;
    this.#backoff = backoff;
    this.#maxBatch = maxBatch;
  }

  /** An embedder whose `dimensions` come from one request to the server. */
  static async probe(options: OpenAIEmbedderOptions = {}): Promise<OpenAIEmbedder> {
    const url = embeddingsUrl(options.apiUrl ?? DEFAULT_API_URL);
    const headers: Record<string, string> = { "Content-Type": "application/json" };
    if (options.apiKey) headers.Authorization = `Bearer ${options.apiKey}`;
    let response: Response;
    try {
      response = await fetch(url, {
        method: "POST",
        headers,
        body: JSON.stringify({ model: options.model ?? DEFAULT_OPENAI_MODEL, input: ["dimension probe"] }),
        signal: AbortSignal.timeout((options.timeout ?? 30) * 1000),
      });
    } catch (exc) {
      throw new EmbedderError(
        `cannot reach the embeddings server ${url} (${(exc as Error).message}); set embeddingDimensions to skip this start-up probe, or check embeddingApiUrl`,
        { cause: exc },
      );
    }
    const rows = await parse(response, url, 1);
    return new OpenAIEmbedder({ ...options, dimensions: rows[0]!.length });
  }

  /** Vectors of `texts`, `maxBatch` per request. */
  async embedBatch(texts: readonly string[]): Promise<number[][]> {
    const out: number[][] = [];
    for (let start = 0; start < texts.length; start += this.#maxBatch) {
      out.push(...(await this.#request(texts.slice(start, start + this.#maxBatch))));
    }
    return out;
  }

  async #request(texts: string[]): Promise<number[][]> {
    const payload: Record<string, unknown> = { model: this.model, input: texts };
    if (this.#sendDimensions) payload.dimensions = this.dimensions;
    for (let attempt = 0; ; attempt++) {
      let delay = this.#backoff * 2 ** attempt;
      let response: Response | null = null;
      try {
        response = await fetch(this.url, {
          method: "POST",
          headers: this.#headers,
          body: JSON.stringify(payload),
          signal: AbortSignal.timeout(this.#timeout * 1000),
        });
      } catch (exc) {
        if (attempt >= this.#maxRetries) {
          throw new EmbedderError(
            `embeddings server ${this.url} unreachable after ${attempt + 1} attempts (${(exc as Error).message}); check embeddingApiUrl and the server`,
            { cause: exc },
          );
        }
      }
      if (response !== null) {
        if (!TRANSIENT_STATUS.has(response.status)) {
          const rows = await parse(response, this.url, texts.length);
          if (rows.some((r) => !Array.isArray(r) || r.length !== this.dimensions)) {
            throw new EmbedderError(`${this.url} returned vectors of another size than ${this.dimensions} (is embeddingDimensions right?)`);
          }
          return rows;
        }
        if (attempt >= this.#maxRetries) {
          throw new EmbedderError(
            `embeddings server ${this.url} answered HTTP ${response.status} ${attempt + 1} times: ${await snippet(response)}; try again later`,
          );
        }
        const retryAfter = Number(response.headers.get("retry-after"));
        if (Number.isFinite(retryAfter) && retryAfter > 0) delay = Math.max(delay, Math.min(retryAfter, 30));
        await response.body?.cancel();
      }
      await new Promise((r) => setTimeout(r, delay * 1000));
    }
  }
}

async function snippet(response: Response): Promise<string> {
  const text = await response.text().catch(() => "");
  try {
    const body = JSON.parse(text) as { error?: { message?: unknown } };
    if (typeof body.error?.message === "string") return body.error.message.slice(0, 300);
  } catch {
    // not JSON: the text itself
  }
  return text.slice(0, 300);
}

async function parse(response: Response, url: string, count: number): Promise<number[][]> {
  const status = response.status;
  if (status === 401 || status === 403) {
    throw new EmbedderError(
      `${url} refused the credentials (HTTP ${status}: ${await snippet(response)}); set embeddingApiKey (ACTRONE_EMBEDDING_API_KEY) to a valid key`,
    );
  }
  if (status === 404) throw new EmbedderError(`${url} answered 404 (${await snippet(response)}); check embeddingApiUrl and embeddingModel`);
  if (status >= 400) throw new EmbedderError(`${url} answered HTTP ${status}: ${await snippet(response)}`);
  const text = await response.text();
  let rows: number[][];
  try {
    const body = JSON.parse(text) as { data: { index?: number; embedding: number[] }[] };
    rows = [...body.data].sort((a, b) => (a.index ?? 0) - (b.index ?? 0)).map((d) => d.embedding);
    if (!rows.every(Array.isArray)) throw new TypeError("embedding is not an array");
  } catch (exc) {
    throw new EmbedderError(`${url} did not answer like an OpenAI embeddings endpoint: ${text.slice(0, 200)}`, { cause: exc });
  }
  if (rows.length !== count) throw new EmbedderError(`${url} returned ${rows.length} vectors for ${count} texts`);
  return rows;
}
