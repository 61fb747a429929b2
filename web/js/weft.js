// Weft in the browser: the JavaScript API. The engine (weft_wasm) runs in a Web Worker so the
// page stays responsive; this module turns its messages into promises and async iterators.
//
//   import { Weft } from "./pkg/weft.js";
//   const weft = await Weft.create({ backend: "auto" });          // "webgpu" | "cpu" | "auto"
//   await weft.load("/models/m/file", { onProgress: (p) => console.log(p) });
//   for await (const delta of weft.chat([{ role: "user", content: "Hi" }], { maxTokens: 64 }))
//     out.textContent += delta;
//   const { embeddings } = await weft.embed(["a text", "another"]);   // vectors, one per text
//   await weft.loadProjector("/models/m/mmproj");                     // a vision model's mmproj
//   weft.chat([{ role: "user", content: "What is this?", images: [file] }]);
//
// Streams end with a result (`stream.result`: text, tokens, finishReason, usage, timings).

/** A stream of text deltas (an async iterator) that also resolves to the final result. */
class Generation {
  constructor() {
    this._queue = [];
    this._wake = null;
    this._done = false;
    this._error = null;
    this.result = new Promise((res, rej) => {
      this._resolve = res;
      this._reject = rej;
    });
    this.result.catch(() => {});
  }
  _push(text) {
    this._queue.push(text);
    this._notify();
  }
  _finish(value) {
    this._done = true;
    this._resolve(value);
    this._notify();
  }
  _fail(err) {
    this._done = true;
    this._error = err;
    this._reject(err);
    this._notify();
  }
  _notify() {
    const w = this._wake;
    this._wake = null;
    if (w) w();
  }
  async *[Symbol.asyncIterator]() {
    for (;;) {
      if (this._queue.length) {
        yield this._queue.shift();
        continue;
      }
      if (this._error) throw this._error;
      if (this._done) return;
      await new Promise((r) => (this._wake = r));
    }
  }
}

export class Weft {
  /** Use `Weft.create`. */
  constructor(worker) {
    this._worker = worker;
    this._next = 1;
    this._pending = new Map();
    worker.onmessage = (e) => this._receive(e.data);
    worker.onerror = (e) => {
      const err = new Error(`the Weft worker failed: ${e.message || "could not start (is pkg/ built?)"}`);
      for (const p of this._pending.values()) p.reject(err);
      this._pending.clear();
    };
  }

  /**
   * Starts the engine in a Web Worker. options: {backend: "webgpu"|"cpu"|"auto", contextSize,
   * subgroups, shaderF16 (false: that WebGPU feature off), workerUrl, wasmUrl}. Rejects with a clear Error when WebGPU was asked for but is missing.
   */
  static async create(options = {}) {
    const { workerUrl, wasmUrl, ...engineOptions } = options;
    const url = workerUrl || new URL("./weft-worker.js", import.meta.url);
    const w = new Weft(new Worker(url, { type: "module" }));
    w.info = await w._call({ op: "create", options: engineOptions, wasmUrl });
    return w;
  }

  /** The backend in use ("webgpu" or "cpu"). */
  get backend() {
    return this.info?.backend;
  }

  /**
   * Loads a model: a URL (downloaded with progress, cached in the browser), a File/Blob, or an
   * ArrayBuffer. onProgress({phase: "download"|"cache"|"read"|"upload"|"compile", loaded, total}).
   * Resolves to info() plus {source: "network"|"cache"|"file"|"memory", notice}.
   */
  async load(source, { onProgress, name, cache = true } = {}) {
    const msg = { op: "load", source, name, cache, base: globalThis.location?.href };
    const info = await this._call(msg, { onProgress });
    this.info = info;
    return info;
  }

  /**
   * Loads the vision projector (mmproj GGUF) of the loaded chat model, from the same kinds of
   * source as load(); then chat/complete take images. Resolves to info() (info.model.projector).
   */
  async loadProjector(source, { onProgress, name, cache = true } = {}) {
    const msg = { op: "loadProjector", source, name, cache, base: globalThis.location?.href };
    const info = await this._call(msg, { onProgress });
    this.info = info;
    return info;
  }

  /**
   * Chat with OpenAI-style messages; an async iterator of text deltas (see Generation). A
   * message's `images` (Blob/File, ImageBitmap, ImageData, or the bytes of a PNG/JPEG/WebP/GIF
   * file) go before its text; `options.images` go with the last user message.
   */
  chat(messages, options = {}) {
    return this._stream({ op: "chat", messages, options: strip(options) }, options.signal);
  }

  /**
   * Continue a raw prompt (no chat template); same streaming as chat. `options.images` go
   * where the prompt says `<__media__>`, in order (or all before the text).
   */
  complete(prompt, options = {}) {
    return this._stream({ op: "complete", prompt, options: strip(options) }, options.signal);
  }

  /**
   * Embedding vectors of `texts` (a string or an array of strings), one per text. options:
   * {normalize (default: as the model says), dimensions (keep the first N, then normalise),
   * truncate (default true; false rejects inputs longer than the model takes)}. Works with an
   * embedding model (BERT-family GGUF) or a chat model. Resolves to {embeddings: number[][],
   * dim, promptTokens}.
   */
  embed(texts, options = {}) {
    const list = typeof texts === "string" ? [texts] : Array.from(texts);
    return this._call({ op: "embed", texts: list, options });
  }

  /**
   * The vision projector's output for one image (needs loadProjector()): {embeddings:
   * Float32Array (rows x dim, row-major), rows, dim, positions (what it takes in a prompt)}.
   */
  async embedImage(image) {
    const m = await cloneableImages({ op: "embedImage", options: { images: [image] } });
    return this._call({ op: "embedImage", image: m.options.images[0] });
  }

  /** Token ids of text. */
  tokenize(text, { special = false } = {}) {
    return this._call({ op: "tokenize", text, special });
  }

  /** Text of token ids. */
  detokenize(ids) {
    return this._call({ op: "detokenize", ids: Array.from(ids) });
  }

  /** Model, backend, adapter and limits. */
  async refreshInfo() {
    this.info = await this._call({ op: "info" });
    return this.info;
  }

  /** Forgets the cached conversation. */
  reset() {
    return this._call({ op: "reset" });
  }

  /** Deletes the models cached in this origin's private file system. */
  clearCache() {
    return this._call({ op: "clearCache" });
  }

  /** Stops the worker (and frees the model). */
  terminate() {
    this._worker.terminate();
  }

  _stream(msg, signal) {
    const gen = new Generation();
    if (signal?.aborted) {
      gen._fail(new DOMException("aborted before start", "AbortError"));
      return gen;
    }
    const id = this._next++;
    const onAbort = () => this._worker.postMessage({ op: "abort", target: id });
    signal?.addEventListener("abort", onAbort, { once: true });
    cloneableImages(msg)
      .then((m) => this._call(m, { onText: (t) => gen._push(t) }, id))
      .then((r) => gen._finish(r), (e) => gen._fail(e))
      .finally(() => signal?.removeEventListener("abort", onAbort));
    return gen;
  }

  _call(msg, handlers = {}, reserved) {
    const id = reserved ?? this._next++;
    return new Promise((resolve, reject) => {
      this._pending.set(id, { resolve, reject, ...handlers });
      this._worker.postMessage({ ...msg, id });
    });
  }

  _receive(m) {
    const p = this._pending.get(m.id);
    if (!p) return;
    if (m.type === "text") p.onText?.(m.text);
    else if (m.type === "progress") p.onProgress?.({ phase: m.phase, loaded: m.loaded, total: m.total });
    else {
      this._pending.delete(m.id);
      if (m.type === "result") p.resolve(m.value);
      else p.reject(new Error(m.message));
    }
  }
}

// Images a worker can receive: <img>, <canvas>, VideoFrame and the like become ImageBitmaps
// (Blobs, ImageBitmaps, ImageData and byte arrays go as they are).
async function cloneableImages(msg) {
  const fix = async (list) => {
    if (!Array.isArray(list)) return list;
    return Promise.all(list.map(async (img, i) => {
      const plain = img instanceof Blob || img instanceof ArrayBuffer || ArrayBuffer.isView(img)
        || (typeof ImageBitmap !== "undefined" && img instanceof ImageBitmap)
        || (typeof ImageData !== "undefined" && img instanceof ImageData);
      if (plain) return img;
      if (typeof createImageBitmap === "function" && img && typeof img === "object") {
        try {
          return await createImageBitmap(img);
        } catch {
          // falls through to the error below
        }
      }
      throw new Error(`image ${i}: expected a Blob, ImageBitmap, ImageData, an <img>/<canvas>, or the bytes of a PNG/JPEG/WebP/GIF file`);
    }));
  };
  const out = { ...msg };
  if (out.options?.images) out.options = { ...out.options, images: await fix(out.options.images) };
  if (Array.isArray(out.messages) && out.messages.some((m) => m?.images)) {
    out.messages = await Promise.all(out.messages.map(async (m) => (m?.images ? { ...m, images: await fix(m.images) } : m)));
  }
  return out;
}

// The options the engine understands (signal stays on this side).
function strip(o) {
  const { signal, ...rest } = o;
  return rest;
}

export default Weft;
