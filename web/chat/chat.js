// The chat page: sessions, model picker, streamed markdown, attachments, sampling settings.
//
// Where state lives: the browser keeps only the list of chats (server session id, title,
// model) in localStorage; each conversation lives on the server (its chat-UI session) and is
// read back with GET /api/sessions/{id} after a reload. Every request sends the whole
// conversation with `newChat: true`, so the server's copy is exactly what the page shows,
// including after a stop, a regenerate or an edit. Files are sent by name (`textFilePaths`):
// the server inlines their text, so the page never sends file contents itself. Images go the
// same way (`imagePaths`): a picture, a video's sampled frames (with `isVideo: true`) or a
// scanned PDF's rendered pages, all uploads of the session; they are offered only when the
// picked model has a vision projector (`projector` in /api/models).

import * as api from "./api.js";
import { fillMarkdown, copyButton } from "./markdown.js";

const $ = (id) => document.getElementById(id);
const STORE = "weft.chat.v1";
const FILE_BLOCK = /\[File: ([^\]\n]+)\]\n[\s\S]*?\n\[End of file\]\n*/g;

const state = {
  chats: [], // {id, title, model}
  current: null, // id
  messages: [], // {role, text, files: [{fileName, file}], images: [{fileName, file?, url}],
  //             video?, wire?, thinking, tools, stats, error}
  models: [],
  defaultModel: null,
  defaultProjector: null, // /api/models' `projector` of the default model
  pending: [], // attachments not yet sent: upload replies
  controller: null,
};

// ---------- persistence

function load() {
  try {
    const s = JSON.parse(localStorage.getItem(STORE) || "{}");
    state.chats = Array.isArray(s.chats) ? s.chats : [];
    state.current = s.current || null;
    const set = s.settings || {};
    $("temperature").value = set.temperature ?? "";
    $("top-p").value = set.topP ?? "";
    $("max-tokens").value = set.maxTokens ?? "";
    if (s.theme) applyTheme(s.theme);
  } catch {
    state.chats = [];
  }
}

function save() {
  const s = {
    chats: state.chats,
    current: state.current,
    theme: document.documentElement.dataset.theme || null,
    settings: {
      temperature: $("temperature").value,
      topP: $("top-p").value,
      maxTokens: $("max-tokens").value,
    },
  };
  localStorage.setItem(STORE, JSON.stringify(s));
}

const chat = () => state.chats.find((c) => c.id === state.current);

// ---------- theme

function applyTheme(t) {
  document.documentElement.dataset.theme = t;
  $("hljs-light").disabled = t === "dark";
  $("hljs-dark").disabled = t !== "dark";
}

function initialTheme() {
  if (!document.documentElement.dataset.theme) {
    applyTheme(matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light");
  }
}

// ---------- notices

function notice(text) {
  const n = $("notice");
  n.textContent = text || "";
  n.hidden = !text;
}

// ---------- sessions list

function renderSessions() {
  const ul = $("sessions");
  ul.replaceChildren();
  for (const c of state.chats) {
    const li = document.createElement("li");
    if (c.id === state.current) li.className = "current";
    const title = document.createElement("button");
    title.type = "button";
    title.className = "title";
    title.textContent = c.title || "New chat";
    title.title = c.title || "New chat";
    if (c.id === state.current) title.setAttribute("aria-current", "true");
    title.addEventListener("click", () => switchTo(c.id));
    const rename = document.createElement("button");
    rename.type = "button";
    rename.className = "act";
    rename.textContent = "\u270e";
    rename.setAttribute("aria-label", `Rename chat ${c.title || "New chat"}`);
    rename.addEventListener("click", () => startRename(li, c));
    const del = document.createElement("button");
    del.type = "button";
    del.className = "act";
    del.textContent = "\u2715";
    del.setAttribute("aria-label", `Delete chat ${c.title || "New chat"}`);
    del.addEventListener("click", () => removeChat(c.id));
    li.append(title, rename, del);
    ul.append(li);
  }
}

function startRename(li, c) {
  const input = document.createElement("input");
  input.value = c.title || "";
  input.setAttribute("aria-label", "New chat title");
  li.replaceChildren(input);
  input.focus();
  input.select();
  let done = false;
  const finish = (keep) => {
    if (done) return;
    done = true;
    if (keep && input.value.trim()) c.title = input.value.trim().slice(0, 120);
    save();
    renderSessions();
  };
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter") finish(true);
    if (e.key === "Escape") finish(false);
  });
  input.addEventListener("blur", () => finish(true));
}

async function newChat() {
  stop();
  const id = await api.createSession();
  state.chats.unshift({ id, title: "", model: $("model").value || state.defaultModel });
  state.current = id;
  state.messages = [];
  state.pending = [];
  save();
  renderSessions();
  renderAttachments();
  renderMessages();
  closeSidebar();
  $("input").focus();
}

async function removeChat(id) {
  if (id === state.current) stop();
  try {
    await api.deleteSession(id);
  } catch (e) {
    notice(`Deleting the chat failed: ${e.message}`);
    return;
  }
  state.chats = state.chats.filter((c) => c.id !== id);
  if (state.current === id) {
    state.current = null;
    state.messages = [];
    if (state.chats.length) await switchTo(state.chats[0].id);
    else await newChat();
  }
  save();
  renderSessions();
}

/** A stored conversation message as the page shows it (file blocks become chips). */
function fromServer(m) {
  const parts = Array.isArray(m.content) ? m.content : null;
  const text = typeof m.content === "string" ? m.content
    : parts ? parts.map((p) => p.text || "").filter(Boolean).join("\n") : "";
  if (m.role !== "user") return { role: m.role, text, files: [], wire: text };
  const files = [];
  const shown = text.replace(FILE_BLOCK, (_, name) => {
    files.push({ fileName: name });
    return "";
  });
  // Images the server attached (content parts holding them as data: URIs): shown, and sent
  // again as they are, so later turns still see them.
  const images = (parts || [])
    .filter((p) => p.type === "image_url" && p.image_url && p.image_url.url)
    .map((p, i) => ({ fileName: `image ${i + 1}`, url: p.image_url.url }));
  return { role: "user", text: shown.trim(), files, images, wire: images.length ? parts : text };
}

async function switchTo(id) {
  stop();
  state.current = id;
  state.pending = [];
  const c = chat();
  if (c && c.model && state.models.some((m) => m.name === c.model)) $("model").value = c.model;
  notice("");
  let history = null;
  try {
    history = await api.sessionHistory(id);
  } catch (e) {
    notice(`Could not read the chat: ${e.message}`);
  }
  if (history === null && c) {
    // The server no longer knows the session (it restarted): keep the chat's entry with a
    // fresh session.
    c.id = await api.createSession();
    state.current = c.id;
    notice("The server has restarted since this chat was used: its history is gone.");
  }
  state.messages = (history || [])
    .filter((m) => m.role === "user" || m.role === "assistant")
    .map(fromServer);
  save();
  renderSessions();
  renderAttachments();
  renderMessages();
  closeSidebar();
}

// ---------- models

async function loadModels() {
  const sel = $("model");
  try {
    const info = await api.listModels();
    state.models = (info.models || []).filter((m) => !m.broken);
    state.defaultModel = info.model;
    state.defaultProjector = info.projector || null;
    sel.replaceChildren(
      ...state.models.map((m) => {
        const o = document.createElement("option");
        o.value = m.name;
        o.textContent = m.name + (m.name === info.model ? " (default)" : "");
        return o;
      }),
    );
    const c = chat();
    sel.value = c && state.models.some((m) => m.name === c.model) ? c.model : info.model || "";
  } catch (e) {
    notice(`Could not list the models: ${e.message}`);
  }
}

/** Whether `name` (a served model) reads images: it has a vision projector. */
function hasVision(name) {
  const m = state.models.find((x) => x.name === name);
  if (m && "projector" in m) return !!m.projector;
  return name === state.defaultModel && !!state.defaultProjector;
}

const noVision = (name) =>
  `${name || "This model"} has no vision projector: it cannot read images, video or scanned PDF pages. ` +
  "Pick a vision model (one served with --mmproj), or remove the images.";

// ---------- messages

let renderQueued = null;

function renderMessages() {
  const box = $("messages");
  box.replaceChildren(...state.messages.map((m, i) => messageEl(m, i)));
  box.scrollTop = box.scrollHeight;
}

/** Re-renders the last message at most once per frame while tokens stream in. */
function renderLast() {
  if (renderQueued) return;
  renderQueued = requestAnimationFrame(() => {
    renderQueued = null;
    const box = $("messages");
    const i = state.messages.length - 1;
    const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
    const old = box.lastElementChild;
    const el = messageEl(state.messages[i], i);
    if (old && old.dataset.index === String(i)) old.replaceWith(el);
    else box.append(el);
    if (atBottom) box.scrollTop = box.scrollHeight;
  });
}

function chipsEl(files) {
  const div = document.createElement("div");
  div.className = "files";
  for (const f of files) {
    const s = document.createElement("span");
    s.className = "chip";
    s.textContent = f.fileName;
    div.append(s);
  }
  return div;
}

// Object URLs of the uploads shown, by upload URL: a re-render does not fetch them again.
const blobs = new Map();

/** An <img> of an attached image: `url` is an upload's URL or a `data:` URI from the history. */
function imageEl(img, className) {
  const el = document.createElement("img");
  el.className = className;
  el.alt = img.fileName || "image";
  el.title = img.fileName || "";
  el.loading = "lazy";
  if (img.url.startsWith("data:")) {
    el.src = img.url;
    return el;
  }
  if (!blobs.has(img.url)) blobs.set(img.url, api.blobUrl(img.url));
  blobs.get(img.url).then(
    (u) => { el.src = u; },
    () => { blobs.delete(img.url); el.alt = `${el.alt} (no longer on the server)`; },
  );
  return el;
}

function imagesEl(images) {
  const div = document.createElement("div");
  div.className = "images";
  for (const img of images) div.append(imageEl(img, "att-img"));
  return div;
}

function button(text, label, onClick) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = text;
  b.setAttribute("aria-label", label);
  b.addEventListener("click", onClick);
  return b;
}

function messageEl(m, i) {
  const el = document.createElement("div");
  el.className = `msg ${m.role}`;
  el.dataset.index = String(i);
  const who = document.createElement("div");
  who.className = "who";
  who.textContent = m.role === "user" ? "You" : m.model || "Assistant";
  const bubble = document.createElement("div");
  bubble.className = "bubble";
  el.append(who, bubble);
  const busy = !!state.controller;
  const last = i === state.messages.length - 1;
  if (m.role === "user") {
    if (m.editing) return editEl(el, bubble, m, i);
    if (m.files && m.files.length) bubble.append(chipsEl(m.files));
    if (m.images && m.images.length) bubble.append(imagesEl(m.images));
    bubble.append(document.createTextNode(m.text));
    const actions = document.createElement("div");
    actions.className = "actions";
    const edit = button("Edit", "Edit message", () => {
      m.editing = true;
      renderMessages();
    });
    edit.disabled = busy;
    actions.append(edit);
    el.append(actions);
    return el;
  }
  if (m.thinking) {
    const d = document.createElement("details");
    d.className = "thinking";
    d.open = !!m.thinkingOpen;
    d.addEventListener("toggle", () => (m.thinkingOpen = d.open));
    const s = document.createElement("summary");
    s.textContent = m.streaming && !m.text ? "Thinking\u2026" : "Thoughts";
    const body = document.createElement("div");
    body.textContent = m.thinking;
    d.append(s, body);
    bubble.append(d);
  }
  if (m.tools && m.tools.length) {
    const t = document.createElement("div");
    t.className = "tools";
    t.setAttribute("aria-label", "Tool activity");
    for (const line of m.tools.slice(-6)) {
      const row = document.createElement("div");
      row.textContent = line;
      t.append(row);
    }
    bubble.append(t);
  }
  if (m.status) {
    const s = document.createElement("div");
    s.className = "status";
    s.textContent = m.status;
    bubble.append(s);
  }
  const md = document.createElement("div");
  md.className = "md";
  fillMarkdown(md, m.text);
  bubble.append(md);
  if (m.error) {
    const e = document.createElement("div");
    e.className = "error";
    e.setAttribute("role", "alert");
    e.textContent = m.error;
    bubble.append(e);
  }
  if (m.stats) {
    const s = document.createElement("div");
    s.className = "stats";
    s.textContent = m.stats;
    el.append(s);
  }
  if (!m.streaming) {
    const actions = document.createElement("div");
    actions.className = "actions";
    actions.append(copyButton("Copy answer", () => m.text));
    if (last) {
      const regen = button("Regenerate", "Regenerate answer", () => regenerate());
      regen.disabled = busy;
      actions.append(regen);
    }
    el.append(actions);
  }
  return el;
}

function editEl(el, bubble, m, i) {
  const ta = document.createElement("textarea");
  ta.className = "edit";
  ta.value = m.text;
  ta.setAttribute("aria-label", "Edit message");
  const actions = document.createElement("div");
  actions.className = "actions";
  const send = button("Save & send", "Save and send edited message", () => {
    m.editing = false;
    m.text = ta.value;
    m.wire = null; // the text changed: rebuild what is sent from the text and the files
    state.messages = state.messages.slice(0, i + 1);
    generate();
  });
  send.className = "primary";
  const cancel = button("Cancel", "Cancel editing", () => {
    m.editing = false;
    renderMessages();
  });
  actions.append(send, cancel);
  ta.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      send.click();
    }
  });
  bubble.append(ta);
  el.append(actions);
  setTimeout(() => ta.focus(), 0);
  return el;
}

// ---------- attachments

/** What a pending attachment adds to the message: its text file, or its images. */
function pendingImages(f) {
  if (f.frames) {
    return f.frames.map((file, k) => ({
      fileName: `${f.fileName} ${f.kind === "video" ? "frame" : "page"} ${k + 1}`,
      file,
      url: f.frameUrls[k],
    }));
  }
  return f.kind === "image" ? [{ fileName: f.fileName, file: f.file, url: f.url }] : [];
}

function renderAttachments() {
  const ul = $("attachments");
  ul.replaceChildren(
    ...state.pending.map((f, i) => {
      const li = document.createElement("li");
      const images = pendingImages(f);
      li.className = "chip" + (f.warning ? " warn" : "") + (images.length ? " has-thumb" : "");
      if (images.length) li.append(imageEl(images[0], "thumb"));
      const count = f.frames ? ` (${f.frames.length} ${f.kind === "video" ? "frames" : "pages"})` : "";
      li.append(f.fileName + (f.textLength != null && !images.length ? ` (${f.textLength} chars)` : count));
      if (f.warning) li.title = f.warning;
      li.append(button("\u2715", `Remove attachment ${f.fileName}`, () => {
        state.pending.splice(i, 1);
        renderAttachments();
      }));
      return li;
    }),
  );
}

async function attach(files) {
  files = [...files];
  if (!files.length) return;
  if (!state.current) await newChat();
  notice(`Uploading ${files.map((f) => f.name).join(", ")}\u2026`);
  try {
    const got = await api.upload(files, state.current);
    // Text (and PDFs' text layers), images, a video's frames and a scan's pages are kept; the
    // rest (a scan without a vision model, say) is only explained.
    const usable = (f) => f.textContent || pendingImages(f).length;
    const refused = got.filter((f) => !usable(f));
    const kept = got.filter(usable);
    state.pending.push(...kept);
    const model = $("model").value;
    const lines = refused.map((f) => `${f.fileName}: ${f.warning || "the chat cannot use it"}`);
    if (kept.some((f) => pendingImages(f).length) && !hasVision(model)) lines.push(noVision(model));
    notice(lines.join(" "));
  } catch (e) {
    notice(`Upload failed: ${e.message}`);
  }
  renderAttachments();
}

// ---------- generating

function settings() {
  const num = (id) => {
    const v = $(id).value.trim();
    return v === "" || Number.isNaN(Number(v)) ? undefined : Number(v);
  };
  return { temperature: num("temperature"), topP: num("top-p"), maxTokens: num("max-tokens") };
}

function wire(m) {
  if (m.wire) return { role: m.role, content: m.wire };
  const out = { role: m.role, content: m.text };
  const names = (m.files || []).map((f) => f.file).filter(Boolean);
  if (names.length) out.textFilePaths = names;
  const images = (m.images || []).map((f) => f.file).filter(Boolean);
  if (images.length) out.imagePaths = images;
  if (images.length && m.video) out.isVideo = true;
  // Images read back from the history (an edited message) have no upload name: their data.
  const inline = (m.images || []).filter((f) => !f.file);
  if (inline.length) {
    out.content = [
      ...inline.map((f) => ({ type: "image_url", image_url: { url: f.url } })),
      { type: "text", text: m.text },
    ];
  }
  return out;
}

function setBusy(busy) {
  $("send").hidden = busy;
  $("stop").hidden = !busy;
  // Screen readers announce the answer once it is complete, not every streamed token.
  $("messages").setAttribute("aria-busy", String(busy));
}

function describeTool(f) {
  if (f.tool_calls) {
    return f.tool_calls
      .map((c) => `\u2192 call ${c.name || (c.function && c.function.name) || "tool"}(${JSON.stringify(c.arguments ?? (c.function && c.function.arguments) ?? {})})`)
      .join("\n");
  }
  if (f.tool_progress) return `\u2699 ${f.tool || "tool"}: ${f.tool_progress}${f.detail ? ` (${f.detail})` : ""}`;
  if (f.skill_step) return `${f.ok === false ? "\u2717" : "\u2713"} ${f.skill_step}${f.skill ? ` ${f.skill}` : ""}${f.detail ? `: ${f.detail}` : ""}`;
  return null;
}

function statsLine(f) {
  const parts = [`${f.tokenCount} tokens`, `${Number(f.tokPerSec).toFixed(1)} tok/s`];
  if (f.promptTokens) {
    parts.push(`prompt ${f.promptTokens} tokens, ${Math.round(f.kvReusePercent)}% cached`);
  }
  parts.push(`${Number(f.elapsed).toFixed(1)} s`);
  if (f.finishReason === "length") parts.push("stopped at the token limit");
  return parts.join(" \u00b7 ");
}

async function generate() {
  const c = chat();
  if (!c) return;
  const model = $("model").value || undefined;
  c.model = model;
  const reply = { role: "assistant", text: "", thinking: "", tools: [], streaming: true, model, status: "Waiting for the model\u2026" };
  const conversation = state.messages.map(wire);
  state.messages.push(reply);
  const controller = new AbortController();
  state.controller = controller;
  setBusy(true);
  renderMessages();
  const s = settings();
  const body = {
    model,
    sessionId: c.id,
    newChat: true,
    messages: conversation,
    maxTokens: s.maxTokens,
    temperature: s.temperature,
    topP: s.topP,
  };
  try {
    await api.streamChat(body, controller.signal, (f) => {
      if (f.queue_position != null) {
        reply.status = `Queued: position ${f.queue_position}` + (f.queue_pending != null ? ` of ${f.queue_pending}` : "");
      } else if (f.token != null) {
        reply.status = null;
        reply.text += f.token;
      } else if (f.replace != null) {
        reply.status = null;
        reply.text = f.replace;
      } else if (f.thinking != null) {
        reply.status = null;
        reply.thinking += f.thinking;
      } else if (f.done) {
        reply.status = null;
        if (f.error) reply.error = f.error;
        else reply.stats = statsLine(f) + (f.aborted ? " \u00b7 stopped" : "");
      } else {
        const line = describeTool(f);
        if (line) {
          // One progress line (writing, running) at a time; it goes when the call finishes,
          // and the call's result line (skill_step) stays.
          if (f.tool_progress) reply.tools = reply.tools.filter((t) => !t.startsWith("\u2699"));
          if (f.tool_progress !== "finished") reply.tools.push(line);
        }
      }
      renderLast();
    });
  } catch (e) {
    reply.status = null;
    if (e.name === "AbortError") reply.stats = "Stopped";
    else reply.error = e.message;
  }
  reply.streaming = false;
  reply.wire = reply.text;
  if (state.controller === controller) state.controller = null;
  setBusy(false);
  if (!c.title) {
    const first = state.messages.find((m) => m.role === "user");
    const named = first && [...first.files, ...(first.images || [])][0];
    c.title = (first ? first.text || (named && named.fileName) || "" : "").slice(0, 60) || "Chat";
  }
  save();
  renderSessions();
  renderMessages();
}

function stop() {
  if (state.controller) {
    state.controller.abort();
    state.controller = null;
    setBusy(false);
  }
}

async function send() {
  if (state.controller) return;
  const text = $("input").value.trim();
  if (!text && !state.pending.length) return;
  if (!state.current) await newChat();
  const images = state.pending.flatMap(pendingImages);
  if (images.length && !hasVision($("model").value)) {
    notice(noVision($("model").value));
    return;
  }
  const files = state.pending
    .filter((f) => !pendingImages(f).length)
    .map((f) => ({ fileName: f.fileName, file: f.file }));
  // `isVideo` labels every image of the message as a frame: only when all come from videos.
  const video = images.length > 0 && state.pending.every((f) => !pendingImages(f).length || f.kind === "video");
  state.pending = [];
  renderAttachments();
  $("input").value = "";
  autosize();
  notice("");
  state.messages.push({ role: "user", text, files, images, video });
  await generate();
}

function regenerate() {
  if (state.controller) return;
  let end = state.messages.length;
  while (end > 0 && state.messages[end - 1].role !== "user") end--;
  if (!end) return;
  state.messages = state.messages.slice(0, end);
  generate();
}

// ---------- layout bits

function autosize() {
  const t = $("input");
  t.style.height = "auto";
  t.style.height = Math.min(t.scrollHeight, 200) + "px";
}

function closeSidebar() {
  $("app").classList.remove("show-sidebar");
  $("toggle-sidebar").setAttribute("aria-expanded", "false");
}

function wire_events() {
  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    send();
  });
  $("input").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      send();
    }
  });
  $("input").addEventListener("input", autosize);
  $("stop").addEventListener("click", stop);
  $("new-chat").addEventListener("click", () => newChat().catch((e) => notice(e.message)));
  $("attach").addEventListener("click", () => $("file-input").click());
  $("file-input").addEventListener("change", (e) => {
    attach(e.target.files);
    e.target.value = "";
  });
  const comp = $("composer");
  let depth = 0;
  const show = (on) => {
    comp.classList.toggle("dragging", on);
    $("drop-hint").hidden = !on;
  };
  document.addEventListener("dragenter", (e) => {
    if (!e.dataTransfer || ![...e.dataTransfer.types].includes("Files")) return;
    depth++;
    show(true);
  });
  document.addEventListener("dragleave", () => {
    depth = Math.max(0, depth - 1);
    if (!depth) show(false);
  });
  document.addEventListener("dragover", (e) => e.preventDefault());
  document.addEventListener("drop", (e) => {
    e.preventDefault();
    depth = 0;
    show(false);
    if (e.dataTransfer && e.dataTransfer.files.length) attach(e.dataTransfer.files);
  });
  $("model").addEventListener("change", () => {
    const c = chat();
    if (c) c.model = $("model").value;
    const images = state.pending.some((f) => pendingImages(f).length);
    notice(images && !hasVision($("model").value) ? noVision($("model").value) : "");
    save();
  });
  for (const id of ["temperature", "top-p", "max-tokens"]) $(id).addEventListener("change", save);
  $("toggle-settings").addEventListener("click", () => {
    const s = $("settings");
    s.hidden = !s.hidden;
    $("toggle-settings").setAttribute("aria-expanded", String(!s.hidden));
  });
  $("toggle-theme").addEventListener("click", () => {
    applyTheme(document.documentElement.dataset.theme === "dark" ? "light" : "dark");
    save();
    renderMessages();
  });
  // On a phone the chat list is a drawer over the conversation: a tap beside it closes it.
  $("main").addEventListener("click", (e) => {
    if ($("app").classList.contains("show-sidebar") && !e.target.closest("#toggle-sidebar")) closeSidebar();
  });
  $("toggle-sidebar").addEventListener("click", () => {
    const open = $("app").classList.toggle("show-sidebar");
    $("toggle-sidebar").setAttribute("aria-expanded", String(open));
  });
}

async function main() {
  load();
  initialTheme();
  wire_events();
  await loadModels();
  if (state.current && state.chats.some((c) => c.id === state.current)) await switchTo(state.current);
  else if (state.chats.length) await switchTo(state.chats[0].id);
  else await newChat();
  document.body.dataset.ready = "true";
}

main().catch((e) => notice(`The page failed to start: ${e.message}`));
