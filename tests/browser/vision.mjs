// Vision in the browser package, in Debian's headless Chromium (playwright-core; a browser is
// never downloaded). Serves web/pkg/ and the files from a small static server, then in a page:
//  1. wasm CPU backend: load Gemma 3 270M and the tiny Gemma 3 projector (loadProjector), chat
//     with the image file as a Blob in the user message, greedy 32 tokens: equal to the native
//     CPU backend's (WEFT_VISION_EXPECT, computed by tests/tests/browser_vision.rs) up to the
//     first step where the native top-1/top-2 margin is a near-tie; the same image as bytes to
//     complete() with the rendered prompt's `<__media__>`, and as an ImageBitmap: the same
//     tokens. Errors: no projector, a corrupt image, a decompression bomb's header, a wrong
//     number of markers — rejected promises with messages; the engine keeps working.
//  2. WebGPU (SwiftShader): Gemma 3's encoder on WebGPU (SigLIP, AvgPool2d, projector): its
//     embeddings against the native ones. With WEFT_VISION_GPU_STEPS=N, also the chat on
//     WebGPU for N steps against the native tokens (off by default: SwiftShader takes ~6
//     minutes for the 271-position prompt).
// Prints one JSON line of figures at the end. Exit code 0 = pass.
//
// Env: WEFT_MODEL, WEFT_MMPROJ, WEFT_IMAGE (paths), WEFT_VISION_EXPECT ({tokens, margins,
// promptTokens, nearTie, logitTolerance}), WEFT_VISION_EMBD (the native projector output, f32),
// WEFT_IMAGE_PNG, WEFT_VISION_GPU (default 1; 0 skips WebGPU), WEFT_VISION_GPU_STEPS (default
// 0), CHROMIUM.

import { chromium } from "playwright-core";
import { createServer } from "node:http";
import { createReadStream, existsSync, readFileSync, statSync } from "node:fs";
import { join, resolve, dirname, extname } from "node:path";
import { fileURLToPath } from "node:url";
import { deflateSync } from "node:zlib";
import assert from "node:assert/strict";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const chromiumPath = process.env.CHROMIUM || "/usr/bin/chromium";
const expect = JSON.parse(process.env.WEFT_VISION_EXPECT || "null");
const gpu = process.env.WEFT_VISION_GPU !== "0";
const gpuSteps = Number(process.env.WEFT_VISION_GPU_STEPS ?? 0);
const files = { model: process.env.WEFT_MODEL, mmproj: process.env.WEFT_MMPROJ, image: process.env.WEFT_IMAGE, png: process.env.WEFT_IMAGE_PNG };
const QUESTION = "Describe this image.";
const LONG = 15 * 60_000;
const log = (...a) => console.error("[browser-vision]", ...a);

for (const [what, p] of Object.entries({ ...files, chromium: chromiumPath, pkg: join(root, "web/pkg/weft_wasm_bg.wasm") })) {
  if (!p || !existsSync(p)) throw new Error(`missing ${what}: ${p}`);
}
assert.ok(expect && expect.tokens.length > 0, "WEFT_VISION_EXPECT holds the native tokens");

// --- a static server: / (an empty page), /pkg/* (web/pkg), /files/{model,mmproj,image}.
const types = { ".js": "text/javascript", ".wasm": "application/wasm", ".json": "application/json", ".ts": "text/plain" };
const server = createServer((req, res) => {
  const url = new URL(req.url, "http://x");
  let path = null;
  let type = "application/octet-stream";
  if (url.pathname === "/") {
    res.writeHead(200, { "content-type": "text/html" });
    return res.end("<!doctype html><title>weft vision</title>");
  }
  if (url.pathname.startsWith("/pkg/")) {
    const p = resolve(root, "web/pkg", "." + url.pathname.slice(4));
    if (p.startsWith(resolve(root, "web/pkg"))) path = p;
    type = types[extname(p)] || type;
  } else if (url.pathname.startsWith("/files/")) {
    path = files[url.pathname.slice(7)] || null;
  }
  if (!path || !existsSync(path) || !statSync(path).isFile()) {
    res.writeHead(404);
    return res.end("not found");
  }
  res.writeHead(200, { "content-type": type, "content-length": statSync(path).size });
  createReadStream(path).pipe(res);
});
await new Promise((r) => server.listen(0, "127.0.0.1", r));
const base = `http://127.0.0.1:${server.address().port}`;
log("serving", base);

// A PNG header claiming 30000 x 30000 pixels (a decompression bomb: refused from its header).
function bombPng() {
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (b) => {
    let c = 0xffffffff;
    for (const x of b) c = crcTable[(c ^ x) & 0xff] ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type, data) => {
    const out = Buffer.alloc(12 + data.length);
    out.writeUInt32BE(data.length, 0);
    out.write(type, 4, "latin1");
    data.copy(out, 8);
    out.writeUInt32BE(crc(out.subarray(4, 8 + data.length)), 8 + data.length);
    return out;
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(30000, 0);
  ihdr.writeUInt32BE(30000, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // RGB
  const sig = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  return Buffer.concat([sig, chunk("IHDR", ihdr), chunk("IDAT", deflateSync(Buffer.alloc(1024))), chunk("IEND", Buffer.alloc(0))]);
}

// The projector's output for the image in `page` against the native one (WEFT_VISION_EMBD):
// cosine >= 0.9999 and max-abs <= 1e-3 (the bound against llama.cpp).
const nativeEmbd = (() => {
  const b = readFileSync(process.env.WEFT_VISION_EMBD);
  return new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4);
})();
async function embedCheck(page, what) {
  const r = await page.evaluate(async () => {
    const blob = await (await fetch("/files/image")).blob();
    const e = await window.weft.embedImage(blob);
    return { rows: e.rows, dim: e.dim, positions: e.positions, data: Array.from(e.embeddings) };
  });
  assert.equal(r.rows * r.dim, nativeEmbd.length, `${what}: embedding shape ${r.rows} x ${r.dim}`);
  assert.equal(r.positions, 258);
  let dot = 0, na = 0, nb = 0, maxAbs = 0;
  for (let i = 0; i < nativeEmbd.length; i++) {
    const a = r.data[i], b = nativeEmbd[i];
    dot += a * b; na += a * a; nb += b * b;
    maxAbs = Math.max(maxAbs, Math.abs(a - b));
  }
  const cosine = dot / Math.sqrt(na * nb);
  log(`${what}: image embeddings ${r.rows} x ${r.dim} vs native: cosine ${cosine.toFixed(8)}, max-abs ${maxAbs.toExponential(3)}`);
  assert.ok(cosine >= 0.9999 && maxAbs <= 1e-3, `${what}: image embeddings vs native: cosine ${cosine}, max-abs ${maxAbs}`);
  return { cosine, maxAbs };
}

// A browser run (with topLogits) against the native one: the same tokens, or parted at a step
// where the native or the browser's top-1/top-2 margin is a near-tie (core's
// vision_gemma3_generate rule); up to and at that step (the same history) the top-1 raw logits
// within expect.logitTolerance. Returns {equal steps, largest top-1 logit difference}.
function judge(what, r) {
  const got = r.tokens;
  const want = expect.tokens.slice(0, got.length);
  assert.equal(r.steps.length, got.length, `${what}: one top-logits entry per step`);
  const k = want.findIndex((t, i) => got[i] !== t);
  const last = k < 0 ? got.length - 1 : k;
  let d = 0;
  const diffs = [];
  for (let i = 0; i <= last; i++) {
    diffs.push(Math.abs(r.steps[i].top[0][1] - expect.top1[i]).toFixed(4));
    d = Math.max(d, Math.abs(r.steps[i].top[0][1] - expect.top1[i]));
  }
  log(`${what}: top-1 logit differences per step ${diffs.join(" ")}`);
  if (k < 0) {
    log(`${what}: equal to the native CPU backend for ${want.length} steps, top-1 logits within ${d.toFixed(4)}`);
  } else {
    const top = r.steps[k].top;
    const mb = top[0][1] - top[1][1];
    const mn = expect.margins[k];
    log(`${what}: equal to the native CPU backend for ${k} steps, parted at step ${k} (${got[k]} vs ${want[k]}), margins there: native ${mn.toFixed(3)}, browser ${mb.toFixed(3)}; top-1 logits up to it within ${d.toFixed(4)}`);
    assert.ok(Math.min(mn, mb) < expect.nearTie, `${what}: tokens ${JSON.stringify(got)} vs native ${JSON.stringify(want)}: parted at step ${k} with no near-tie (margins ${mn}, ${mb})`);
  }
  assert.ok(d <= expect.logitTolerance, `${what}: top-1 logits ${d} apart from the native ones (tolerance ${expect.logitTolerance})`);
  return { equal: k < 0 ? got.length : k, logitDiff: d };
}

const figures = {};
const baseArgs = ["--no-sandbox", "--headless", "--disable-background-networking", "--disable-component-update",
  "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"];

// Loads the model and projector on `backend` in `page`; returns their info.
async function loadAll(page, backend) {
  return page.evaluate(async (backend) => {
    const { Weft } = await import("/pkg/weft.js");
    const w = await Weft.create({ backend });
    window.weft = w;
    await w.load("/files/model", { cache: false });
    const noProjector = await w.chat([{ role: "user", content: "hi", images: [new Uint8Array([1, 2, 3])] }], { maxTokens: 1 })
      .result.catch((e) => e.message);
    const info = await w.loadProjector("/files/mmproj", { cache: false });
    return { info, noProjector };
  }, backend);
}

// Greedy chat with the image as a Blob in the user message.
async function chatImage(page, n) {
  return page.evaluate(async ([q, n]) => {
    const blob = await (await fetch("/files/image")).blob();
    const g = window.weft.chat([{ role: "user", content: q, images: [blob] }], { temperature: 0, maxTokens: n, ignoreEos: true, topLogits: 2 });
    let text = "";
    for await (const d of g) text += d;
    return { ...(await g.result), streamed: text };
  }, [QUESTION, n]);
}

let browser = null;
try {
  // --- 1. the wasm CPU backend.
  browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: baseArgs });
  const page = await browser.newPage();
  page.on("console", (m) => log("page:", m.text()));
  page.on("pageerror", (e) => log("page error:", e.message));
  page.setDefaultTimeout(LONG);
  await page.goto(`${base}/`);
  const { info, noProjector } = await loadAll(page, "cpu");
  assert.equal(info.backend, "cpu");
  assert.match(noProjector, /no vision projector loaded/);
  assert.equal(info.model.projector?.type, "gemma3", JSON.stringify(info.model));
  assert.equal(info.model.projector.backend, "cpu");
  log("loaded", JSON.stringify(info.model));

  // The projector's output in the browser against the native one (same image bytes).
  const embd = await embedCheck(page, "wasm CPU");
  figures.cpu_embd_cosine = embd.cosine;
  figures.cpu_embd_max_abs = embd.maxAbs;

  const cpu = await chatImage(page, expect.tokens.length);
  log("wasm cpu tokens", JSON.stringify(cpu.tokens), JSON.stringify(cpu.text), JSON.stringify(cpu.usage), JSON.stringify(cpu.timings));
  assert.equal(cpu.tokens.length, expect.tokens.length);
  assert.equal(cpu.usage.promptTokens, expect.promptTokens, "the chat prompt is mtmd's, image positions counted");
  assert.equal(cpu.usage.imageTokens, 258);
  assert.equal(cpu.streamed, cpu.text);
  figures.cpu = judge("wasm CPU, chat + Blob", cpu);
  figures.cpu_prompt_ms = cpu.timings.promptMs;
  figures.cpu_tok_s = cpu.timings.tokensPerS;

  // The same image as bytes to complete() with the rendered prompt: the same tokens (and the
  // cached prompt reused). A PNG as bytes and as an ImageBitmap (drawn and encoded as PNG
  // again: the same pixels): the same tokens and logits. (A JPEG as an ImageBitmap is decoded
  // by the browser's own JPEG decoder: other pixels.)
  const n = 8;
  const more = await page.evaluate(async ([q, n]) => {
    const bytes = new Uint8Array(await (await fetch("/files/image")).arrayBuffer());
    const prompt = `<start_of_turn>user\n<__media__>${q}<end_of_turn>\n<start_of_turn>model\n`;
    const opts = { temperature: 0, maxTokens: n, ignoreEos: true, topLogits: 2 };
    const raw = await window.weft.complete(prompt, { ...opts, special: true, images: [bytes] }).result;
    const png = new Uint8Array(await (await fetch("/files/png")).arrayBuffer());
    const pngBytes = await window.weft.chat([{ role: "user", content: q }], { ...opts, images: [png] }).result;
    const bitmap = await createImageBitmap(new Blob([png], { type: "image/png" }));
    const pngBitmap = await window.weft.chat([{ role: "user", content: q, images: [bitmap] }], opts).result;
    return { raw, pngBytes, pngBitmap };
  }, [QUESTION, n]);
  assert.equal(more.raw.usage.promptTokens, expect.promptTokens);
  assert.ok(more.raw.usage.cachedPromptTokens >= expect.promptTokens - 1, `the same image again reuses the cache: ${JSON.stringify(more.raw.usage)}`);
  assert.deepEqual(more.raw.tokens, cpu.tokens.slice(0, n), "complete() with bytes vs chat() with a Blob");
  assert.deepEqual(more.pngBitmap.tokens, more.pngBytes.tokens, "a PNG as an ImageBitmap vs as bytes");
  assert.deepEqual(more.pngBitmap.steps, more.pngBytes.steps, "a PNG as an ImageBitmap vs as bytes: logits");
  assert.notDeepEqual(more.pngBytes.tokens, more.raw.tokens, "another image, other tokens");
  log("png as bytes and as ImageBitmap", JSON.stringify(more.pngBytes.tokens));

  // Errors: rejected promises with messages, and the engine keeps working.
  const errs = await page.evaluate(async (bomb) => {
    const w = window.weft;
    const msg = (g) => g.result.then(() => "resolved", (e) => e.message);
    return {
      corrupt: await msg(w.chat([{ role: "user", content: "x", images: [new Uint8Array([0x89, 0x50, 0x4e, 0x47, 1, 2, 3])] }], { maxTokens: 1 })),
      bomb: await msg(w.chat([{ role: "user", content: "x", images: [new Uint8Array(bomb)] }], { maxTokens: 1 })),
      markers: await msg(w.complete("<__media__> and <__media__>", { maxTokens: 1, images: [new Uint8Array(bomb)] })),
      kind: await msg(w.chat([{ role: "user", content: "x", images: [{ not: "an image" }] }], { maxTokens: 1 })),
      after: (await w.chat([{ role: "user", content: "Hi" }], { temperature: 0, maxTokens: 2 }).result).tokens.length,
    };
  }, [...bombPng()]);
  log("errors", JSON.stringify(errs));
  assert.match(errs.corrupt, /image 0/);
  assert.match(errs.bomb, /image 0: .*(30000|too large|pixels|limit)/i);
  assert.match(errs.markers, /places 2 image\(s\) but 1 were given/);
  assert.match(errs.kind, /image 0: expected/);
  assert.equal(errs.after, 2);
  await browser.close();
  browser = null;

  // --- 2. WebGPU (SwiftShader): the language model takes the image rows on the GPU.
  if (gpu) {
    browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: [...baseArgs, "--enable-unsafe-webgpu"] });
    const gp = await browser.newPage();
    gp.on("pageerror", (e) => log("page error:", e.message));
    gp.setDefaultTimeout(LONG);
    await gp.goto(`${base}/`);
    const g = await loadAll(gp, "webgpu");
    assert.equal(g.info.backend, "webgpu");
    // Gemma 3's encoder (SigLIP, AvgPool2d, projector) on WebGPU too.
    assert.equal(g.info.model.projector.backend, "webgpu");
    const ge = await embedCheck(gp, "WebGPU (SwiftShader)");
    figures.webgpu_embd_cosine = ge.cosine;
    figures.webgpu_embd_max_abs = ge.maxAbs;
    figures.webgpu_adapter = g.info.adapter?.name;
    if (gpuSteps > 0) {
      const r = await chatImage(gp, gpuSteps);
      log("webgpu tokens", JSON.stringify(r.tokens), JSON.stringify(r.timings));
      assert.equal(r.usage.promptTokens, expect.promptTokens);
      figures.webgpu = judge("WebGPU (SwiftShader), chat + Blob", r);
      figures.webgpu_prompt_ms = r.timings.promptMs;
    }
  }
  console.log(JSON.stringify({ ok: true, tokens: cpu.tokens, ...figures }));
} finally {
  if (browser) await browser.close().catch(() => {});
  server.close();
}
