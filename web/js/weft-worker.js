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
    case "loadProjector":
      return loadProjector(msg);
    case "chat":
    case "complete": {
      const ac = new AbortController();
      aborts.set(msg.id, ac);
      const onText = (t) => post({ id: msg.id, type: "text", text: t });
      try {
        const { images: given, ...options } = msg.options || {};
        if (msg.op === "complete") {
          const images = given == null ? undefined : await imageBytes(given);
          return await need().complete(msg.prompt, options, onText, ac.signal, images);
        }
        const { messages, images } = await takeImages(msg.messages, given);
        return await need().chat(messages, options, onText, ac.signal, images);
      } finally {
        aborts.delete(msg.id);
      }
    }
    case "embedImage":
      return await need().embed_image(await imageToBytes(msg.image, 0));
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

// ---- images ------------------------------------------------------------------------------

// The encoded bytes of one image: Blobs and byte arrays as they are (decoded in wasm by the
// same decoder as natively, so results are identical); an ImageBitmap or ImageData is drawn
// on a canvas and encoded as PNG (lossless).
async function imageToBytes(img, i) {
  if (img instanceof Blob) return new Uint8Array(await img.arrayBuffer());
  if (img instanceof ArrayBuffer) return new Uint8Array(img);
  if (ArrayBuffer.isView(img)) return new Uint8Array(img.buffer, img.byteOffset, img.byteLength);
  const isBitmap = typeof ImageBitmap !== "undefined" && img instanceof ImageBitmap;
  const isData = typeof ImageData !== "undefined" && img instanceof ImageData;
  if (isBitmap || isData) {
    if (typeof OffscreenCanvas === "undefined") throw new Error(`image ${i}: this browser has no OffscreenCanvas to encode it; pass the image file's bytes`);
    const canvas = new OffscreenCanvas(img.width, img.height);
    const ctx = canvas.getContext("2d");
    if (isBitmap) ctx.drawImage(img, 0, 0);
    else ctx.putImageData(img, 0, 0);
    return new Uint8Array(await (await canvas.convertToBlob({ type: "image/png" })).arrayBuffer());
  }
  throw new Error(`image ${i}: expected a Blob, ImageBitmap, ImageData or the bytes of a PNG/JPEG/WebP/GIF file`);
}

async function imageBytes(list) {
  if (!Array.isArray(list)) throw new Error("images must be an array");
  const out = [];
  for (let i = 0; i < list.length; i++) out.push(await imageToBytes(list[i], i));
  return out;
}

// Takes each message's `images` out and puts the engine's image marker, one per image,
// before its text (the chat template then places them); `extra` (options.images) go with the
// last user message.
async function takeImages(messages, extra) {
  if (!Array.isArray(messages)) return { messages, images: undefined };
  const msgs = messages.map((m) => ({ ...m }));
  if (extra != null) {
    if (!Array.isArray(extra)) throw new Error("images must be an array");
    const last = msgs.findLastIndex((m) => m.role === "user");
    if (last < 0) throw new Error("options.images needs a user message to go with");
    msgs[last].images = [...(msgs[last].images || []), ...extra];
  }
  const images = [];
  const marker = need().image_marker;
  for (const m of msgs) {
    if (m.images == null) continue;
    const list = await imageBytes(m.images);
    delete m.images;
    images.push(...list);
    const marks = marker.repeat(list.length);
    if (Array.isArray(m.content)) m.content = [{ type: "text", text: marks }, ...m.content];
    else m.content = marks + (m.content ?? "");
  }
  return { messages: msgs, images: images.length ? images : undefined };
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
  const { name, from, notice } = await receive(msg, (size) => e.begin_load(size));
  const info = await e.finish_load(name, (phase, done, total) =>
    post({ id: msg.id, type: "progress", phase, loaded: done, total }),
  );
  return { ...info, source: from, notice };
}

// A vision projector (mmproj GGUF) for the loaded model, read like a model.
async function loadProjector(msg) {
  const e = need();
  const { name, from, notice } = await receive(msg, (size) => e.begin_projector(size), "mmproj.gguf");
  const info = await e.finish_projector(name);
  return { ...info, source: from, notice };
}

// Streams the file `msg.source` names (URL, Blob or bytes) into the engine after `begin(size)`;
// returns its name, where it came from and a notice (e.g. quota exceeded).
async function receive(msg, begin, fallbackName = "model.gguf") {
  const e = need();
  const id = msg.id;
  const src = msg.source;
  let name = msg.name || "model";
  let from = "memory";
  let notice = null;
  if (src instanceof Blob) {
    name = msg.name || src.name || fallbackName;
    begin(src.size);
    await pump(src.stream(), src.size, "read", id);
    from = "file";
  } else if (src instanceof ArrayBuffer || ArrayBuffer.isView(src)) {
    const bytes = src instanceof ArrayBuffer ? new Uint8Array(src) : new Uint8Array(src.buffer, src.byteOffset, src.byteLength);
    begin(bytes.byteLength);
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
      begin(cached.size);
      await pump(cached.stream(), cached.size, "cache", id);
      from = "cache";
    } else {
      const resp = await fetch(url);
      if (!resp.ok) throw new Error(`cannot download ${url}: HTTP ${resp.status}`);
      const total = Number(resp.headers.get("content-length")) || 0;
      begin(total);
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
  return { name, from, notice };
}
