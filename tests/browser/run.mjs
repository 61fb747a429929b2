// End-to-end test of the browser build in Debian's headless Chromium (playwright-core; a
// browser is never downloaded). Starts the real `weft serve`, then:
//  1. /play/ on WebGPU (SwiftShader): loads SmolLM2 135M from the server, generates 8 greedy
//     tokens and compares them with the native CPU backend (`weft run --json`) and with the
//     llama.cpp reference.
//     Subgroups are used where the adapter offers them (SwiftShader does).
//  2. a second page load gets the model from the browser cache (no new download request),
//     with subgroups turned off (?subgroups=0): the same tokens.
//  3. a browser without WebGPU: backend "auto" falls back to the CPU (wasm SIMD) and gives the
//     same 8 tokens; one chat turn through the page's UI (streamed into a bubble, stop button
//     shown while generating); the example embedding page streams a reply.
//  4. one way to run a model: on that CPU fallback, a greedy chat stops on the same tokens as
//     `weft run` and `weft serve` (tests/tests/same_tokens.rs holds those two to each other):
//     once at the end-of-generation token, once at a stop string.
//  5. K-quants on WebGPU: the model requantized with `weft quantize --pure` to Q4_K_M, Q5_K_M
//     and Q6_K (made in a temp dir): KQ_N greedy tokens on WebGPU equal the native CPU
//     backend's for each (Chromium's Tint once kept a loop-local `var` from one K block to
//     the next in the K-quant prefill product: wrong tokens from the first).
// (The chat turns run on the CPU fallback: SwiftShader needs seconds per token.)
// With WEFT_EMBED_GGUF (all-MiniLM-L6-v2 as GGUF, served as `minilm`) and WEFT_EMBED_REFERENCE
// (sentence-transformers' vectors), `weft.embed` is checked on WebGPU and on the wasm CPU
// fallback: cosine >= 0.9999 with the reference; chat on it and an empty list are clear errors.
// Prints one JSON line of figures (tokens/s) at the end. Exit code 0 = pass.
//
// Env: WEFT_BIN (the weft binary), WEFT_MODEL (default models/SmolLM2-135M-Instruct.Q4_1.gguf),
// WEFT_REFERENCE (default tests/reference/smollm2-135m.dev.json, or in $WEFT_REFERENCE_DIR),
// CHROMIUM (default /usr/bin/chromium).

import { chromium } from "playwright-core";
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, existsSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve, dirname, basename } from "node:path";
import { fileURLToPath } from "node:url";
import assert from "node:assert/strict";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const bin = process.env.WEFT_BIN || join(process.env.CARGO_TARGET_DIR || join(root, "target"), "debug/weft");
const model = resolve(root, process.env.WEFT_MODEL || "models/SmolLM2-135M-Instruct.Q4_1.gguf");
const refDir = process.env.WEFT_REFERENCE_DIR || join(root, "tests/reference");
const refPath = process.env.WEFT_REFERENCE || join(refDir, "smollm2-135m.dev.json");
const chromiumPath = process.env.CHROMIUM || "/usr/bin/chromium";
const embedGguf = process.env.WEFT_EMBED_GGUF;
const embedRef = process.env.WEFT_EMBED_REFERENCE && JSON.parse(readFileSync(process.env.WEFT_EMBED_REFERENCE, "utf8"));
if (process.env.CI && !(embedGguf && embedRef)) throw new Error("CI needs WEFT_EMBED_GGUF and WEFT_EMBED_REFERENCE");
// Empty, short, unicode, code, ~128 tokens and one cut to 256 tokens.
const EMBED_PICK = [0, 1, 5, 6, 19, 21, 24, 27, 28, 31, 33];
// Every one of its first 8 reference steps has a top-1/top-2 margin of at least 0.3, so the
// tokens are not at the mercy of rounding differences between backends.
const PROMPT = "def fibonacci(n):";
const N = 8;
// The chat cases of step 4 (the same as tests/tests/same_tokens.rs).
const QUESTION = "What is 2+2?";
const CHAT_STOP = "problem is";
const CHAT_MAX = 24;
const LONG = 15 * 60_000;
// Step 5: the K-quant types (every K dequantizer and both K product kinds) and tokens each.
const KQUANTS = ["Q4_K_M", "Q5_K_M", "Q6_K"];
const KQ_N = 4;

const log = (...a) => console.error("[browser-test]", ...a);
const base_args = [
  "--no-sandbox", "--headless", "--disable-background-networking", "--disable-component-update",
  "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
];
for (const [what, p] of [["weft binary", bin], ["model", model], ["chromium", chromiumPath],
  ["browser package (scripts/build-web.sh)", join(root, "web/pkg/weft_wasm_bg.wasm")]]) {
  if (!existsSync(p)) throw new Error(`missing ${what}: ${p}`);
}

// --- native tokens: the CPU backend through the CLI.
const native = JSON.parse(execFileSync(bin, ["run", "--model", model, "--backend", "cpu", "--raw",
  "--prompt", PROMPT, "--temperature", "0", "--max-tokens", String(N), "--ignore-eos", "--json"],
  { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] }).trim().split("\n").pop());
log("native cpu tokens", native.tokens, `${native.timings.gen_tokens_per_s.toFixed(1)} tok/s`);
assert.equal(native.tokens.length, N);

// Reference: tokens agree up to the first step whose margin is below 0.3 (README's rule).
let refTokens = null;
if (existsSync(refPath)) {
  const ref = JSON.parse(readFileSync(refPath, "utf8"));
  const c = ref.cases.find((c) => c.kind === "raw" && c.prompt === PROMPT);
  refTokens = [];
  for (const s of c.steps.slice(0, N)) {
    refTokens.push(s.token);
    if (s.margin < 0.3) break;
  }
  assert.deepEqual(native.tokens.slice(0, refTokens.length), refTokens, "native CPU vs the llama.cpp reference");
} else if (process.env.CI) {
  throw new Error(`reference missing under CI: ${refPath}`);
} else {
  log(`*** reference ${refPath} missing: skipping the reference comparison ***`);
}

// --- K-quant models (step 5): the model requantized, and their native CPU tokens.
const kqDir = mkdtempSync(join(tmpdir(), "weft-kquant-"));
process.on("exit", () => rmSync(kqDir, { recursive: true, force: true }));
const kquants = KQUANTS.map((type) => {
  const path = join(kqDir, `${type.toLowerCase()}.gguf`);
  // stderr piped (the progress bar), so a failure's error message carries it.
  execFileSync(bin, ["quantize", model, path, type, "--pure", "--allow-requantize", "--models-dir", kqDir],
    { stdio: ["ignore", "ignore", "pipe"] });
  const want = JSON.parse(execFileSync(bin, ["run", "--model", path, "--backend", "cpu", "--raw",
    "--prompt", PROMPT, "--temperature", "0", "--max-tokens", String(KQ_N), "--ignore-eos", "--json"],
    { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] }).trim().split("\n").pop());
  assert.equal(want.tokens.length, KQ_N);
  log(`native cpu tokens, ${type}`, want.tokens);
  return { type, name: `kq-${type.toLowerCase()}`, path, tokens: want.tokens };
});

// --- the server.
const embedArgs = embedGguf ? ["--model", `minilm=${embedGguf}`] : [];
const kqArgs = kquants.flatMap((k) => ["--model", `${k.name}=${k.path}`]);
const server = spawn(bin, ["serve", "--model", model, ...embedArgs, ...kqArgs, "--host", "127.0.0.1", "--port", "0", "--threads", "1"],
  { stdio: ["ignore", "ignore", "pipe"], cwd: root });
const base = await new Promise((res, rej) => {
  let buf = "";
  const t = setTimeout(() => rej(new Error("weft serve did not start")), 120_000);
  server.stderr.on("data", (d) => {
    buf += d;
    // Only a whole line: a chunk may end inside the address.
    const m = buf.match(/listening on (http:\/\/[^\s]+)[^\n]*\n/);
    if (m) { clearTimeout(t); res(m[1].replace(/\/$/, "")); }
  });
  server.on("exit", (c) => rej(new Error(`weft serve exited (${c}): ${buf}`)));
});
log("server", base);

const figures = { native_cpu_tok_s: native.timings.gen_tokens_per_s };

// weft.embed in a page on `backend`: vectors against the reference, and its errors.
async function embedCheck(pg, backend) {
  if (!embedRef) {
    log("*** WEFT_EMBED_GGUF / WEFT_EMBED_REFERENCE unset: skipping the embedding check ***");
    return;
  }
  const picked = EMBED_PICK.map((i) => embedRef.sentences[i]);
  const r = await pg.evaluate(async ([backend, texts]) => {
    const { Weft } = await import("/play/pkg/weft.js");
    const w = await Weft.create({ backend });
    const info = await w.load("/models/minilm/file", { cache: false });
    const t0 = performance.now();
    const out = await w.embed(texts);
    const ms = performance.now() - t0;
    const chat = await w.chat([{ role: "user", content: "hi" }]).result.catch((e) => e.message);
    const empty = await w.embed([]).catch((e) => e.message);
    const cut = await w.embed(texts[0], { dimensions: 64 });
    w.terminate();
    return { info, out, ms, chat, empty, cutDim: cut.dim };
  }, [backend, picked.map((s) => s.text)]);
  assert.equal(r.info.backend, backend === "auto" ? "cpu" : backend);
  assert.equal(r.info.model.kind, "embedding");
  assert.equal(r.out.embeddings.length, picked.length);
  let worst = 1;
  picked.forEach((s, i) => {
    const a = r.out.embeddings[i], b = s.embedding;
    let dot = 0, na = 0, nb = 0;
    for (let j = 0; j < b.length; j++) { dot += a[j] * b[j]; na += a[j] * a[j]; nb += b[j] * b[j]; }
    const c = dot / Math.sqrt(na * nb);
    worst = Math.min(worst, c);
    assert.ok(c >= 0.9999, `embed on ${backend}: cosine ${c} for ${JSON.stringify(s.text.slice(0, 40))}`);
  });
  assert.match(r.chat, /does not generate text/);
  assert.match(r.empty, /no input/);
  assert.equal(r.cutDim, 64);
  log(`embed on ${r.info.backend}: ${picked.length} texts in ${r.ms.toFixed(0)} ms, lowest cosine ${worst.toFixed(7)}`);
  figures[`embed_${r.info.backend}_ms`] = r.ms;
  figures[`embed_${r.info.backend}_min_cosine`] = worst;
}
const profile = mkdtempSync(join(tmpdir(), "weft-chromium-"));
let ctx = null;
try {
  // --- WebGPU runs (persistent profile so the origin's file system survives a reload).
  ctx = await chromium.launchPersistentContext(profile, {
    executablePath: chromiumPath, headless: true, args: [...base_args, "--enable-unsafe-webgpu"],
  });
  let downloads = 0;
  ctx.on("request", (r) => { if (/\/models\/[^/]+\/file/.test(r.url())) downloads++; });
  const page = ctx.pages()[0] || (await ctx.newPage());
  page.on("console", (m) => log("page:", m.text()));
  page.on("pageerror", (e) => log("page error:", e.message));

  async function loadPage(backend, extra = "") {
    await page.goto(`${base}/play/?backend=${backend}${extra}`);
    await page.waitForFunction(() => window.weftPage && document.getElementById("served").value !== "");
    await page.click("#load");
    await page.waitForFunction(() => window.weftLoad || document.querySelector(".notice.err:not([hidden])"), null, { timeout: LONG });
    const err = await page.evaluate(() => !window.weftLoad && document.getElementById("notice").textContent);
    if (err) throw new Error(`page load failed: ${err}`);
    return page.evaluate(() => window.weftLoad);
  }
  async function greedy(pg, n = N) {
    return pg.evaluate(async ([prompt, n]) => {
      const g = window.weft.complete(prompt, { temperature: 0, maxTokens: n, ignoreEos: true });
      let text = "";
      for await (const d of g) text += d;
      const r = await g.result;
      return { ...r, streamed: text };
    }, [PROMPT, n]);
  }

  const info1 = await loadPage("webgpu");
  log("loaded", JSON.stringify({ source: info1.source, backend: info1.backend, adapter: info1.adapter?.name,
    subgroups: info1.adapter?.subgroups, features: info1.features }));
  assert.equal(info1.backend, "webgpu");
  // The device uses subgroups exactly when the browser's adapter offers them.
  const offered = await page.evaluate(async () => (await navigator.gpu.requestAdapter()).features.has("subgroups"));
  assert.equal(info1.features.subgroups, offered, "subgroups in use where offered");
  // The packed 8-bit dot built-ins exactly where the browser's WGSL has the language extension.
  const packed = await page.evaluate(() => navigator.gpu.wgslLanguageFeatures.has("packed_4x8_integer_dot_product"));
  assert.equal(info1.features.packedDot, packed, "packed dot built-ins where the WGSL has them");
  assert.equal(info1.adapter.subgroups !== null, offered);
  assert.equal(info1.source, "network");
  assert.ok(downloads >= 1, "the model was downloaded from the server");
  const gpu = await greedy(page);
  log("webgpu tokens", gpu.tokens, `${gpu.timings.tokensPerS.toFixed(2)} tok/s`);
  assert.deepEqual(gpu.tokens, native.tokens, "WebGPU vs native CPU tokens");
  assert.equal(gpu.streamed, gpu.text);
  assert.equal(gpu.text, native.text);
  figures.webgpu_swiftshader_tok_s = gpu.timings.tokensPerS;
  figures.webgpu_prompt_tok_s = gpu.timings.promptTokensPerS;
  figures.webgpu_subgroups = info1.features.subgroups;

  // --- second load: from the browser cache, subgroups off.
  const before = downloads;
  const info2 = await loadPage("webgpu", "&subgroups=0");
  assert.equal(info2.source, "cache", "second load comes from the browser cache");
  assert.equal(downloads, before, "no download request on the second load");
  assert.equal(info2.features.subgroups, false, "?subgroups=0 turns subgroups off");
  const gpu2 = await greedy(page, 4);
  log("webgpu tokens without subgroups", gpu2.tokens, `${gpu2.timings.tokensPerS.toFixed(2)} tok/s`);
  assert.deepEqual(gpu2.tokens, gpu.tokens.slice(0, 4), "WebGPU tokens with vs without subgroups");
  figures.webgpu_no_subgroups_tok_s = gpu2.timings.tokensPerS;
  await embedCheck(page, "webgpu");

  // --- step 5: K-quant models on WebGPU, tokens against the native CPU backend's.
  figures.kquant_webgpu_tokens = {};
  for (const k of kquants) {
    const got = await page.evaluate(async ([name, prompt, n]) => {
      const { Weft } = await import("/play/pkg/weft.js");
      const w = await Weft.create({ backend: "webgpu" });
      await w.load(`/models/${name}/file`, { cache: false });
      const r = await w.complete(prompt, { temperature: 0, maxTokens: n, ignoreEos: true, topLogits: 2 }).result;
      w.terminate();
      return r;
    }, [k.name, PROMPT, KQ_N]);
    log(`webgpu tokens, ${k.type}`, got.tokens, "step 0 top-2", JSON.stringify(got.steps[0].top));
    assert.deepEqual(got.tokens, k.tokens, `WebGPU vs native CPU tokens, ${k.type}`);
    figures.kquant_webgpu_tokens[k.type] = got.tokens;
  }

  await ctx.close();
  ctx = null;

  // --- no WebGPU: "auto" runs on the CPU backend.
  const browser = await chromium.launch({
    executablePath: chromiumPath, headless: true, args: [...base_args, "--disable-blink-features=WebGPU"],
  });
  try {
    const p2 = await browser.newPage();
    p2.on("pageerror", (e) => log("page error:", e.message));
    await p2.goto(`${base}/play/?backend=auto`);
    // Without --enable-unsafe-webgpu, Linux Chromium exposes no WebGPU adapter.
    const noGpu = await p2.evaluate(async () => !navigator.gpu || !(await navigator.gpu.requestAdapter()));
    assert.equal(noGpu, true, "WebGPU is unavailable here");
    await p2.waitForFunction(() => window.weftPage && document.getElementById("served").value !== "");
    await p2.click("#load");
    await p2.waitForFunction(() => window.weftLoad || document.querySelector(".notice.err:not([hidden])"), null, { timeout: LONG });
    const info3 = await p2.evaluate(() => window.weftLoad || document.getElementById("notice").textContent);
    assert.equal(info3.backend, "cpu", `fallback: ${JSON.stringify(info3)}`);
    assert.equal(info3.simd128, true);
    const cpu = await greedy(p2);
    log("wasm cpu tokens", cpu.tokens, `${cpu.timings.tokensPerS.toFixed(2)} tok/s`);
    assert.deepEqual(cpu.tokens, native.tokens, "wasm CPU vs native CPU tokens");
    figures.wasm_cpu_tok_s = cpu.timings.tokensPerS;
    await embedCheck(p2, "auto");

    // One way to run a model: the same greedy chat in the CLI, the server and the browser.
    figures.chat_tokens = {};
    for (const stop of [null, CHAT_STOP]) {
      const case_ = stop ? `stop string ${JSON.stringify(stop)}` : "end of generation";
      const want = JSON.parse(execFileSync(bin, ["run", "--model", model, "--backend", "cpu",
        "--prompt", QUESTION, "--temperature", "0", "--max-tokens", String(CHAT_MAX), "--json",
        ...(stop ? ["--stop", stop] : [])],
        { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] }).trim().split("\n").pop());
      assert.equal(want.finish_reason, "stop", `CLI, ${case_}: ${JSON.stringify(want)}`);
      assert.ok(want.tokens.length < CHAT_MAX, `CLI, ${case_}: stopped early`);
      const res = await fetch(`${base}/v1/chat/completions`, {
        method: "POST", headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: basename(model), messages: [{ role: "user", content: QUESTION }],
          temperature: 0, max_tokens: CHAT_MAX, ...(stop ? { stop: [stop] } : {}) }),
      });
      const served = await res.json();
      assert.equal(res.status, 200, JSON.stringify(served));
      assert.equal(served.choices[0].message.content, want.text, `server vs CLI text, ${case_}`);
      assert.equal(served.choices[0].finish_reason, "stop");
      assert.equal(served.usage.completion_tokens, want.tokens.length, `server vs CLI token count, ${case_}`);
      const got = await p2.evaluate(async ([q, max, stop]) => {
        const g = window.weft.chat([{ role: "user", content: q }],
          { temperature: 0, maxTokens: max, ...(stop ? { stop: [stop] } : {}) });
        let text = "";
        for await (const d of g) text += d;
        return { ...(await g.result), streamed: text };
      }, [QUESTION, CHAT_MAX, stop]);
      log(`wasm chat, ${case_}:`, got.tokens, JSON.stringify(got.text));
      assert.deepEqual(got.tokens, want.tokens, `wasm vs CLI tokens, ${case_}`);
      assert.equal(got.text, want.text, `wasm vs CLI text, ${case_}`);
      assert.equal(got.streamed, want.text);
      assert.equal(got.finishReason, "stop");
      figures.chat_tokens[stop ? "stop_string" : "eog"] = want.tokens;
    }
    assert.ok(figures.chat_tokens.stop_string.length < figures.chat_tokens.eog.length);

    // Cancellation: an AbortSignal stops generation after the first delta.
    const stopped = await p2.evaluate(async (prompt) => {
      const ac = new AbortController();
      const g = window.weft.complete(prompt, { temperature: 0, maxTokens: 64, ignoreEos: true, signal: ac.signal });
      for await (const d of g) if (d) ac.abort();
      return g.result;
    }, PROMPT);
    assert.equal(stopped.finishReason, "abort");
    assert.ok(stopped.usage.completionTokens < 64, JSON.stringify(stopped.usage));
    // A bad request is a JS Error with a message, and the engine keeps working.
    const bad = await p2.evaluate(() => window.weft.chat([], {}).result.catch((e) => e.message));
    assert.match(bad, /messages must not be empty/);

    // One chat turn through the page's UI.
    await p2.fill("#max-tokens", "4");
    await p2.fill("#prompt", "Hi");
    await p2.click("#send");
    await p2.waitForSelector(".msg.assistant .meta", { timeout: LONG });
    const meta = await p2.textContent(".msg.assistant .meta");
    assert.match(meta, /tok\/s/);
    assert.ok((await p2.textContent(".msg.assistant")).length > meta.length, "the reply streamed text");
    assert.match(await p2.textContent("#speed"), /tok\/s on CPU/);

    // --- the example embedding page.
    await p2.goto(`${base}/play/example/?model=/models/default/file`);
    await p2.waitForFunction(() => window.exampleDone === true, null, { timeout: LONG });
    const out = await p2.textContent("#out");
    assert.ok(out.trim().length > 0, "the example streamed text");
    log("example said", JSON.stringify(out));
  } finally {
    await browser.close();
  }
  console.log(JSON.stringify({ ok: true, tokens: native.tokens, reference_prefix: refTokens, ...figures }));
} finally {
  if (ctx) await ctx.close().catch(() => {});
  server.kill();
  rmSync(profile, { recursive: true, force: true });
}
