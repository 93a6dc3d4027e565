// Browser credentials, against the daemon that requires a capability
// token. Tickets: each websocket and event stream the clients open (and
// reopen) gets a ticket of its own, and the token goes into no URL.
// Sessions: the cookie the daemon sets authenticates like the token.

import { describe, expect, onTestFinished, test } from "vitest";
import {
  AppServerClient,
  bearerAuth,
  HttpClient,
  HttpError,
  openSocket,
  type Socket,
  type StateChange,
  type Ticket,
  ticketAuth,
} from "../src/index.js";
import { CutProxy, guarded } from "./helpers.js";
import { prompts } from "./script.js";

/** A fetch that records the URLs it is asked for and the tickets the daemon issues. */
function recordingFetch() {
  const urls: string[] = [];
  const tickets: string[] = [];
  const fetchImpl: typeof fetch = async (input, init) => {
    const req = new Request(input, init);
    urls.push(req.url);
    const res = await globalThis.fetch(req);
    if (res.ok && new URL(req.url).pathname === "/v1/auth/ticket") tickets.push(((await res.clone().json()) as Ticket).ticket);
    return res;
  };
  return { urls, tickets, fetchImpl };
}

describe("ticketAuth", () => {
  test("a fresh ticket opens each websocket and event stream, reconnects included; the token stays out of URLs", async () => {
    const proxy = await CutProxy.start(guarded().wsUrl);
    const { urls, tickets, fetchImpl } = recordingFetch();
    const auth = ticketAuth({ baseUrl: proxy.url("ws"), token: guarded().token, fetch: fetchImpl });
    const sockets: Socket[] = [];
    let opened = 0;
    let reopened!: () => void;
    const reopen = new Promise<void>((resolve) => (reopened = resolve));
    const client = new AppServerClient({
      url: proxy.url("ws"),
      auth,
      reconnect: { initialDelayMs: 10 },
      onStateChange: (c: StateChange) => {
        if (c.state === "open" && ++opened === 2) reopened();
      },
      socketFactory: async (url, opts) => {
        urls.push(url);
        expect(opts.headers ?? {}).toEqual({}); // nothing a browser's WebSocket could not send
        const s = await openSocket(url, opts);
        sockets.push(s);
        return s;
      },
    });
    onTestFinished(() => client.close());
    await client.connect();
    expect(tickets).toHaveLength(1);
    expect((sockets[0] as Socket & { protocol: string }).protocol).toBe("appserver");
    const { thread } = await client.request("thread/start", {});

    // A dropped connection: the spent ticket is not offered again.
    proxy.cut();
    await reopen;
    expect(tickets).toHaveLength(2);
    expect(tickets[1]).not.toBe(tickets[0]);
    expect((await client.request("thread/read", { threadId: thread.id })).thread.id).toBe(thread.id);

    // Plain requests carry the token as a header; the event stream a ticket.
    const http = new HttpClient({ baseUrl: proxy.url("http"), auth, fetch: fetchImpl });
    const turn = await http.startTurn(thread.id, { input: [{ type: "text", text: prompts.ticket.prompt }] });
    let streamed = "";
    await http.events(thread.id, {
      after: turn.eventsAfter!,
      until: "turnCompleted",
      onEvent: (ev) => {
        if (ev.method === "item/agentMessage/delta") streamed += ev.params.delta;
      },
    }).done;
    expect(streamed).toBe(prompts.ticket.text);
    expect(tickets).toHaveLength(3);
    expect(urls.filter((u) => u.includes("ticket="))).toHaveLength(1);
    for (const u of urls) expect(u).not.toContain(guarded().token);
  });

  test("a wrong token gets no ticket: refused once, not retried", async () => {
    const states: StateChange["state"][] = [];
    const client = new AppServerClient({
      url: guarded().wsUrl,
      auth: ticketAuth({ baseUrl: guarded().httpUrl, token: "wrong" }),
      reconnect: { initialDelayMs: 1 },
      onStateChange: (c) => states.push(c.state),
    });
    onTestFinished(() => client.close());
    const err = await client.connect().catch((e) => e);
    expect(err).toBeInstanceOf(HttpError);
    expect(err.status).toBe(401);
    expect(states).toEqual(["connecting", "closed"]);
  });

  test("tickets from elsewhere (the page's own server): a spent one is refused", async () => {
    const { tickets, fetchImpl } = recordingFetch();
    const server = ticketAuth({ baseUrl: guarded().httpUrl, token: guarded().token, fetch: fetchImpl });
    const issue = async (channel: "websocket" | "sse") => {
      await server.credentials(channel);
      return tickets[tickets.length - 1]!;
    };
    const first = new AppServerClient({ url: guarded().wsUrl, auth: ticketAuth({ baseUrl: guarded().httpUrl, issue }) });
    onTestFinished(() => first.close());
    await first.connect();

    const spent = tickets[0]!;
    const again = new AppServerClient({
      url: guarded().wsUrl,
      auth: ticketAuth({ baseUrl: guarded().httpUrl, issue: async () => spent }),
      reconnect: false,
    });
    onTestFinished(() => again.close());
    await expect(again.connect()).rejects.toThrow(/401/);
  });
});

describe("sessions", () => {
  test("startSession sets the cookie that then authenticates; a change by cookie needs an Origin; endSession ends it", async () => {
    let setCookie = "";
    const recording: typeof fetch = async (input, init) => {
      const res = await globalThis.fetch(input, init);
      setCookie = res.headers.get("set-cookie") ?? setCookie;
      return res;
    };
    const bearer = new HttpClient({ baseUrl: guarded().httpUrl, auth: bearerAuth(guarded().token), fetch: recording });
    expect((await bearer.startSession()).expiresIn).toBe(12 * 3600);
    expect(setCookie).toMatch(/^appserver_session=[A-Za-z0-9_-]{43}; Path=\/; Max-Age=43200; HttpOnly; SameSite=Strict$/);
    const cookie = setCookie.split(";")[0]!;

    // Node's fetch keeps no cookies: send it as a browser would.
    const byCookie = new HttpClient({ baseUrl: guarded().httpUrl, auth: { credentials: () => ({ headers: { Cookie: cookie } }) } });
    await byCookie.listThreads();
    const refused = await byCookie.endSession().catch((e) => e);
    expect(refused).toBeInstanceOf(HttpError);
    expect(refused.status).toBe(403); // no Origin: a change the cookie alone may not make

    const both = new HttpClient({
      baseUrl: guarded().httpUrl,
      auth: { credentials: async () => ({ headers: { Cookie: cookie, Authorization: `Bearer ${guarded().token}` } }) },
    });
    await both.endSession();
    const ended = await byCookie.listThreads().catch((e) => e);
    expect(ended).toBeInstanceOf(HttpError);
    expect(ended.status).toBe(401);
  });
});
