// Types of the Weft browser API (weft.js).

export type Backend = "webgpu" | "cpu" | "auto";

export interface CreateOptions {
  backend?: Backend;
  /** Context length in tokens (default 2048, capped by the model). */
  contextSize?: number;
  /** WebGPU: use subgroup operations where offered (default true; same results either way). */
  subgroups?: boolean;
  /** WebGPU: native f16 reads where `shader-f16` is offered (default true; same results). */
  shaderF16?: boolean;
  /** Where weft-worker.js is (default: next to weft.js). */
  workerUrl?: string | URL;
  /** Where weft_wasm_bg.wasm is (default: next to weft_wasm.js). */
  wasmUrl?: string | URL;
}

export interface Progress {
  phase: "download" | "cache" | "read" | "upload" | "compile";
  loaded: number;
  total: number;
}

export interface LoadOptions {
  onProgress?: (p: Progress) => void;
  name?: string;
  /** Cache URL downloads in the origin private file system (default true). */
  cache?: boolean;
}

/**
 * An image for a vision model: a Blob/File or the bytes of a PNG, JPEG, WebP or GIF file
 * (decoded in wasm by the same decoder as natively: identical results), an ImageBitmap or
 * ImageData (encoded as PNG first), or an <img>/<canvas> (turned into an ImageBitmap).
 */
export type ImageInput = Blob | ImageBitmap | ImageData | ArrayBuffer | Uint8Array | HTMLImageElement | HTMLCanvasElement | OffscreenCanvas;

export interface GenerateOptions {
  maxTokens?: number;
  temperature?: number;
  topK?: number;
  topP?: number;
  minP?: number;
  repeatPenalty?: number;
  presencePenalty?: number;
  frequencyPenalty?: number;
  seed?: number;
  stop?: string[];
  ignoreEos?: boolean;
  /** complete(): parse special-token text in the prompt. */
  special?: boolean;
  /** chat(): extra chat-template variables. */
  templateVars?: Record<string, unknown>;
  /** Structured output: the reply is one JSON value of this JSON Schema; generation stops when it is complete. */
  jsonSchema?: Record<string, unknown>;
  /**
   * Images (after loadProjector()): chat() puts them with the last user message;
   * complete() where the prompt says `<__media__>`, in order, or all before the text.
   */
  images?: ImageInput[];
  /** Return each step's best N (at most 20) raw [id, logit] pairs in the result's `steps`. */
  topLogits?: number;
  signal?: AbortSignal;
}

export interface GenerationResult {
  text: string;
  tokens: number[];
  finishReason: "stop" | "length" | "abort";
  /** With options.topLogits: per sampled step, its token and the best raw [id, logit] pairs. */
  steps: { token: number; top: [number, number][] }[];
  /** promptTokens counts the positions images take (imageTokens of them). */
  usage: { promptTokens: number; cachedPromptTokens: number; completionTokens: number; imageTokens: number };
  timings: {
    promptMs: number;
    promptTokensPerS: number;
    decodeMs: number;
    decodeSteps: number;
    tokensPerS: number;
    totalMs: number;
  };
}

export interface Info {
  backend: "webgpu" | "cpu";
  adapter: null | {
    name: string;
    backend: string;
    deviceType: string;
    driver: string;
    maxStorageBufferBindingSize: number;
    maxBufferSize: number;
    maxStorageBuffersPerShaderStage: number;
    maxComputeInvocationsPerWorkgroup: number;
    /** The adapter offers `shader-f16`. */
    shaderF16: boolean;
    /** The adapter's subgroup sizes, when it offers subgroups. */
    subgroups: null | { min: number; max: number };
  };
  /** WebGPU features the kernels use (all false on the CPU backend); `packedDot`: WGSL's
   * `packed_4x8_integer_dot_product` built-ins (else the same integer work in core WGSL). */
  features: { subgroups: boolean; shaderF16: boolean; packedDot: boolean };
  model: null | {
    name: string;
    architecture: string;
    fileSize: number;
    /** "chat" (generates text; can also embed) or "embedding" (an encoder: embed() only). */
    kind: "chat" | "embedding";
    /** Hidden size (the length of its embedding vectors). */
    embedding: number;
    chatTemplate: boolean;
    /** Chat models. */
    vocab?: number;
    layers?: number;
    contextSize?: number;
    trainedContext?: number;
    /** Embedding models: the longest input in tokens, and whether vectors are normalised. */
    maxTokens?: number;
    normalize?: boolean;
    /** Chat models: the vision projector loadProjector() loaded, or null. */
    /** `backend`: where its image encoder runs (WebGPU for Gemma 3 on WebGPU, else the CPU). */
    projector?: null | { name: string; type: string; fileSize: number; backend: "webgpu" | "cpu" };
  };
  threads: number;
  simd128: boolean;
  /** After load(): where the bytes came from, and a notice (e.g. quota exceeded). */
  source?: "network" | "cache" | "file" | "memory";
  notice?: string | null;
}

export interface EmbedOptions {
  /** L2-normalise (default: as the model's config says). */
  normalize?: boolean;
  /** Keep the first N components, then normalise again (Matryoshka). */
  dimensions?: number;
  /** Cut inputs longer than the model takes (default true; false rejects them). */
  truncate?: boolean;
}

export interface EmbedResult {
  /** One vector per input text, in order. */
  embeddings: number[][];
  dim: number;
  /** Tokens embedded, special tokens included. */
  promptTokens: number;
}

export interface Message {
  role: "system" | "user" | "assistant" | string;
  content: string;
  /** Images that go before this message's text (needs loadProjector()). */
  images?: ImageInput[];
}

export class Generation implements AsyncIterable<string> {
  [Symbol.asyncIterator](): AsyncIterator<string>;
  /** Resolves when generation ends. */
  readonly result: Promise<GenerationResult>;
}

export class Weft {
  static create(options?: CreateOptions): Promise<Weft>;
  info: Info;
  readonly backend: "webgpu" | "cpu";
  load(source: string | URL | Blob | ArrayBuffer, options?: LoadOptions): Promise<Info>;
  /** The loaded chat model's vision projector (mmproj GGUF); a new load() drops it. */
  loadProjector(source: string | URL | Blob | ArrayBuffer, options?: LoadOptions): Promise<Info>;
  chat(messages: Message[], options?: GenerateOptions): Generation;
  complete(prompt: string, options?: GenerateOptions): Generation;
  embed(texts: string | string[], options?: EmbedOptions): Promise<EmbedResult>;
  /** The projector's output for one image (needs loadProjector()). */
  embedImage(image: ImageInput): Promise<{ embeddings: Float32Array; rows: number; dim: number; positions: number }>;
  tokenize(text: string, options?: { special?: boolean }): Promise<number[]>;
  detokenize(ids: ArrayLike<number>): Promise<string>;
  refreshInfo(): Promise<Info>;
  reset(): Promise<void>;
  clearCache(): Promise<boolean>;
  terminate(): void;
}

export default Weft;
