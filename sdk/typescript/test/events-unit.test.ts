// The event stream's reactions to what a daemon rarely does on cue (a
// stalled connection, 410, stream/error, a refused token), on a scripted
// HTTP server; and the reconnect timing.

import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { describe, expect, onTestFinished, test } from "vitest";
import { Backoff, bearerAuth, EventsGoneError, HttpClient, HttpError, type StreamEvent } from "../src/index.js";

/** Serves each request of the stream with the next handler. */
async function scripted(...handlers: ((req: IncomingMessage, res: ServerResponse) => void)[]) {
  const seen: IncomingMessage[] = [];
  const server = createServer((req, res) => {
    seen.push(req);
    const h = handlers[Math.min(seen.length, handlers.length) - 1]!;
    h(req, res);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  onTestFinished(() => {
    server.closeAllConnections();
    server.close();
  });
  const addr = server.address() as { port: number };
  return { url: `http://127.0.0.1:${addr.port}`, seen };
}

const sse = (res: ServerResponse, body: string) => {
  res.writeHead(200, { "Content-Type": "text/event-stream" });
  res.write(body);
};
const event = (pos: number, method: string, params: unknown) =>
  `id: ${pos}\nevent: ${method}\ndata: ${JSON.stringify({ method, params, emittedAtMs: 1 })}\n\n`;
const problem = (res: ServerResponse, status: number, type: string) => {
  res.writeHead(status, { "Content-Type": "application/problem+json" });
  res.end(JSON.stringify({ type: `urn:appserver:problem:${type}`, title: type, status }));
};
const delta = (d: string) => ({ threadId: "t", turnId: "u", itemId: "i", delta: d });

describe("EventStream on a scripted server", () => {
  test("reconnects from its position when the stream goes silent", async () => {
    const { url, seen } = await scripted(
      (_req, res) => sse(res, event(65536, "item/agentMessage/delta", delta("a"))), // then nothing
      (_req, res) => {
        sse(res, event(65536, "item/agentMessage/delta", delta("a")) + event(131072, "turn/completed", { threadId: "t" }));
      },
    );
    const events: StreamEvent[] = [];
    await new HttpClient({ baseUrl: url }).events("t", {
      idleTimeoutMs: 300,
      until: "turnCompleted",
      reconnect: { initialDelayMs: 1 },
      onEvent: (ev) => events.push(ev),
    }).done;
    expect(seen).toHaveLength(2);
    expect(seen[1]!.headers["last-event-id"]).toBe("65536");
    expect(events.map((e) => [e.seq, e.method])).toEqual([
      [1, "item/agentMessage/delta"],
      [2, "turn/completed"],
    ]);
  });

  test("ends with EventsGoneError on 410 and on stream/error", async () => {
    const gone = await scripted((_req, res) => problem(res, 410, "events-gone"));
    const err = await new HttpClient({ baseUrl: gone.url }).events("t", { after: 5, onEvent: () => {} }).done.catch((e) => e);
    expect(err).toBeInstanceOf(EventsGoneError);
    expect(gone.seen).toHaveLength(1);

    const behind = await scripted((_req, res) =>
      sse(res, event(65536, "item/agentMessage/delta", delta("a")) + `event: stream/error\ndata: ${JSON.stringify({ method: "stream/error", params: { type: "urn:appserver:problem:events-gone", title: "Gone", status: 410 } })}\n\n`),
    );
    const got: StreamEvent[] = [];
    const err2 = await new HttpClient({ baseUrl: behind.url }).events("t", { onEvent: (e) => got.push(e) }).done.catch((e) => e);
    expect(err2).toBeInstanceOf(EventsGoneError);
    expect(got).toHaveLength(1);
  });

  test("a refused token ends the stream at once, with the problem", async () => {
    const { url, seen } = await scripted((req, res) =>
      req.headers.authorization === "Bearer right" ? sse(res, "") : problem(res, 401, "unauthorized"),
    );
    const states: string[] = [];
    const err = await new HttpClient({ baseUrl: url, auth: bearerAuth("wrong") })
      .events("t", { onEvent: () => {}, onStateChange: (s) => states.push(s.state) })
      .done.catch((e) => e);
    expect(err).toBeInstanceOf(HttpError);
    expect(err.status).toBe(401);
    expect(seen).toHaveLength(1);
    expect(states).toEqual(["connecting", "closed"]);
  });
});

describe("Backoff", () => {
  test("doubles up to the cap, half of each wait random, and counts attempts", () => {
    const high = new Backoff({ initialDelayMs: 100, maxDelayMs: 500, maxAttempts: 5 }, () => 1);
    expect([1, 2, 3, 4, 5].map(() => high.next())).toEqual([100, 200, 400, 500, 500]);
    expect(high.exhausted).toBe(true);
    high.reset();
    expect(high.exhausted).toBe(false);
    const low = new Backoff({ initialDelayMs: 100 }, () => 0);
    expect([low.next(), low.next()]).toEqual([50, 100]);
  });
});
