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
  signal?: AbortSignal;
}

export interface GenerationResult {
  text: string;
  tokens: number[];
  finishReason: "stop" | "length" | "abort";
  usage: { promptTokens: number; cachedPromptTokens: number; completionTokens: number };
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
    vocab: number;
    layers: number;
    embedding: number;
    contextSize: number;
    trainedContext: number;
    chatTemplate: boolean;
  };
  threads: number;
  simd128: boolean;
  /** After load(): where the bytes came from, and a notice (e.g. quota exceeded). */
  source?: "network" | "cache" | "file" | "memory";
  notice?: string | null;
}

export interface Message {
  role: "system" | "user" | "assistant" | string;
  content: string;
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
  chat(messages: Message[], options?: GenerateOptions): Generation;
  complete(prompt: string, options?: GenerateOptions): Generation;
  tokenize(text: string, options?: { special?: boolean }): Promise<number[]>;
  detokenize(ids: ArrayLike<number>): Promise<string>;
  refreshInfo(): Promise<Info>;
  reset(): Promise<void>;
  clearCache(): Promise<boolean>;
  terminate(): void;
}

export default Weft;
