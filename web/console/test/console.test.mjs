// The web console in a real browser: Debian's Chromium driven by
// playwright-core, against daemons built from this checkout on the fake
// model. CONSOLE_SCREENSHOTS=DIR saves the screenshots the docs show.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { chromium } from "playwright-core";
import { harness, prompts, token } from "./daemon.mjs";

const executablePath = process.env.CHROMIUM ?? "/usr/bin/chromium";
const shots = process.env.CONSOLE_SCREENSHOTS;

let h;
let browser;
let open;
let guarded;

before(async () => {
  h = await harness();
  [open, guarded] = await Promise.all([h.daemon({ name: "open" }), h.daemon({ name: "guarded", guarded: true })]);
  browser = await chromium.launch({
    executablePath,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
});

after(async () => {
  await browser?.close();
  await h?.close();
});

async function page(t, opts = {}) {
  const context = await browser.newContext({ viewport: { width: 1200, height: 800 }, ...opts });
  t.after(() => context.close());
  const p = await context.newPage();
  const outside = [];
  p.on("request", (r) => {
    const u = new URL(r.url());
    if (u.hostname !== "127.0.0.1") outside.push(r.url());
  });
  t.after(() => assert.deepEqual(outside, [], "the console asked another host"));
  p.on("pageerror", (err) => console.error("page error:", err));
  return p;
}

// shot saves a screenshot for the docs, with the test's temporary
// directory shown as a project directory.
async function shot(p, name) {
  if (!shots) return;
  await p.evaluate((dir) => {
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) n.textContent = n.textContent.replaceAll(dir, "/srv/project");
    for (const el of document.querySelectorAll("input")) el.value = el.value.replaceAll(dir, "/srv/project");
  }, h.dir);
  await p.screenshot({ path: join(shots, `console-${name}.png`) });
}

async function newThread(p, { cwd, approval } = {}) {
  if (cwd || approval) {
    await p.locator(".new-thread summary").click();
    if (cwd) await p.fill("#new-cwd", cwd);
    if (approval) await p.selectOption("#new-approval", approval);
  }
  await p.click("#new-thread-button");
  await p.waitForURL(/#\/thread\//);
  await p.waitForSelector("#prompt");
  return decodeURIComponent(p.url().split("#/thread/")[1]);
}

async function send(p, text) {
  await p.fill("#prompt", text);
  await p.click("#send");
}

const lastAgentText = (p) => p.locator(".item.agentMessage .text").last();

describe("web console", () => {
  test("without a token to ask for, / shows the threads at once; a turn streams in", async (t) => {
    const p = await page(t);
    await p.goto(`${open.url}/`);
    await p.waitForSelector("#workspace:not([hidden])");
    assert.equal(await p.isVisible("#signin"), false);
    assert.equal(await p.isVisible("#signout"), false, "nothing to sign out of");
    await p.waitForSelector("#conn.open");
    const threadId = await newThread(p);

    const seen = [];
    await p.exposeFunction("recordText", (s) => seen.push(s));
    await p.evaluate(() => {
      new MutationObserver(() => {
        const el = [...document.querySelectorAll(".item.agentMessage .text")].pop();
        if (el) window.recordText(el.textContent);
      }).observe(document.getElementById("thread"), { subtree: true, childList: true, characterData: true });
    });
    await send(p, prompts.stream.prompt);
    await p.waitForFunction(
      (want) => [...document.querySelectorAll(".item.agentMessage .text")].some((e) => e.textContent === want),
      prompts.stream.text,
    );
    await p.waitForSelector("#send:text('Send')");
    assert.ok(
      seen.some((s) => s.length > 0 && s.length < prompts.stream.text.length),
      "the answer appeared piece by piece, not at once",
    );
    assert.match(await p.textContent("#meta-model"), /fake-model/);
    assert.match(await p.textContent("#meta-usage"), /tokens/);
    // The list shows the thread by its first message; search finds it.
    await p.fill("#search", "stream a turn");
    await p.waitForSelector(`#thread-list li[data-thread="${threadId}"]`);
    await shot(p, "thread");
    // Archive takes it off the list and the archived view has it.
    await p.fill("#search", "");
    await p.locator(`#thread-list li[data-thread="${threadId}"] button`).click();
    await p.waitForSelector(`#thread-list li[data-thread="${threadId}"]`, { state: "detached" });
    await p.check("#show-archived");
    await p.waitForSelector(`#thread-list li[data-thread="${threadId}"]`);
  });

  test("a daemon that asks for a token: a wrong one is refused, the right one signs in", async (t) => {
    const p = await page(t);
    await p.goto(`${guarded.url}/`);
    await p.waitForSelector("#signin:not([hidden])");
    await shot(p, "signin");
    await p.fill("#token", "not-the-token");
    await p.click("#signin-form button[type=submit]");
    await p.waitForSelector("#signin-error:text('The daemon refused this token.')");
    assert.equal(await p.isVisible("#workspace"), false);

    await p.fill("#token", token);
    await p.click("#signin-form button[type=submit]");
    await p.waitForSelector("#workspace:not([hidden])");
    await p.waitForSelector("#conn.open");
    // The token is in no URL, cookie value the page can read, or storage.
    assert.ok(!p.url().includes(token));
    assert.equal(await p.evaluate(() => document.cookie), "");
    assert.equal(await p.evaluate(() => JSON.stringify(localStorage) + JSON.stringify(sessionStorage)), "{}{}");
    // A reload keeps the session; signing out ends it.
    await p.reload();
    await p.waitForSelector("#workspace:not([hidden])");
    await p.click("#signout");
    await p.waitForSelector("#signin:not([hidden])");
    await p.reload();
    await p.waitForSelector("#signin:not([hidden])");
  });

  test("an approval: the command waits for the button, then runs and its output shows", async (t) => {
    const cwd = await h.workspace("approve");
    const p = await page(t);
    await p.goto(`${open.url}/`);
    await p.waitForSelector("#conn.open");
    await newThread(p, { cwd, approval: "untrusted" });
    await send(p, prompts.approve.prompt);
    const request = p.locator(".request[data-request=command]");
    await request.waitFor();
    assert.match(await request.textContent(), new RegExp(`touch ${prompts.approve.file}`));
    assert.equal(existsSync(join(cwd, prompts.approve.file)), false, "nothing ran before the approval");
    await shot(p, "approval");
    await request.getByRole("button", { name: "Approve", exact: true }).click();
    await p.waitForSelector(".item.commandExecution .status-completed");
    await p.waitForSelector(`.item.agentMessage .text:text-is("${prompts.approve.text}")`);
    assert.equal(await p.locator(".request").count(), 0);
    assert.equal(existsSync(join(cwd, prompts.approve.file)), true);
    assert.match(await p.textContent(".item.commandExecution"), /exit 0/);
  });

  test("a reload in the middle of a turn loses nothing and repeats nothing", async (t) => {
    const p = await page(t);
    await p.goto(`${open.url}/`);
    await p.waitForSelector("#conn.open");
    await newThread(p);
    await send(p, prompts.reload.prompt);
    await p.waitForFunction(() => (document.querySelector(".item.agentMessage .text")?.textContent ?? "").split(" ").length >= 5);
    await p.reload();
    await p.waitForSelector("#conn.open");
    // The turn is still running after the reload and can be interrupted.
    await p.waitForFunction(
      (want) => [...document.querySelectorAll(".item.agentMessage .text")].some((e) => e.textContent === want),
      prompts.reload.text,
      { timeout: 30_000 },
    );
    assert.equal(await p.locator(".item.agentMessage").count(), 1, "one answer, not two");
    assert.equal(await p.locator(".item.userMessage").count(), 1);
  });

  test("a daemon restart: the console says it is reconnecting, then goes on", async (t) => {
    const port = await h.freePort();
    let d = await h.daemon({ name: "restart", port });
    t.after(() => d.stop());
    const p = await page(t);
    await p.goto(`${d.url}/`);
    await p.waitForSelector("#conn.open");
    const threadId = await newThread(p);
    await d.stop();
    await p.waitForSelector("#conn.reconnecting");
    assert.match(await p.textContent("#conn"), /reconnecting/);
    d = await h.daemon({ name: "restart", port });
    await p.waitForSelector("#conn.open", { timeout: 30_000 });
    assert.ok(p.url().endsWith(threadId));
    await send(p, prompts.restart.prompt);
    await p.waitForSelector(`.item.agentMessage .text:text-is("${prompts.restart.text}")`);
  });

  test("readable on a phone", async (t) => {
    const p = await page(t, { viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
    await p.goto(`${open.url}/`);
    await p.waitForSelector("#conn.open");
    await newThread(p);
    const overflow = await p.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `the page is ${overflow}px wider than the phone`);
    await shot(p, "phone");
  });
});
