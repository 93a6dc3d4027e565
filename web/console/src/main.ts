// appserver's web console: one page on the client library. It signs in
// where the daemon asks for a token (a session cookie, never the token in a
// URL or in storage), lists and searches threads, shows one thread live and
// drives its turns, and answers approvals and questions. The library
// reconnects and resumes; the page shows the connection's state.

import {
  AppServerClient,
  HttpClient,
  HttpError,
  bearerAuth,
  cookieAuth,
  type Resumed,
} from "../../../sdk/typescript/src/index.js";
import type {
  Thread,
  ThreadItem,
  ThreadTokenUsage,
  Turn,
  UserInput,
} from "../../../sdk/typescript/src/generated/protocol.js";

const origin = location.origin;
const wsUrl = `${origin.replace(/^http/, "ws")}/`;

const $ = <T extends HTMLElement = HTMLElement>(id: string): T => {
  const el = document.getElementById(id);
  if (!el) throw new Error(`the page has no #${id}`);
  return el as T;
};

/** h builds an element: h("div", {class: "x"}, "text", child). */
function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, string | boolean | undefined> = {},
  ...children: (Node | string | null | undefined)[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === false) continue;
    el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) if (c != null) el.append(c);
  return el;
}

let client: AppServerClient | undefined;
let http: HttpClient | undefined;

// ---- sign-in -------------------------------------------------------------

async function boot(): Promise<void> {
  // The HTTP API answers 401 where the daemon asks for a token and the
  // browser has no session yet; otherwise the console starts at once.
  const anonymous = await fetch("/v1/threads?limit=1", { credentials: "omit" });
  needsToken = anonymous.status === 401;
  if (needsToken) {
    const probe = await fetch("/v1/threads?limit=1", { credentials: "same-origin" });
    if (probe.status === 401) {
      showSignIn();
      return;
    }
  }
  await start();
}

/** Whether the daemon asks for a token (then the console has a sign-out). */
let needsToken = false;

function showSignIn(message = ""): void {
  $("workspace").hidden = true;
  $("signout").hidden = true;
  $("signin").hidden = false;
  $("signin-error").textContent = message;
  setConn("signed out");
  $<HTMLInputElement>("token").focus();
}

$("signin-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const input = $<HTMLInputElement>("token");
  const token = input.value;
  void (async () => {
    try {
      await new HttpClient({ baseUrl: origin, auth: bearerAuth(token) }).startSession();
    } catch (err) {
      const refused = err instanceof HttpError && (err.status === 401 || err.status === 403);
      $("signin-error").textContent = refused ? "The daemon refused this token." : `Could not sign in: ${String(err)}`;
      return;
    }
    input.value = "";
    needsToken = true;
    $("signin").hidden = true;
    await start();
  })();
});

$("signout").addEventListener("click", () => {
  void (async () => {
    client?.close();
    client = undefined;
    await http?.endSession().catch(() => undefined);
    location.hash = "";
    showSignIn();
  })();
});

// ---- connection ------------------------------------------------------------

function setConn(state: string, attempt?: number): void {
  const el = $("conn");
  el.className = `conn ${state}`;
  el.textContent =
    state === "open" ? "connected" : state === "reconnecting" ? `reconnecting… (attempt ${attempt ?? 1})` : state;
}

async function start(): Promise<void> {
  // The session cookie (or nothing, on a daemon that needs no token) goes
  // with every request and the websocket upgrade.
  const auth = cookieAuth("same-origin");
  http = new HttpClient({ baseUrl: origin, auth });
  const c = new AppServerClient({
    url: wsUrl,
    clientInfo: { name: "appserver-console", title: "appserver console", version: "0.1.0" },
    auth,
    onStateChange: ({ state, attempt }) => setConn(state, attempt),
  });
  client = c;
  registerRequests(c);
  c.onNotification((n) => onNotification(n.method, n.params as Record<string, unknown>));
  c.onResumed((r) => onResumed(r));
  try {
    await c.connect();
  } catch (err) {
    if (err instanceof HttpError && err.status === 401) {
      showSignIn("Your session ended; sign in again.");
      return;
    }
    setConn("closed");
    $("workspace").hidden = false;
    $("thread").replaceChildren(h("p", { class: "error" }, `Cannot reach the daemon: ${String(err)}`));
    return;
  }
  $("signin").hidden = true;
  $("workspace").hidden = false;
  $("signout").hidden = !needsToken;
  await refreshList();
  await route();
}

// ---- thread list -----------------------------------------------------------

let listTimer: number | undefined;
function refreshListSoon(): void {
  clearTimeout(listTimer);
  listTimer = window.setTimeout(() => void refreshList(), 250);
}

async function refreshList(): Promise<void> {
  if (!client) return;
  const term = $<HTMLInputElement>("search").value.trim();
  const archived = $<HTMLInputElement>("show-archived").checked;
  let threads: Thread[];
  try {
    const r = await client.request("thread/list", {
      limit: 100,
      searchTerm: term === "" ? null : term,
      archived,
      sortKey: "updated_at",
    });
    threads = r.data;
  } catch (err) {
    $("thread-list").replaceChildren(h("li", { class: "error" }, `Cannot list threads: ${String(err)}`));
    return;
  }
  const items = threads.map((t) => {
    const title = t.name || t.preview || "(no message yet)";
    const link = h("a", { href: `#/thread/${t.id}`, title: `${title}\n${t.cwd}` }, title);
    if (t.id === current?.id) link.setAttribute("aria-current", "page");
    const toggle = h("button", { type: "button", "aria-label": `${archived ? "Unarchive" : "Archive"} ${title}` }, archived ? "Unarchive" : "Archive");
    toggle.addEventListener("click", () => {
      void client
        ?.request(archived ? "thread/unarchive" : "thread/archive", { threadId: t.id })
        .then(() => refreshList())
        .catch((err: unknown) => alert(String(err)));
    });
    return h("li", { "data-thread": t.id }, link, toggle);
  });
  $("thread-list").replaceChildren(...(items.length ? items : [h("li", { class: "empty" }, term ? "No thread matches." : "No threads yet.")]));
}

$("search").addEventListener("input", refreshListSoon);
$("show-archived").addEventListener("change", () => void refreshList());

$("new-thread").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const cwd = $<HTMLInputElement>("new-cwd").value.trim();
  const approval = $<HTMLSelectElement>("new-approval").value;
  const sandbox = $<HTMLSelectElement>("new-sandbox").value;
  void (async () => {
    if (!client) return;
    try {
      const r = await client.request("thread/start", {
        cwd: cwd || null,
        approvalPolicy: (approval || null) as never,
        sandbox: (sandbox || null) as never,
      });
      location.hash = `#/thread/${r.thread.id}`;
      refreshListSoon();
    } catch (err) {
      alert(`Cannot start a thread: ${String(err)}`);
    }
  })();
});

// ---- one thread --------------------------------------------------------------

interface View {
  id: string;
  thread: Thread;
  settings: { model: string; sandbox: string; approvalPolicy: string; cwd: string; effort: string };
  usage?: ThreadTokenUsage;
  turnId: string | null;
  items: Map<string, { item: ThreadItem; el: HTMLElement }>;
  list: HTMLElement;
  meta: HTMLElement;
  status: HTMLElement;
}

let current: View | undefined;

window.addEventListener("hashchange", () => void route());

async function route(): Promise<void> {
  const m = /^#\/thread\/([^/]+)$/.exec(location.hash);
  if (!m) {
    current = undefined;
    $("thread").replaceChildren(h("p", { class: "empty" }, "Pick a thread or start a new one."));
    renderRequests();
    return;
  }
  await open(decodeURIComponent(m[1]!));
}

async function open(id: string): Promise<void> {
  if (!client) return;
  let r;
  try {
    r = await client.request("thread/resume", { threadId: id });
  } catch (err) {
    $("thread").replaceChildren(h("p", { class: "error" }, `Cannot open the thread: ${String(err)}`));
    return;
  }
  const sandbox = r.sandbox as unknown as { type?: string } | string;
  const view: View = {
    id,
    thread: r.thread,
    settings: {
      model: r.model,
      sandbox: typeof sandbox === "string" ? sandbox : (sandbox?.type ?? "?"),
      approvalPolicy: typeof r.approvalPolicy === "string" ? r.approvalPolicy : JSON.stringify(r.approvalPolicy),
      cwd: r.cwd,
      effort: r.reasoningEffort ?? "default",
    },
    turnId: null,
    items: new Map(),
    list: h("div", { class: "items", id: "items" }),
    meta: h("div", { class: "meta", id: "meta" }),
    status: h("p", { class: "turn-status", id: "turn-status", role: "status" }),
  };
  current = view;
  for (const a of document.querySelectorAll("#thread-list a")) {
    if (a.getAttribute("href") === `#/thread/${id}`) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  renderThread(view);
  loadTurns(view, r.thread.turns ?? []);
  void loadMcp(view);
}

function loadTurns(view: View, turns: Turn[]): void {
  view.items.clear();
  view.list.replaceChildren();
  view.turnId = null;
  for (const turn of turns) {
    for (const item of turn.items) upsertItem(view, item);
    if (turn.status === "inProgress") view.turnId = turn.id;
    else if (turn.status === "failed") view.status.textContent = `Last turn failed: ${turn.error?.message ?? "unknown error"}`;
  }
  renderControls(view);
}

function renderThread(view: View): void {
  const title = view.thread.name || view.thread.preview || "New thread";
  const prompt = h("textarea", { id: "prompt", "aria-label": "Message", placeholder: "Ask for something (Ctrl+Enter sends)" });
  const send = h("button", { type: "submit", class: "primary", id: "send" }, "Send");
  const interrupt = h("button", { type: "button", id: "interrupt", class: "danger", hidden: true }, "Interrupt");
  const form = h("form", { class: "composer" }, prompt, h("div", { class: "actions" }, send, interrupt));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    void submit(view, prompt);
  });
  prompt.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) {
      ev.preventDefault();
      void submit(view, prompt);
    }
  });
  interrupt.addEventListener("click", () => {
    if (view.turnId) void client?.request("turn/interrupt", { threadId: view.id, turnId: view.turnId }).catch((e: unknown) => alert(String(e)));
  });
  renderMeta(view);
  $("thread").replaceChildren(
    h("h2", { id: "thread-title" }, title),
    view.meta,
    h("div", { class: "mcp", id: "mcp" }),
    h("section", { class: "requests", id: "requests", "aria-label": "Waiting for you" }),
    view.list,
    view.status,
    form,
  );
  renderRequests();
}

function renderMeta(view: View): void {
  const u = view.usage;
  const usage = u
    ? `${u.total.totalTokens} tokens (in ${u.total.inputTokens}, out ${u.total.outputTokens})${u.modelContextWindow ? ` of ${u.modelContextWindow}` : ""}`
    : "no tokens yet";
  view.meta.replaceChildren(
    h("span", { id: "meta-model" }, `model ${view.settings.model} (${view.settings.effort})`),
    h("span", { id: "meta-sandbox" }, `sandbox ${view.settings.sandbox}`),
    h("span", {}, `approvals ${view.settings.approvalPolicy}`),
    h("span", { title: view.settings.cwd }, view.settings.cwd),
    h("span", { id: "meta-usage" }, usage),
  );
}

function renderControls(view: View): void {
  if (current !== view) return;
  const running = view.turnId !== null;
  document.getElementById("interrupt")!.hidden = !running;
  document.getElementById("send")!.textContent = running ? "Steer" : "Send";
  if (running) view.status.textContent = "Working…";
  else if (view.status.textContent === "Working…") view.status.textContent = "";
}

async function loadMcp(view: View): Promise<void> {
  if (!client) return;
  try {
    const r = await client.request("mcpServerStatus/list", { detail: "toolsAndAuthOnly" } as never);
    if (current !== view) return;
    const servers = r.data.map((s) => `${s.name} (${Object.keys(s.tools ?? {}).length} tools${s.toolsError ? `, ${s.toolsError}` : ""})`);
    document.getElementById("mcp")!.textContent = servers.length ? `MCP: ${servers.join(", ")}` : "";
  } catch {
    // The list is a courtesy; the thread works without it.
  }
}

async function submit(view: View, prompt: HTMLTextAreaElement): Promise<void> {
  const text = prompt.value.trim();
  if (!text || !client) return;
  const input: UserInput[] = [{ type: "text", text, text_elements: [] }];
  try {
    if (view.turnId) {
      await client.request("turn/steer", { threadId: view.id, input, expectedTurnId: view.turnId });
    } else {
      const r = await client.request("turn/start", { threadId: view.id, input });
      view.turnId = r.turn.id;
      renderControls(view);
    }
    prompt.value = "";
  } catch (err) {
    view.status.textContent = `Not sent: ${String(err)}`;
  }
}

// ---- items -----------------------------------------------------------------------

function upsertItem(view: View, item: ThreadItem): HTMLElement {
  const el = renderItem(item);
  const have = view.items.get(item.id);
  if (have) have.el.replaceWith(el);
  else view.list.append(el);
  view.items.set(item.id, { item, el });
  return el;
}

function text(s: string, cls = "text"): HTMLElement {
  return h("div", { class: cls }, s);
}

function diff(s: string): HTMLElement {
  const pre = h("pre", { class: "diff" });
  for (const line of s.split("\n")) {
    const cls = line.startsWith("+") && !line.startsWith("+++") ? "add" : line.startsWith("-") && !line.startsWith("---") ? "del" : undefined;
    pre.append(cls ? h("span", { class: cls }, line) : line, "\n");
  }
  return pre;
}

function json(v: unknown): string {
  try {
    return JSON.stringify(v, null, 2) ?? "";
  } catch {
    return String(v);
  }
}

function renderItem(item: ThreadItem): HTMLElement {
  const box = h("div", { class: `item ${item.type}`, "data-item": item.id, "data-type": item.type });
  const label = (s: string) => h("div", { class: "label" }, s);
  const put = (...children: (Node | string | null | undefined)[]) => {
    for (const c of children) if (c != null) box.append(c);
  };
  switch (item.type) {
    case "userMessage":
      put(label("you"), text(item.content.map((c) => ("text" in c ? c.text : `[${c.type}]`)).join("\n")));
      break;
    case "agentMessage":
      put(label("agent"), text(item.text));
      break;
    case "reasoning":
      put(label("reasoning"), text((item.summary ?? []).join("\n")));
      break;
    case "plan":
      put(label("plan"), text(item.text));
      break;
    case "commandExecution": {
      const st = item.exitCode != null ? `${item.status}, exit ${item.exitCode}` : item.status;
      put(
        label("command"),
        h("pre", { class: "command" }, `$ ${item.command}`),
        h("pre", { class: "output" }, item.aggregatedOutput ?? ""),
        h("div", { class: `status-${item.status}` }, st),
      );
      break;
    }
    case "fileChange":
      put(label(`file change (${item.status})`));
      for (const ch of item.changes) {
        put(h("div", { class: "path" }, `${typeof ch.kind === "string" ? ch.kind : ch.kind.type} ${ch.path}`), diff(ch.diff));
      }
      break;
    case "mcpToolCall":
      put(
        label(`MCP ${item.server}.${item.tool} (${item.status})`),
        h("pre", {}, json(item.arguments)),
        item.error ? text(item.error.message, "error") : item.result ? h("pre", {}, json(item.result.content)) : null,
      );
      break;
    case "dynamicToolCall":
      put(
        label(`tool ${item.tool} (${item.status})`),
        h("pre", {}, json(item.arguments)),
        item.contentItems ? h("pre", {}, item.contentItems.map((c) => ("text" in c ? c.text : `[${c.type}]`)).join("\n")) : null,
      );
      break;
    case "collabAgentToolCall": {
      const links = item.receiverThreadIds.map((id) => h("a", { href: `#/thread/${id}` }, id.slice(0, 8)));
      const line = h("div", {}, `${item.tool} (${item.status})`, ...links.flatMap((a) => [" ", a]));
      put(label("sub-agent"), item.prompt ? text(item.prompt) : null, line);
      break;
    }
    case "subAgentActivity":
      put(label(`sub-agent ${item.kind}`), h("a", { href: `#/thread/${item.agentThreadId}` }, item.agentPath));
      break;
    case "webSearch":
      put(label("web search"), text(item.query));
      break;
    default:
      put(label(item.type), h("pre", {}, json(item)));
  }
  return box;
}

/** appendTo adds delta to the text of an item's part, making the item if it is not shown yet (a page loaded mid-item). */
function appendTo(view: View, itemId: string, make: () => ThreadItem, selector: string, delta: string): void {
  let entry = view.items.get(itemId);
  if (!entry) {
    upsertItem(view, make());
    entry = view.items.get(itemId)!;
  }
  const part = entry.el.querySelector(selector);
  if (part) part.textContent += delta;
  const item = entry.item;
  if (item.type === "agentMessage") item.text += delta;
  else if (item.type === "commandExecution") item.aggregatedOutput = (item.aggregatedOutput ?? "") + delta;
}

// ---- notifications ---------------------------------------------------------------

function onNotification(method: string, p: Record<string, unknown>): void {
  switch (method) {
    case "thread/started":
    case "thread/archived":
    case "thread/unarchived":
    case "thread/name/updated":
    case "thread/deleted":
      refreshListSoon();
      break;
  }
  const view = current;
  if (!view || p.threadId !== view.id) return;
  switch (method) {
    case "turn/started":
      view.turnId = (p.turn as Turn).id;
      view.status.textContent = "";
      renderControls(view);
      break;
    case "turn/completed": {
      const turn = p.turn as Turn;
      view.turnId = null;
      view.status.textContent =
        turn.status === "failed" ? `Turn failed: ${turn.error?.message ?? "unknown error"}` : turn.status === "interrupted" ? "Turn interrupted." : "";
      renderControls(view);
      refreshListSoon();
      break;
    }
    case "item/started":
    case "item/completed": {
      const item = p.item as ThreadItem;
      upsertItem(view, item);
      const title = document.getElementById("thread-title");
      if (item.type === "userMessage" && title && !view.thread.name && !view.thread.preview) {
        view.thread.preview = item.content.map((c) => ("text" in c ? c.text : "")).join(" ").trim();
        title.textContent = view.thread.preview || title.textContent;
      }
      break;
    }
    case "item/agentMessage/delta":
      appendTo(view, p.itemId as string, () => ({ type: "agentMessage", id: p.itemId as string, text: "" }), ".text", p.delta as string);
      break;
    case "item/reasoning/summaryTextDelta":
      appendTo(view, p.itemId as string, () => ({ type: "reasoning", id: p.itemId as string, summary: [] }), ".text", p.delta as string);
      break;
    case "item/commandExecution/outputDelta":
      appendTo(
        view,
        p.itemId as string,
        () => ({ type: "commandExecution", id: p.itemId as string, command: "", commandActions: [], cwd: "", status: "inProgress" }),
        ".output",
        p.delta as string,
      );
      break;
    case "thread/tokenUsage/updated":
      view.usage = p.tokenUsage as ThreadTokenUsage;
      renderMeta(view);
      break;
    case "thread/name/updated":
      document.getElementById("thread-title")!.textContent = (p.threadName as string) || view.thread.preview;
      break;
  }
}

function onResumed(r: Resumed): void {
  // Resumed without a known position: the answer has the thread as it is.
  if (current && r.threadId === current.id && r.afterSeq === undefined && r.response) {
    loadTurns(current, r.response.thread.turns ?? []);
  }
  refreshListSoon();
}

// ---- approvals and questions -----------------------------------------------------

interface Pending {
  threadId: string;
  el: HTMLElement;
}
const pending = new Set<Pending>();

function renderRequests(): void {
  const box = document.getElementById("requests");
  if (!box) return;
  box.replaceChildren(...[...pending].map((p) => p.el));
}

/** ask shows a request until a button answers it or the daemon withdraws it. */
function ask<T>(threadId: string, build: (answer: (v: T) => void) => HTMLElement, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const entry: Pending = { threadId, el: document.createElement("div") };
    const done = () => {
      pending.delete(entry);
      renderRequests();
    };
    entry.el = build((v) => {
      done();
      resolve(v);
    });
    signal.addEventListener("abort", () => {
      done();
      reject(signal.reason);
    });
    pending.add(entry);
    renderRequests();
    entry.el.querySelector("button")?.focus();
  });
}

function threadLabel(threadId: string): string {
  return current?.id === threadId ? "" : ` (thread ${threadId.slice(0, 8)})`;
}

function buttons<T>(answer: (v: T) => void, choices: [string, T, string?][]): HTMLElement {
  return h(
    "div",
    { class: "actions" },
    ...choices.map(([label, value, cls]) => {
      const b = h("button", { type: "button", class: cls }, label);
      b.addEventListener("click", () => answer(value));
      return b;
    }),
  );
}

function registerRequests(c: AppServerClient): void {
  c.handle("item/commandExecution/requestApproval", (p, { signal }) =>
    ask(
      p.threadId,
      (answer) =>
        h(
          "div",
          { class: "request", "data-request": "command" },
          h("strong", {}, `Run this command?${threadLabel(p.threadId)}`),
          h("pre", {}, p.command ?? "(no command)"),
          p.cwd ? h("div", { class: "path" }, `in ${p.cwd}`) : null,
          p.reason ? text(p.reason) : null,
          buttons(answer, [
            ["Approve", { decision: "accept" } as const, "primary"],
            ["Approve for the session", { decision: "acceptForSession" } as const],
            ["Decline", { decision: "decline" } as const, "danger"],
          ]),
        ),
      signal,
    ),
  );
  c.handle("item/fileChange/requestApproval", (p, { signal }) => {
    const item = current?.items.get(p.itemId)?.item;
    const changes = item?.type === "fileChange" ? item.changes : [];
    return ask(
      p.threadId,
      (answer) =>
        h(
          "div",
          { class: "request", "data-request": "fileChange" },
          h("strong", {}, `Apply these changes?${threadLabel(p.threadId)}`),
          ...changes.flatMap((ch) => [h("div", { class: "path" }, ch.path), diff(ch.diff)]),
          p.reason ? text(p.reason) : null,
          buttons(answer, [
            ["Apply", { decision: "accept" } as const, "primary"],
            ["Apply for the session", { decision: "acceptForSession" } as const],
            ["Decline", { decision: "decline" } as const, "danger"],
          ]),
        ),
      signal,
    );
  });
  c.handle("item/tool/requestUserInput", (p, { signal }) =>
    ask(
      p.threadId,
      (answer) => {
        const fields = p.questions.map((q) => {
          const input = h("input", { type: q.isSecret ? "password" : "text", "data-question": q.id, "aria-label": q.question });
          const opts = (q.options ?? []).map((o) => {
            const b = h("button", { type: "button" }, o.label);
            b.addEventListener("click", () => (input.value = o.label));
            return b;
          });
          return { q, input, el: h("label", { class: "question" }, h("strong", {}, q.header), text(q.question), ...opts, input) };
        });
        const send = h("button", { type: "button", class: "primary" }, "Answer");
        send.addEventListener("click", () =>
          answer({ answers: Object.fromEntries(fields.map((f) => [f.q.id, { answers: [f.input.value] }])) }),
        );
        return h(
          "div",
          { class: "request", "data-request": "userInput" },
          h("strong", {}, `The agent asks${threadLabel(p.threadId)}`),
          ...fields.map((f) => f.el),
          send,
        );
      },
      signal,
    ),
  );
}

void boot().catch((err: unknown) => {
  setConn("closed");
  $("thread").replaceChildren(h("p", { class: "error" }, `The console could not start: ${String(err)}`));
});
