// Markdown to safe HTML: marked parses, highlight.js colours code, DOMPurify sanitizes the
// result (model output is untrusted: raw HTML in it must never run).

import { Marked } from "./vendor/marked-18.2.1.esm.js";
import DOMPurify from "./vendor/purify-3.5.0.es.mjs";
import hljs from "./vendor/highlight-11.12.0.min.js";

const escapeHtml = (s) =>
  s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);

const marked = new Marked({
  gfm: true,
  breaks: false,
  renderer: {
    code({ text, lang }) {
      const language = (lang || "").trim().split(/\s+/)[0];
      let body;
      if (language && hljs.getLanguage(language)) {
        body = hljs.highlight(text, { language, ignoreIllegals: true }).value;
      } else {
        body = escapeHtml(text);
      }
      const cls = language ? ` language-${escapeHtml(language)}` : "";
      return `<pre><code class="hljs${cls}">${body}</code></pre>\n`;
    },
  },
});

/** Sanitized HTML for markdown text. */
export function renderMarkdown(text) {
  const html = marked.parse(text || "");
  return DOMPurify.sanitize(html, { USE_PROFILES: { html: true } });
}

async function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) {
    await navigator.clipboard.writeText(text);
    return;
  }
  // Plain http on another host has no clipboard API: the old selection way still works.
  const ta = document.createElement("textarea");
  ta.value = text;
  ta.setAttribute("readonly", "");
  ta.style.position = "fixed";
  ta.style.opacity = "0";
  document.body.appendChild(ta);
  ta.select();
  document.execCommand("copy");
  ta.remove();
}

/** A button that copies what `get()` returns, showing "Copied" for a moment. */
export function copyButton(label, get) {
  const b = document.createElement("button");
  b.type = "button";
  b.className = "copy";
  b.textContent = "Copy";
  b.setAttribute("aria-label", label);
  b.addEventListener("click", async () => {
    try {
      await copyText(get());
      b.textContent = "Copied";
    } catch {
      b.textContent = "Copy failed";
    }
    setTimeout(() => (b.textContent = "Copy"), 1500);
  });
  return b;
}

/** Puts rendered markdown into `el` and gives each code block a copy button. */
export function fillMarkdown(el, text) {
  el.innerHTML = renderMarkdown(text);
  for (const pre of el.querySelectorAll("pre")) {
    const code = pre.querySelector("code");
    const wrap = document.createElement("div");
    wrap.className = "code-block";
    pre.replaceWith(wrap);
    wrap.append(copyButton("Copy code", () => (code || pre).textContent), pre);
  }
}
