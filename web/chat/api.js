// The server's chat-UI protocol, as the page uses it: /api/models, /api/sessions, /api/upload,
// /uploads/{name} (attached images shown back) and the /api/ui/chat SSE stream (the unambiguous form of /api/chat: the page names a model,
// and a chat body with `model` would otherwise be read as an Ollama request).

async function errorText(r) {
  const body = await r.text();
  try {
    const j = JSON.parse(body);
    if (typeof j.error === "string") return j.error;
    if (j.error && j.error.message) return j.error.message;
  } catch { /* not JSON: the text itself */ }
  return body || `${r.status} ${r.statusText}`;
}

// When the server requires keys (docs/admin.md), a call answered 401 opens the sign-in dialog:
// a user signs in with name and password (the server sets an HttpOnly session cookie and
// returns a CSRF token, sent as X-CSRF-Token on every state change), or pastes an API key,
// kept in this browser's localStorage and sent as a Bearer token. Then the call is retried.
const KEY = "weft-api-key";
const CSRF = "weft-csrf";

function headersFor(init) {
  const headers = new Headers(init.headers || {});
  const key = localStorage.getItem(KEY);
  const method = (init.method || "GET").toUpperCase();
  if (key) headers.set("Authorization", `Bearer ${key}`);
  else if (!["GET", "HEAD"].includes(method) && sessionStorage.getItem(CSRF)) {
    headers.set("X-CSRF-Token", sessionStorage.getItem(CSRF));
  }
  return headers;
}

/** Signs in with a name and password; resolves to an error message, or null on success. */
async function signInWithPassword(name, password) {
  const r = await fetch("/api/login", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ name, password }),
  });
  if (!r.ok) return errorText(r);
  sessionStorage.setItem(CSRF, (await r.json()).csrfToken);
  localStorage.removeItem(KEY);
  return null;
}

/** The CSRF token of a sign-in made before this page loaded, if the cookie is still good. */
async function restoreSession() {
  if (localStorage.getItem(KEY)) return false;
  const r = await fetch("/api/login");
  if (!r.ok) return false;
  sessionStorage.setItem(CSRF, (await r.json()).csrfToken);
  return true;
}

/** Shows the sign-in dialog once for all the calls answered 401 meanwhile; resolves to true
 * once signed in (or given a key). */
let asking = null;
function signIn() {
  if (!asking) asking = ask().finally(() => { asking = null; });
  return asking;
}

function ask() {
  const dialog = document.getElementById("sign-in");
  if (!dialog || !dialog.showModal) {
    const key = window.prompt("This server needs an API key (ask its administrator):");
    if (!key || !key.trim()) return Promise.resolve(false);
    localStorage.setItem(KEY, key.trim());
    return Promise.resolve(true);
  }
  const $ = (id) => document.getElementById(id);
  return new Promise((resolve) => {
    const error = (msg) => {
      $("sign-in-error").textContent = msg;
      $("sign-in-error").hidden = !msg;
    };
    const done = (ok) => {
      $("sign-in-form").onsubmit = null;
      $("sign-in-cancel").onclick = null;
      dialog.close();
      resolve(ok);
    };
    error("");
    $("sign-in-form").onsubmit = async (e) => {
      e.preventDefault();
      const key = $("sign-in-key").value.trim();
      if (key) {
        localStorage.setItem(KEY, key);
        sessionStorage.removeItem(CSRF);
        return done(true);
      }
      const msg = await signInWithPassword($("sign-in-name").value.trim(), $("sign-in-password").value);
      $("sign-in-password").value = "";
      if (msg) return error(msg);
      done(true);
    };
    $("sign-in-cancel").onclick = () => done(false);
    dialog.showModal();
  });
}

async function call(url, init = {}) {
  const send = () => fetch(url, { ...init, headers: headersFor(init) });
  let r = await send();
  if (r.status === 401 || (r.status === 403 && !localStorage.getItem(KEY) && !sessionStorage.getItem(CSRF))) {
    // A reload lost the CSRF token of a live sign-in: fetch it; otherwise ask.
    if ((await restoreSession()) || (r.status === 401 && (await signIn()))) r = await send();
  }
  return r;
}

async function json(url, init) {
  const r = await call(url, init);
  if (!r.ok) {
    const e = new Error(await errorText(r));
    e.status = r.status;
    throw e;
  }
  return r.json();
}

export const listModels = () => json("/api/models");

export const createSession = async () => (await json("/api/sessions", { method: "POST" })).sessionId;

/** The session's conversation, or null when the server does not know it (it restarted). */
export async function sessionHistory(id) {
  try {
    return (await json(`/api/sessions/${encodeURIComponent(id)}`)).messages;
  } catch (e) {
    if (e.status === 404) return null;
    throw e;
  }
}

export async function deleteSession(id) {
  const r = await call(`/api/sessions/${encodeURIComponent(id)}`, { method: "DELETE" });
  if (!r.ok && r.status !== 404) throw new Error(await errorText(r));
}

/** Uploads files for a session; resolves to the reply's `files`. */
export async function upload(files, sessionId) {
  const form = new FormData();
  form.append("sessionId", sessionId);
  for (const f of files) form.append("file", f, f.name);
  const reply = await json("/api/upload", { method: "POST", body: form });
  return reply.files || [reply];
}

/** An upload's bytes (`url` from the upload reply) as an object URL for an <img>: the request
 * goes through `call` so it carries the API key, which an <img src> could not send. */
export async function blobUrl(url) {
  const r = await call(url);
  if (!r.ok) throw new Error(await errorText(r));
  return URL.createObjectURL(await r.blob());
}

/**
 * Streams one chat request; calls onFrame(frame) for every `data:` JSON frame. Resolves when
 * the stream ends; rejects with an AbortError when `signal` aborts it.
 */
export async function streamChat(body, signal, onFrame) {
  const r = await call("/api/ui/chat", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
    signal,
  });
  if (!r.ok) throw new Error(await errorText(r));
  const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value;
    let cut;
    while ((cut = buf.indexOf("\n\n")) >= 0) {
      const event = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      const data = event
        .split("\n")
        .filter((l) => l.startsWith("data:"))
        .map((l) => l.slice(5).trimStart())
        .join("\n");
      if (!data) continue;
      let frame;
      try {
        frame = JSON.parse(data);
      } catch {
        continue; // a frame that is not JSON carries nothing the page shows
      }
      onFrame(frame);
    }
  }
}
