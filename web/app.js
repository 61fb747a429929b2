// The in-browser inference page: model picking and loading, streaming chat, settings.
// The engine runs in a Web Worker (pkg/weft.js); `window.weft` exposes it for scripting.

import { Weft } from "./pkg/weft.js";

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
let weft = null;
let created = null; // the backend choice `weft` was created with
let history = [];
let busy = false;
let controller = null;

function setStatus(text, state = "") {
  $("status-text").textContent = text;
  $("dot").className = "dot " + state;
}

function notice(text, error = false) {
  const n = $("notice");
  n.hidden = !text;
  n.textContent = text || "";
  n.className = "notice" + (error ? " err" : "");
}

const mib = (b) => (b / 1048576).toFixed(1) + " MiB";
const PHASES = { download: "Downloading", cache: "Reading from browser cache", read: "Reading file",
  upload: "Uploading weights", compile: "Compiling shaders" };

function progress({ phase, loaded, total }) {
  $("progress").hidden = false;
  const fill = $("fill");
  const bytes = phase === "download" || phase === "cache" || phase === "read";
  if (total > 0) {
    fill.classList.remove("indeterminate");
    fill.style.width = Math.min(100, (100 * loaded) / total).toFixed(1) + "%";
  } else {
    fill.classList.add("indeterminate");
  }
  const what = bytes ? `${mib(loaded)}${total ? " / " + mib(total) : ""}`
    : phase === "upload" ? `${loaded} / ${total} tensors` : loaded >= total ? "done" : "…";
  $("progress-text").textContent = `${PHASES[phase] || phase}: ${what}`;
  setStatus(PHASES[phase] || phase, "busy");
}

function showFacts(info) {
  const rows = [["Backend", info.backend === "webgpu" ? "WebGPU" : `CPU (wasm${info.simd128 ? " SIMD" : ""}, 1 thread)`]];
  if (info.adapter) {
    rows.push(["Adapter", info.adapter.name || "(unnamed)"]);
    rows.push(["Device", `${info.adapter.deviceType} · ${info.adapter.backend}`]);
    rows.push(["Max binding", mib(info.adapter.maxStorageBufferBindingSize)]);
    const used = [info.features?.subgroups && "subgroups", info.features?.shaderF16 && "shader-f16"];
    rows.push(["Features", used.filter(Boolean).join(", ") || "none"]);
  }
  if (info.model) {
    rows.push(["Model", info.model.name]);
    rows.push(["Arch", `${info.model.architecture}, ${info.model.layers} layers`]);
    rows.push(["Size", mib(info.model.fileSize)]);
    rows.push(["Context", `${info.model.contextSize} tokens`]);
  }
  if (info.source) rows.push(["Loaded from", info.source]);
  $("facts").innerHTML = "";
  for (const [k, v] of rows) {
    const dt = document.createElement("dt");
    dt.textContent = k;
    const dd = document.createElement("dd");
    dd.textContent = v;
    $("facts").append(dt, dd);
  }
}

async function engine() {
  const want = $("backend").value;
  if (weft && created === want) return weft;
  weft?.terminate();
  weft = null;
  setStatus("starting engine…", "busy");
  // ?subgroups=0 / ?f16=0 turn those WebGPU features off (same results, for comparison).
  weft = await Weft.create({
    backend: want,
    subgroups: params.get("subgroups") !== "0",
    shaderF16: params.get("f16") !== "0",
  });
  window.weft = weft;
  created = want;
  showFacts(weft.info);
  return weft;
}

async function listServed() {
  try {
    const r = await fetch("/models");
    if (!r.ok) return;
    const { models } = await r.json();
    const sel = $("served");
    sel.innerHTML = "";
    for (const m of models) {
      const o = document.createElement("option");
      o.value = new URL(m.url, location.href).href;
      o.textContent = `${m.name} (${mib(m.size)})`;
      sel.append(o);
    }
    const none = document.createElement("option");
    none.value = "";
    none.textContent = "(none)";
    sel.append(none);
  } catch {
    /* not served by weft serve: URL or file only */
  }
}

async function load() {
  if (busy) return;
  busy = true;
  $("load").disabled = true;
  notice("");
  try {
    const e = await engine();
    const file = $("file").files[0];
    const url = $("url").value.trim() || $("served").value;
    const source = file || url;
    if (!source) throw new Error("pick a served model, enter a URL or choose a file");
    const info = await e.load(source, { onProgress: progress });
    window.weftLoad = info;
    showFacts(info);
    if (info.notice) notice(info.notice);
    $("progress-text").textContent = `Ready (${info.source === "cache" ? "from browser cache" : "from " + info.source})`;
    $("fill").style.width = "100%";
    setStatus(`ready · ${info.model.name}`, "ok");
    history = [];
    $("messages").replaceChildren();
    for (const id of ["prompt", "send", "new-chat"]) $(id).disabled = false;
    $("prompt").placeholder = "Message the model (Enter to send, Shift+Enter for a new line)";
    $("prompt").focus();
  } catch (err) {
    notice(err.message, true);
    setStatus("error", "err");
  } finally {
    busy = false;
    $("load").disabled = false;
  }
}

function bubble(role, text) {
  const d = document.createElement("div");
  d.className = "msg " + role;
  d.textContent = text;
  $("messages").append(d);
  d.scrollIntoView({ block: "end" });
  return d;
}

function options() {
  const seed = $("seed").value.trim();
  return {
    temperature: Number($("temperature").value),
    topK: Number($("top-k").value),
    topP: Number($("top-p").value),
    repeatPenalty: Number($("repeat").value),
    maxTokens: Number($("max-tokens").value) || 256,
    ...(seed ? { seed: Number(seed) } : {}),
  };
}

async function send(ev) {
  ev?.preventDefault();
  const text = $("prompt").value.trim();
  if (!text || busy || !weft) return;
  busy = true;
  $("prompt").value = "";
  $("send").hidden = true;
  $("stop").hidden = false;
  history.push({ role: "user", content: text });
  bubble("user", text);
  const out = bubble("assistant", "");
  out.classList.add("streaming");
  const sys = $("system").value.trim();
  const msgs = sys ? [{ role: "system", content: sys }, ...history] : history;
  controller = new AbortController();
  setStatus("generating…", "busy");
  const t0 = performance.now();
  let n = 0;
  const gen = weft.chat(msgs, { ...options(), signal: controller.signal });
  try {
    for await (const delta of gen) {
      out.textContent += delta;
      n++;
      const s = (performance.now() - t0) / 1000;
      $("speed").textContent = `${n} chunks · ${(n / s).toFixed(1)}/s`;
      out.scrollIntoView({ block: "end" });
    }
    const r = await gen.result;
    history.push({ role: "assistant", content: r.text });
    const meta = document.createElement("span");
    meta.className = "meta";
    meta.textContent = `${r.usage.completionTokens} tokens · ${r.timings.tokensPerS.toFixed(1)} tok/s · prompt ${r.usage.promptTokens} tokens (${r.usage.cachedPromptTokens} cached) at ${r.timings.promptTokensPerS.toFixed(1)} tok/s · ${r.finishReason}`;
    out.append(meta);
    $("speed").textContent = `${r.timings.tokensPerS.toFixed(1)} tok/s on ${weft.backend === "webgpu" ? "WebGPU" : "CPU"}`;
    setStatus(`ready · ${weft.info.model.name}`, "ok");
  } catch (err) {
    out.classList.add("error");
    out.textContent += (out.textContent ? "\n" : "") + err.message;
    history.pop();
    setStatus("error", "err");
  } finally {
    out.classList.remove("streaming");
    busy = false;
    controller = null;
    $("send").hidden = false;
    $("stop").hidden = true;
  }
}

for (const [id, digits] of [["temperature", 2], ["top-k", 0], ["top-p", 2], ["repeat", 2]]) {
  const show = () => ($(`${id}-v`).textContent = Number($(id).value).toFixed(digits));
  $(id).addEventListener("input", show);
  show();
}
$("load").addEventListener("click", load);
$("composer").addEventListener("submit", send);
$("prompt").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) send(e);
});
$("stop").addEventListener("click", () => controller?.abort());
$("new-chat").addEventListener("click", async () => {
  history = [];
  $("messages").replaceChildren();
  await weft?.reset();
});
$("clear-cache").addEventListener("click", async () => {
  const e = await engine();
  await e.clearCache();
  notice("Cached models deleted.");
});

// ?backend=webgpu|cpu|auto preselects the backend; ?model=URL loads that model at once;
// ?subgroups=0, ?f16=0 turn those WebGPU features off.
if (params.get("backend")) $("backend").value = params.get("backend");
await listServed();
if (params.get("model")) $("url").value = params.get("model");
if (!("gpu" in navigator)) notice("This browser has no WebGPU: models run on the CPU (slower).");
setStatus("pick a model", "");
window.weftPage = { load, engine };
if (params.get("model") || params.get("autoload")) load();
