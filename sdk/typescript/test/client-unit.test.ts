// The websocket client's bookkeeping, on scripted sockets: what the daemon
// does not do on its own (send a number twice, offer a request again)
// needs a peer that does it on purpose.

import { describe, expect, onTestFinished, test } from "vitest";
import { AppServerClient, ConnectionError, type Notification, RpcError, type Socket } from "../src/index.js";

type Frame = { id?: number | string; method?: string; params?: unknown; result?: unknown; error?: unknown };

/** The daemon's end of one scripted connection. */
class Peer implements Socket {
  onopen: ((ev: unknown) => void) | null = null;
  onmessage: ((ev: { data: unknown }) => void) | null = null;
  onclose: ((ev: { code: number; reason: string }) => void) | null = null;
  onerror: ((ev: unknown) => void) | null = null;
  readonly received: Frame[] = [];
  private waiters: (() => void)[] = [];
  closed = false;

  constructor(private readonly script: (peer: Peer, frame: Frame) => void) {
    setTimeout(() => this.onopen?.({}));
  }

  send(data: string): void {
    if (this.closed) return; // as a closing websocket, it drops what is sent
    const f = JSON.parse(data) as Frame;
    this.received.push(f);
    for (const w of this.waiters.splice(0)) w();
    this.script(this, f);
  }

  close(): void {
    this.drop();
  }

  push(frame: unknown): void {
    this.onmessage?.({ data: JSON.stringify(frame) });
  }

  drop(): void {
    if (this.closed) return;
    this.closed = true;
    setTimeout(() => this.onclose?.({ code: 1006, reason: "" }));
  }

  /** Resolves once a frame matching f has been received. */
  async got(f: (frame: Frame) => boolean): Promise<Frame> {
    for (;;) {
      const hit = this.received.find(f);
      if (hit) return hit;
      await new Promise<void>((r) => this.waiters.push(r));
    }
  }
}

/** A daemon that answers initialize and thread/resume, and whatever else extra says. */
function scripted(extra: (peer: Peer, frame: Frame) => void = () => {}) {
  const peers: Peer[] = [];
  const factory = () => {
    const p = new Peer((peer, f) => {
      if (f.method === "initialize") peer.push({ id: f.id, result: { userAgent: "fake", codexHome: "/", platformFamily: "unix", platformOs: "linux" } });
      else if (f.method === "thread/resume") peer.push({ id: f.id, result: { thread: { id: (f.params as { threadId: string }).threadId } } });
      else if (f.method === "thread/start") peer.push({ id: f.id, result: { thread: { id: "t1" } } });
      extra(peer, f);
    });
    peers.push(p);
    return p;
  };
  return { peers, factory };
}

/** A client of factory's peers; reopened() resolves when it is open again after a drop. */
async function client(factory: () => Socket): Promise<AppServerClient & { reopened: () => Promise<void> }> {
  let opened: (() => void) | undefined;
  const c = new AppServerClient({
    url: "ws://fake",
    socketFactory: factory,
    reconnect: { initialDelayMs: 1, maxDelayMs: 2 },
    onStateChange: (s) => {
      if (s.state === "open") opened?.();
    },
  });
  onTestFinished(() => c.close());
  await c.connect();
  return Object.assign(c, { reopened: () => new Promise<void>((r) => (opened = r)) });
}

const delta = (seq: number) => ({
  method: "item/agentMessage/delta",
  params: { threadId: "t1", turnId: "u1", itemId: "m1", delta: String(seq) },
  seq,
});

describe("AppServerClient on a scripted peer", () => {
  test("initializes with experimentalApi and eventSeq", async () => {
    const { peers, factory } = scripted();
    await client(factory);
    const init = peers[0]!.received[0]!;
    expect(init.method).toBe("initialize");
    expect(init.params).toMatchObject({ capabilities: { experimentalApi: true, eventSeq: true } });
    expect(peers[0]!.received[1]).toEqual({ method: "initialized" });
  });

  test("never delivers a thread's number twice", async () => {
    const { peers, factory } = scripted();
    const c = await client(factory);
    const seen: Notification[] = [];
    c.onNotification((n) => seen.push(n));
    await c.request("thread/start", {});
    for (const seq of [1, 2, 2, 1, 3]) peers[0]!.push(delta(seq));
    peers[0]!.push({ method: "thread/status/changed", params: { threadId: "t1", status: { type: "idle" } } });
    expect(seen.map((n) => [n.method, n.seq])).toEqual([
      ["item/agentMessage/delta", 1],
      ["item/agentMessage/delta", 2],
      ["item/agentMessage/delta", 3],
      ["thread/status/changed", undefined],
    ]);
    expect(c.lastSeq("t1")).toBe(3);
  });

  test("resumes each subscribed thread after its last number", async () => {
    const { peers, factory } = scripted();
    const c = await client(factory);
    await c.request("thread/start", {});
    await c.request("thread/resume", { threadId: "t2" }); // from a snapshot: no position yet
    peers[0]!.push(delta(4));
    peers[0]!.drop();
    await new Promise<void>((r) => c.onResumed((x) => x.threadId === "t2" && r()));
    const resumes = peers[1]!.received.filter((f) => f.method === "thread/resume").map((f) => f.params);
    expect(resumes).toContainEqual({ threadId: "t1", afterSeq: 4, excludeTurns: true });
    expect(resumes).toContainEqual({ threadId: "t2" });
  });

  test("a request in flight when the connection drops fails; a later one waits for the next", async () => {
    const { peers, factory } = scripted((peer, f) => {
      if (f.method === "thread/read" && peers.length === 2) peer.push({ id: f.id, result: { thread: { id: "t9" } } });
    });
    const c = await client(factory);
    const lost = c.request("thread/read", { threadId: "t9", includeTurns: false });
    await peers[0]!.got((f) => f.method === "thread/read");
    peers[0]!.drop();
    await expect(lost).rejects.toBeInstanceOf(ConnectionError);
    const later = await c.request("thread/read", { threadId: "t9", includeTurns: false });
    expect(later.thread.id).toBe("t9");
  });

  test("a request offered again after a reconnect is handled once and answered under its new id", async () => {
    const { peers, factory } = scripted();
    const c = await client(factory);
    let calls = 0;
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    c.handle("item/tool/call", async () => {
      calls++;
      await held;
      return { contentItems: [{ type: "inputText", text: "done" }], success: true };
    });
    const call = { threadId: "t1", turnId: "u1", callId: "c1", tool: "x", arguments: {} };
    peers[0]!.push({ id: 7, method: "item/tool/call", params: call });
    const reopened = c.reopened();
    peers[0]!.drop();
    await reopened;
    peers[1]!.push({ id: 8, method: "item/tool/call", params: call });
    release();
    const answer = await peers[1]!.got((f) => f.id === 8 && f.method === undefined);
    expect(answer.result).toEqual({ contentItems: [{ type: "inputText", text: "done" }], success: true });
    expect(calls).toBe(1);
    expect(peers[0]!.received.some((f) => f.id === 7 && f.method === undefined)).toBe(false);
  });

  test("an answer lost with a closing connection goes out again when the resume brings the request again", async () => {
    const call = { threadId: "t1", turnId: "u1", callId: "c2", tool: "x", arguments: {} };
    // The new connection offers the call again while thread/resume is
    // being answered, before the client is open.
    const { peers, factory } = scripted((peer, f) => {
      if (f.method === "thread/resume") peer.push({ id: 9, method: "item/tool/call", params: call });
    });
    const c = await client(factory);
    await c.request("thread/start", {});
    let calls = 0;
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    c.handle("item/tool/call", async () => {
      calls++;
      await held;
      return { contentItems: [], success: true };
    });
    peers[0]!.push({ id: 4, method: "item/tool/call", params: call });
    await new Promise((r) => setTimeout(r));
    // The answer is sent while the connection is closing: it is lost.
    const reopened = c.reopened();
    peers[0]!.drop();
    release();
    await reopened;
    const answer = await peers[1]!.got((f) => f.id === 9 && f.method === undefined);
    expect(answer.result).toEqual({ contentItems: [], success: true });
    expect(calls).toBe(1);
  });

  test("serverRequest/resolved aborts the handler and nothing is sent", async () => {
    const { peers, factory } = scripted();
    const c = await client(factory);
    let signal!: AbortSignal;
    c.handle("item/commandExecution/requestApproval", (_p, ctx) => {
      signal = ctx.signal;
      return new Promise((resolve) => ctx.signal.addEventListener("abort", () => resolve({ decision: "decline" })));
    });
    peers[0]!.push({
      id: 3,
      method: "item/commandExecution/requestApproval",
      params: { threadId: "t1", turnId: "u1", itemId: "i1", startedAtMs: 0, kind: "command", environmentId: "e" },
    });
    await new Promise((r) => setTimeout(r));
    peers[0]!.push({ method: "serverRequest/resolved", params: { threadId: "t1", requestId: 3 } });
    expect(signal.aborted).toBe(true);
    await new Promise((r) => setTimeout(r, 10));
    expect(peers[0]!.received.some((f) => f.id === 3 && f.method === undefined)).toBe(false);
  });

  test("without a handler, approvals are left to other clients and tool calls are refused", async () => {
    const { peers, factory } = scripted();
    await client(factory);
    peers[0]!.push({ id: 1, method: "item/fileChange/requestApproval", params: { threadId: "t1", turnId: "u1", itemId: "i1", startedAtMs: 0 } });
    peers[0]!.push({ id: 2, method: "item/tool/call", params: { threadId: "t1", turnId: "u1", callId: "c", tool: "x", arguments: {} } });
    const refused = await peers[0]!.got((f) => f.id === 2 && f.method === undefined);
    expect(refused.error).toMatchObject({ code: -32601 });
    expect(peers[0]!.received.some((f) => f.id === 1 && f.method === undefined)).toBe(false);
  });

  test("a handler's RpcError is answered with its code", async () => {
    const { peers, factory } = scripted();
    const c = await client(factory);
    c.handle("item/tool/call", () => {
      throw new RpcError("item/tool/call", -32602, "bad arguments");
    });
    peers[0]!.push({ id: 5, method: "item/tool/call", params: { threadId: "t1", turnId: "u1", callId: "c", tool: "x", arguments: {} } });
    expect((await peers[0]!.got((f) => f.id === 5 && f.method === undefined)).error).toEqual({ code: -32602, message: "bad arguments" });
  });

  test("a refused initialize closes the client", async () => {
    const peers: Peer[] = [];
    const factory = () => {
      const p = new Peer((peer, f) => {
        if (f.method === "initialize") peer.push({ id: f.id, error: { code: -32600, message: "Invalid clientInfo.name" } });
      });
      peers.push(p);
      return p;
    };
    const c = new AppServerClient({ url: "ws://fake", socketFactory: factory, reconnect: { initialDelayMs: 1 } });
    await expect(c.connect()).rejects.toBeInstanceOf(RpcError);
    expect(c.state).toBe("closed");
    expect(peers).toHaveLength(1);
  });
});
