// The Weft engine's Web Worker: owns the wasm engine, downloads models (with progress and a
// browser cache in the Origin Private File System), and answers weft.js's requests.
// Protocol: {id, op, ...} in; {id, type: "progress" | "text" | "result" | "error", ...} out.

import init, { WeftEngine } from "./weft_wasm.js";

let engine = null;
const aborts = new Map(); // request id -> AbortController

const post = (msg) => self.postMessage(msg);

self.onmessage = async (e) => {
  const msg = e.data;
  if (msg.op === "abort") {
    aborts.get(msg.target)?.abort();
    return;
  }
  try {
    const value = await handle(msg);
    post({ id: msg.id, type: "result", value });
  } catch (err) {
    post({ id: msg.id, type: "error", message: String(err && err.message ? err.message : err) });
  }
};

async function handle(msg) {
  switch (msg.op) {
    case "create": {
      await init(msg.wasmUrl ? { module_or_path: msg.wasmUrl } : undefined);
      engine = await WeftEngine.create(msg.options || {});
      return engine.info();
    }
    case "load":
      return load(msg);
    case "chat":
    case "complete": {
      const ac = new AbortController();
      aborts.set(msg.id, ac);
      const onText = (t) => post({ id: msg.id, type: "text", text: t });
      try {
        return msg.op === "chat"
          ? await need().chat(msg.messages, msg.options || {}, onText, ac.signal)
          : await need().complete(msg.prompt, msg.options || {}, onText, ac.signal);
      } finally {
        aborts.delete(msg.id);
      }
    }
    case "embed":
      return await need().embed(msg.texts, msg.options || {});
    case "tokenize":
      return Array.from(need().tokenize(msg.text, !!msg.special));
    case "detokenize":
      return need().detokenize(Uint32Array.from(msg.ids));
    case "info":
      return need().info();
    case "reset":
      return need().reset();
    case "clearCache":
      return clearCache();
    default:
      throw new Error(`unknown request ${msg.op}`);
  }
}

function need() {
  if (!engine) throw new Error("the engine is not created yet");
  return engine;
}

// ---- model loading ----------------------------------------------------------------------

const CACHE_DIR = "weft-models";

// A file name for a URL (OPFS names cannot contain '/').
function cacheName(url) {
  return encodeURIComponent(url).replace(/%/g, "_").slice(-200);
}

async function cacheDir() {
  if (!self.navigator?.storage?.getDirectory) return null;
  try {
    const root = await navigator.storage.getDirectory();
    return await root.getDirectoryHandle(CACHE_DIR, { create: true });
  } catch {
    return null;
  }
}

async function clearCache() {
  if (!self.navigator?.storage?.getDirectory) return false;
  const root = await navigator.storage.getDirectory();
  await root.removeEntry(CACHE_DIR, { recursive: true }).catch(() => {});
  return true;
}

// Streams `stream` (of `total` bytes) into the engine, reporting progress as `phase`.
async function pump(stream, total, phase, id, tee) {
  const reader = stream.getReader();
  let done = 0;
  let last = 0;
  for (;;) {
    const { value, done: end } = await reader.read();
    if (end) break;
    engine.push_chunk(value);
    if (tee) await tee(value);
    done += value.byteLength;
    const now = performance.now();
    if (now - last > 100) {
      last = now;
      post({ id, type: "progress", phase, loaded: done, total });
    }
  }
  post({ id, type: "progress", phase, loaded: done, total });
  return done;
}

async function load(msg) {
  const e = need();
  const id = msg.id;
  const src = msg.source;
  let name = msg.name || "model";
  let from = "memory";
  let notice = null;
  if (src instanceof Blob) {
    name = msg.name || src.name || "model.gguf";
    e.begin_load(src.size);
    await pump(src.stream(), src.size, "read", id);
    from = "file";
  } else if (src instanceof ArrayBuffer || ArrayBuffer.isView(src)) {
    const bytes = src instanceof ArrayBuffer ? new Uint8Array(src) : new Uint8Array(src.buffer, src.byteOffset, src.byteLength);
    e.begin_load(bytes.byteLength);
    e.push_chunk(bytes);
    from = "memory";
  } else if (typeof src === "string") {
    const url = new URL(src, msg.base || self.location.href).href;
    name = msg.name || decodeURIComponent(url.split("/").filter(Boolean).slice(-2).join("/"));
    const dir = msg.cache === false ? null : await cacheDir();
    const key = cacheName(url);
    let cached = null;
    if (dir) {
      try {
        cached = await (await dir.getFileHandle(key)).getFile();
      } catch {
        cached = null;
      }
    }
    if (cached && cached.size > 0) {
      e.begin_load(cached.size);
      await pump(cached.stream(), cached.size, "cache", id);
      from = "cache";
    } else {
      const resp = await fetch(url);
      if (!resp.ok) throw new Error(`cannot download ${url}: HTTP ${resp.status}`);
      const total = Number(resp.headers.get("content-length")) || 0;
      e.begin_load(total);
      // Write to the cache while downloading; a full quota drops the cache, keeps the bytes.
      let writable = null;
      if (dir) {
        try {
          const est = await navigator.storage.estimate?.();
          if (est && total && est.quota - est.usage < total) {
            notice = "not enough browser storage to cache this model: kept in memory only";
          } else {
            writable = await (await dir.getFileHandle(key, { create: true })).createWritable();
          }
        } catch {
          writable = null;
        }
      }
      const tee = writable
        ? async (chunk) => {
            try {
              await writable.write(chunk);
            } catch (err) {
              notice = err && err.name === "QuotaExceededError"
                ? "browser storage quota exceeded: the model is kept in memory only"
                : `could not cache the model: ${err}`;
              const w = writable;
              writable = null;
              await w.abort().catch(() => {});
              await dir.removeEntry(key).catch(() => {});
            }
          }
        : null;
      await pump(resp.body, total, "download", id, (c) => (writable ? tee(c) : undefined));
      if (writable) {
        try {
          await writable.close();
        } catch (err) {
          notice = `could not cache the model (${err && err.name}): kept in memory only`;
          await dir.removeEntry(key).catch(() => {});
        }
      }
      from = "network";
    }
  } else {
    throw new Error("load(source): source must be a URL string, a File/Blob or an ArrayBuffer");
  }
  const info = await e.finish_load(name, (phase, done, total) =>
    post({ id, type: "progress", phase, loaded: done, total }),
  );
  return { ...info, source: from, notice };
}
