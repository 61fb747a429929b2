// Signing in to the chat page in Debian's headless Chromium (playwright-core): a server with
// keys answers the page's first call 401, the sign-in dialog opens, the user signs in with
// name and password, the model list loads, and a new chat (a POST that needs the CSRF token)
// works. The session cookie must be HttpOnly and SameSite=Strict (the page's script cannot
// read it). Run by tests/tests/security/cross_site/login.rs.
//
// Env: WEFT_BASE, WEFT_USER, WEFT_PASSWORD, CHROMIUM. Prints one JSON line.

import { chromium } from "playwright-core";

const base = process.env.WEFT_BASE;
const T = 60_000;
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-background-networking", "--no-first-run"],
});
const out = {};
try {
  const ctx = await browser.newContext();
  const page = await ctx.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  await page.goto(`${base}/`, { timeout: T });
  await page.waitForSelector("#sign-in[open]", { timeout: T });
  // A wrong password shows the server's message and keeps the dialog open.
  await page.fill("#sign-in-name", process.env.WEFT_USER);
  await page.fill("#sign-in-password", "not the password");
  await page.click("#sign-in-submit");
  await page.waitForSelector("#sign-in-error:not([hidden])", { timeout: T });
  out.wrong = await page.textContent("#sign-in-error");
  await page.fill("#sign-in-password", process.env.WEFT_PASSWORD);
  await page.click("#sign-in-submit");
  await page.waitForFunction(() => document.querySelectorAll("#model option").length > 0, null, { timeout: T });
  out.models = await page.$$eval("#model option", (o) => o.map((x) => x.value));
  const cookie = (await ctx.cookies()).find((c) => c.name === "weft_session");
  out.cookie = cookie ? { httpOnly: cookie.httpOnly, sameSite: cookie.sameSite } : null;
  out.scriptSeesCookie = await page.evaluate(() => document.cookie.includes("weft_session"));
  const created = page.waitForResponse((r) => r.url().endsWith("/api/sessions") && r.request().method() === "POST", { timeout: T });
  await page.click("#new-chat");
  out.newChat = (await created).status();
  out.errors = errors;
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
