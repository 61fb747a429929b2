// Cross-site attacks on `weft serve` from a real page in Debian's headless Chromium
// (playwright-core; a browser is never downloaded). Run by tests/tests/security/cross_site/
// browser.rs, which starts the server (open mode) and a second loopback origin serving the
// attacker's page, and afterwards checks that the server made no key and started no job.
//
//  1. The attacker's page (ATTACK_PAGE, another port of 127.0.0.1) fires no-cors fetches
//     (text/plain, an untyped Blob) and cross-origin form posts (text/plain, urlencoded) at
//     /api/v1/keys and /api/pull, and a JSON fetch that needs a preflight. Every request that
//     reaches the server is recorded with the status it got (Playwright sees it even where the
//     page may not).
//  2. DNS rebinding: Chromium resolves attacker.test to 127.0.0.1 (--host-resolver-rules), so
//     http://attacker.test:PORT/ reaches the server with `Host: attacker.test:PORT`.
//  3. The server's own page, by 127.0.0.1 and by localhost, still makes its calls (a bodiless
//     POST, a JSON POST), so the checks cost the web UI nothing.
// Prints one JSON line: { requests: [{phase, url, method, status}], fetches, rebound, own }.
//
// Env: WEFT_BASE (http://127.0.0.1:PORT), ATTACK_PAGE (the attacker page's URL), CHROMIUM.

import { chromium } from "playwright-core";

const base = process.env.WEFT_BASE;
const attackPage = process.env.ATTACK_PAGE;
const chromiumPath = process.env.CHROMIUM || "/usr/bin/chromium";
const port = new URL(base).port;
const T = 60_000;
const log = (...a) => console.error("[cross-site]", ...a);

const browser = await chromium.launch({
  executablePath: chromiumPath,
  headless: true,
  args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-background-networking", "--no-first-run",
    "--host-resolver-rules=MAP attacker.test 127.0.0.1"],
});
const out = { requests: [], rebound: null, own: [] };
let phase = "attack";
try {
  const ctx = await browser.newContext();
  const page = await ctx.newPage();
  // Every request to the weft server, with the status it got.
  const serverPort = (u) => { try { return new URL(u).port === port; } catch { return false; } };
  page.on("response", (r) => {
    if (serverPort(r.url())) out.requests.push({ phase, url: r.url(), method: r.request().method(), status: r.status() });
  });
  page.on("requestfailed", (r) => {
    if (serverPort(r.url())) out.requests.push({ phase, url: r.url(), method: r.method(), status: 0, failure: r.failure()?.errorText });
  });

  // 1. The attacker's page.
  await page.goto(attackPage, { timeout: T });
  const fetches = await page.evaluate(() => window.attack());
  log("fetches", JSON.stringify(fetches));
  for (const form of ["plain-key", "urlencoded-pull"]) {
    const posted = page.waitForResponse((r) => serverPort(r.url()) && r.request().method() === "POST", { timeout: T });
    await page.evaluate((id) => document.getElementById(id).submit(), form);
    await posted;
  }
  out.fetches = fetches;

  // 2. DNS rebinding.
  phase = "rebound";
  const rebound = await page.goto(`http://attacker.test:${port}/`, { timeout: T });
  out.rebound = rebound.status();

  // 3. The server's own page.
  phase = "own";
  for (const host of ["127.0.0.1", "localhost"]) {
    const own = await page.goto(`http://${host}:${port}/`, { timeout: T });
    const calls = await page.evaluate(async () => {
      const session = await fetch("/api/sessions", { method: "POST" });
      const show = await fetch("/api/show", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ model: "smol" }),
      });
      return [session.status, show.status];
    });
    out.own.push({ host, page: own.status(), session: calls[0], show: calls[1] });
  }
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
