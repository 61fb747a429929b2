// The server's chat-UI protocol, as the page uses it: /api/models, /api/sessions, /api/upload
// and the /api/ui/chat SSE stream (the unambiguous form of /api/chat: the page names a model,
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

// When the server requires API keys (docs/admin.md), a call answered 401 asks for a key once,
// keeps it in this browser's localStorage and retries with it as a Bearer token.
const KEY = "weft-api-key";

async function call(url, init = {}) {
  const send = () => {
    const key = localStorage.getItem(KEY);
    const headers = new Headers(init.headers || {});
    if (key) headers.set("Authorization", `Bearer ${key}`);
    return fetch(url, { ...init, headers });
  };
  let r = await send();
  if (r.status === 401) {
    const key = window.prompt("This server needs an API key (ask its administrator):");
    if (key && key.trim()) {
      localStorage.setItem(KEY, key.trim());
      r = await send();
    }
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
