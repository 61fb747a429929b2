// Images in the chat page at `/`, in Debian's headless Chromium (playwright-core), against the
// real `weft serve` with a vision model (WEFT_VISION_MODEL served with WEFT_MMPROJ, the default)
// and a text-only one (WEFT_MODEL2):
//  a PNG attached with the button shows as a thumbnail, is sent as `imagePaths`, the answer
//  comes and its prompt holds the image's tokens, and the picture shows in the conversation
//  (also after a reload, read back from the session's history); a video's frames are sent with
//  `isVideo`; a scanned PDF attaches as its rendered pages; the text-only model gets a clear
//  notice and nothing is sent; no console errors.
// Prints one JSON line at the end ({"ok": true, "screenshots": [...]}). Exit code 0 = pass.
//
// Env: WEFT_BIN, WEFT_VISION_MODEL, WEFT_MMPROJ, WEFT_MODEL2, WEFT_IMAGE (a PNG), WEFT_VIDEO
// (a 4 s MP4), WEFT_SCAN (a PDF without a text layer), WEFT_ARTIFACTS (screenshots), CHROMIUM
// (default /usr/bin/chromium).

import { chromium } from "playwright-core";
import { spawn } from "node:child_process";
import { mkdtempSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import assert from "node:assert/strict";

const env = (k) => {
  if (!process.env[k]) throw new Error(`set ${k}`);
  return process.env[k];
};
const bin = env("WEFT_BIN");
const artifacts = process.env.WEFT_ARTIFACTS || mkdtempSync(join(tmpdir(), "weft-vision-shots-"));
const chromiumPath = process.env.CHROMIUM || "/usr/bin/chromium";
mkdirSync(artifacts, { recursive: true });
const T = 120_000; // the most one answer may take on a slow CPU
const log = (...a) => console.error("[chat-vision-test]", ...a);

const home = mkdtempSync(join(tmpdir(), "weft-vision-home-"));
const proc = spawn(bin, ["serve", "--model", `gemma=${env("WEFT_VISION_MODEL")}`, "--mmproj", env("WEFT_MMPROJ"),
  "--model", `smol=${env("WEFT_MODEL2")}`, "--ctx", "2048", "--parallel", "1", "--threads", "2",
  "--host", "127.0.0.1", "--port", "0"],
{ stdio: ["ignore", "ignore", "pipe"], env: { ...process.env, WEFT_HOME: home } });
const base = await new Promise((res, rej) => {
  let buf = "";
  const t = setTimeout(() => rej(new Error("weft serve did not start")), 120_000);
  proc.stderr.on("data", (d) => {
    buf += d;
    const m = buf.match(/listening on (http:\/\/[^\s]+)[^\n]*\n/);
    if (m) { clearTimeout(t); res(m[1].replace(/\/$/, "")); }
  });
  proc.on("exit", (c) => rej(new Error(`weft serve exited (${c}): ${buf}`)));
});
log("server", base);

const errors = [];
const shots = [];
let browser = null;
try {
  browser = await chromium.launch({ executablePath: chromiumPath, headless: true,
    args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-background-networking", "--no-first-run"] });
  const page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
  page.on("console", (m) => {
    if (m.type() === "error") errors.push(m.text());
  });
  page.on("pageerror", (e) => errors.push(`page error: ${e.message}`));
  const shot = async (name) => {
    const p = join(artifacts, `${name}.png`);
    await page.screenshot({ path: p });
    shots.push(p);
  };
  /** Waits for answer `n` to end; returns its text and stats line. */
  async function answered(n) {
    await page.waitForFunction((n) => {
      const a = document.querySelectorAll(".msg.assistant");
      return a.length === n && a[n - 1].querySelector(".stats, .error");
    }, n, { timeout: T });
    const last = page.locator(".msg.assistant").last();
    if (await last.locator(".error").count()) {
      throw new Error(`the answer failed: ${await last.locator(".error").textContent()}`);
    }
    return { text: await last.locator(".md").innerText(), stats: await last.locator(".stats").innerText() };
  }
  /** Whether every <img> matching `sel` has loaded a picture. */
  const loaded = (sel) => page.waitForFunction((sel) => {
    const imgs = [...document.querySelectorAll(sel)];
    return imgs.length > 0 && imgs.every((i) => i.complete && i.naturalWidth > 0);
  }, sel, { timeout: T });

  await page.goto(`${base}/`);
  await page.waitForSelector("body[data-ready=true]");
  assert.equal(await page.locator("#model").inputValue(), "gemma", "the vision model is the default");
  await page.click("#toggle-settings");
  await page.fill("#temperature", "0");
  await page.fill("#max-tokens", "8");

  // 1. A PNG attached with the button: a thumbnail while pending, then the question.
  const png = readFileSync(env("WEFT_IMAGE"));
  await page.setInputFiles("#file-input", { name: "square.png", mimeType: "image/png", buffer: png });
  await loaded("#attachments img.thumb");
  assert.equal(await page.locator("#notice").isVisible(), false, "no notice for a vision model");
  await page.fill("#input", "What is in this picture?");
  await page.press("#input", "Enter");
  const a = await answered(1);
  log("answer", JSON.stringify(a.text), a.stats);
  assert.ok(a.text.length > 0, "an answer");
  // Gemma 3 puts 256 soft tokens for an image in the prompt.
  const prompt = Number((a.stats.match(/prompt (\d+) tokens/) || [])[1]);
  assert.ok(prompt > 256, `the image is in the prompt: ${a.stats}`);
  await loaded(".msg.user img.att-img");
  assert.equal(await page.locator(".msg.user img.att-img").count(), 1);
  assert.equal(await page.locator("#attachments li").count(), 0, "nothing left pending");
  await shot("chat-vision-image");

  // 2. A follow-up turn still carries the image; a reload shows it from the session's history.
  await page.fill("#input", "And its colours?");
  await page.press("#input", "Enter");
  const b = await answered(2);
  const prompt2 = Number((b.stats.match(/prompt (\d+) tokens/) || [])[1]);
  assert.ok(prompt2 > prompt, `the second turn's prompt holds the first: ${b.stats}`);
  await page.reload();
  await page.waitForSelector("body[data-ready=true]");
  assert.equal(await page.locator(".msg").count(), 4);
  await loaded(".msg.user img.att-img");

  // 3. A video: its sampled frames attach (thumbnail and frame count) and go as `isVideo`.
  await page.click("#new-chat");
  await page.waitForFunction(() => document.querySelectorAll(".msg").length === 0);
  await page.setInputFiles("#file-input", { name: "clip.mp4", mimeType: "video/mp4",
    buffer: readFileSync(env("WEFT_VIDEO")) });
  await page.waitForSelector("#attachments li:has-text('clip.mp4 (4 frames)')", { timeout: T });
  await loaded("#attachments img.thumb");
  await page.fill("#input", "What happens in this video?");
  await page.press("#input", "Enter");
  const v = await answered(1);
  const promptV = Number((v.stats.match(/prompt (\d+) tokens/) || [])[1]);
  assert.ok(promptV > 4 * 256, `the four frames are in the prompt: ${v.stats}`);
  await loaded(".msg.user img.att-img");
  assert.equal(await page.locator(".msg.user img.att-img").count(), 4);
  await shot("chat-vision-video");

  // 4. A scanned PDF: its rendered pages attach as images (thumbnail and page count).
  await page.click("#new-chat");
  await page.waitForFunction(() => document.querySelectorAll(".msg").length === 0);
  await page.setInputFiles("#file-input", { name: "scan3.pdf", mimeType: "application/pdf",
    buffer: readFileSync(env("WEFT_SCAN")) });
  await page.waitForSelector("#attachments li:has-text('scan3.pdf (3 pages)')", { timeout: T });
  await loaded("#attachments img.thumb");
  await shot("chat-vision-scanned-pdf-pending");

  // 5. The text-only model: a notice says it cannot read images, and nothing is sent.
  await page.selectOption("#model", "smol");
  await page.waitForSelector("#notice:has-text('no vision projector')");
  await page.fill("#input", "What do these pages say?");
  await page.press("#input", "Enter");
  await page.waitForSelector("#notice:has-text('smol has no vision projector')");
  assert.equal(await page.locator(".msg").count(), 0, "nothing was sent to the text model");
  assert.equal(await page.locator("#attachments li").count(), 1, "the attachment is kept");
  await shot("chat-vision-text-model-notice");

  assert.deepEqual(errors, [], "console errors");
  console.log(JSON.stringify({ ok: true, screenshots: shots }));
} finally {
  if (browser) await browser.close();
  proc.kill();
  rmSync(home, { recursive: true, force: true });
}
