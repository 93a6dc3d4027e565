// The websocket client against a real daemon on the fake model.

import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, onTestFinished, test } from "vitest";
import {
  AppServerClient,
  type ClientOptions,
  HttpClient,
  type Notification,
  type Resumed,
  RpcError,
  RpcErrorCode,
  type StateChange,
} from "../src/index.js";
import { CutProxy, daemon, next, until, workspace } from "./helpers.js";
import { prompts, weatherTool } from "./script.js";

async function connect(opts: Partial<ClientOptions> = {}): Promise<AppServerClient> {
  const client = new AppServerClient({ url: daemon().wsUrl, clientInfo: { name: "sdk-test", version: "0" }, ...opts });
  onTestFinished(() => client.close());
  await client.connect();
  return client;
}

const text = (t: string) => ({ type: "text" as const, text: t, text_elements: [] });

describe("AppServerClient", () => {
  test("streams a turn to completion", async () => {
    const client = await connect();
    expect(client.state).toBe("open");
    expect(client.initializeResponse?.userAgent).toMatch(/^appserver\//);
    const { thread } = await client.request("thread/start", { cwd: await workspace() });

    let streamed = "";
    client.on("item/agentMessage/delta", (p) => {
      if (p.threadId === thread.id) streamed += p.delta;
    });
    const completed = next(client, "turn/completed", thread.id);
    const agentMessage = new Promise<string>((resolve) =>
      client.on("item/completed", (p) => {
        if (p.threadId === thread.id && p.item.type === "agentMessage") resolve(p.item.text);
      }),
    );
    const { turn } = await client.request("turn/start", { threadId: thread.id, input: [text(prompts.turn.prompt)] });
    expect(turn.status).toBe("inProgress");

    const done = await completed;
    expect(done.params.turn.id).toBe(turn.id);
    expect(done.params.turn.status).toBe("completed");
    expect(done.seq).toBeGreaterThan(0);
    expect(await agentMessage).toBe(prompts.turn.text);
    expect(streamed).toBe(prompts.turn.text);
  });

  test("errors carry the JSON-RPC code", async () => {
    const client = await connect();
    // A method of the reference's Windows sandbox, which appserver never serves.
    const unserved = await client.request("windowsSandbox/readiness", undefined).catch((e) => e);
    expect(unserved).toBeInstanceOf(RpcError);
    expect(unserved.code).toBe(RpcErrorCode.MethodNotFound);
    expect(unserved.method).toBe("windowsSandbox/readiness");

    const unknown = await client
      .request("thread/read", { threadId: "00000000-0000-7000-8000-000000000000", includeTurns: false })
      .catch((e) => e);
    expect(unknown).toBeInstanceOf(RpcError);
    expect(unknown.code).toBe(RpcErrorCode.InvalidRequest);
    expect(unknown.message).toContain("thread not loaded");
  });

  test("answers a dynamic tool call with a typed handler", async () => {
    const client = await connect();
    const calls: unknown[] = [];
    client.handle("item/tool/call", async (params) => {
      calls.push(params.arguments);
      expect(params.tool).toBe("lookup_weather");
      return { contentItems: [{ type: "inputText", text: "Sunny, 21C" }], success: true };
    });
    const { thread } = await client.request("thread/start", { cwd: await workspace(), dynamicTools: [weatherTool] });
    const completed = next(client, "turn/completed", thread.id);
    const toolItem = new Promise<unknown>((resolve) =>
      client.on("item/completed", (p) => {
        if (p.threadId === thread.id && p.item.type === "dynamicToolCall") resolve(p.item);
      }),
    );
    await client.request("turn/start", { threadId: thread.id, input: [text(prompts.tool.prompt)] });

    const done = await completed;
    expect(done.params.turn.status).toBe("completed");
    expect(calls).toEqual([{ city: "Paris" }]);
    expect(await toolItem).toMatchObject({
      id: prompts.tool.callId,
      status: "completed",
      success: true,
      contentItems: [{ type: "inputText", text: "Sunny, 21C" }],
    });
    const { thread: read } = await client.request("thread/read", { threadId: thread.id, includeTurns: true });
    const last = read.turns.at(-1)?.items.at(-1);
    expect(last).toMatchObject({ type: "agentMessage", text: prompts.tool.text });
  });

  test("answers a command approval with a typed handler", async () => {
    const client = await connect();
    const cwd = await workspace();
    const asked: string[] = [];
    client.handle("item/commandExecution/requestApproval", (params) => {
      asked.push(params.command ?? "");
      return { decision: "accept" };
    });
    const { thread } = await client.request("thread/start", { cwd, approvalPolicy: "untrusted", sandbox: "workspace-write" });
    const completed = next(client, "turn/completed", thread.id);
    const command = new Promise<unknown>((resolve) =>
      client.on("item/completed", (p) => {
        if (p.threadId === thread.id && p.item.type === "commandExecution") resolve(p.item);
      }),
    );
    await client.request("turn/start", { threadId: thread.id, input: [text(prompts.approve.prompt)] });

    expect((await completed).params.turn.status).toBe("completed");
    expect(asked).toHaveLength(1);
    expect(asked[0]).toContain(`touch ${prompts.approve.file}`);
    expect(await command).toMatchObject({ status: "completed", exitCode: 0 });
    expect(existsSync(join(cwd, prompts.approve.file))).toBe(true);
  });

  test("resumes after a forced disconnect without a gap or a repeat", async () => {
    const proxy = await CutProxy.start(daemon().wsUrl);
    const states: StateChange["state"][] = [];
    const client = await connect({
      url: proxy.url("ws"),
      reconnect: { initialDelayMs: 20, maxDelayMs: 200 },
      onStateChange: (c) => states.push(c.state),
    });
    const resumed: Resumed[] = [];
    client.onResumed((r) => resumed.push(r));
    const { thread } = await client.request("thread/start", { cwd: await workspace() });

    const numbered: Notification[] = [];
    let streamed = "";
    client.onNotification((n) => {
      if (n.threadId !== thread.id || n.seq === undefined) return;
      numbered.push(n);
      if (n.method === "item/agentMessage/delta") streamed += n.params.delta;
    });
    const completed = next(client, "turn/completed", thread.id);
    await client.request("turn/start", { threadId: thread.id, input: [text(prompts.resumeWs.prompt)] });

    // Cut the connection in the middle of the streamed message.
    const deltas = () => numbered.filter((n) => n.method === "item/agentMessage/delta").length;
    await until(client, () => deltas() >= 5);
    const seqAtCut = numbered.at(-1)!.seq!;
    // Down long enough for the turn to go on without the client.
    proxy.cut(300);
    const done = await completed;

    expect(done.params.turn.status).toBe("completed");
    expect(states.slice(0, 3)).toEqual(["connecting", "open", "reconnecting"]);
    expect(states.at(-1)).toBe("open");
    expect(new Set(states.slice(2, -1))).toEqual(new Set(["reconnecting"]));
    expect(resumed).toEqual([expect.objectContaining({ threadId: thread.id, afterSeq: expect.any(Number) })]);
    expect(resumed[0]!.afterSeq).toBeGreaterThanOrEqual(seqAtCut);
    expect(done.seq).toBeGreaterThan(seqAtCut + 1);

    // Every number once, in order, from the first to the last.
    const seqs = numbered.map((n) => n.seq!);
    expect(seqs).toEqual(seqs.map((_, i) => seqs[0]! + i));
    expect(streamed).toBe(prompts.resumeWs.text);

    // And the same events as the thread's durable log, read back in full,
    // but the deltas: the log keeps the completed message whole instead.
    const logged: [number, string][] = [];
    const http = new HttpClient({ baseUrl: daemon().httpUrl });
    await http.events(thread.id, {
      after: 0,
      until: "turnCompleted",
      onEvent: (ev) => {
        if (ev.seq !== undefined) logged.push([ev.seq, ev.method]);
      },
    }).done;
    expect(stored(numbered)).toEqual(logged);
  });

  test("resumes a sub-agent's events, which reach the parent's client, after a forced disconnect", async () => {
    const proxy = await CutProxy.start(daemon().wsUrl);
    const client = await connect({ url: proxy.url("ws"), reconnect: { initialDelayMs: 20, maxDelayMs: 200 } });
    const { thread } = await client.request("thread/start", { cwd: await workspace() });

    // The child's notifications, numbered in the child's own log.
    const child: Notification[] = [];
    let streamed = "";
    client.onNotification((n) => {
      if (n.threadId === undefined || n.threadId === thread.id || n.seq === undefined) return;
      child.push(n);
      if (n.method === "item/agentMessage/delta") streamed += n.params.delta;
    });
    const completed = next(client, "turn/completed", thread.id);
    await client.request("turn/start", { threadId: thread.id, input: [text(prompts.subAgent.prompt)] });

    await until(client, () => child.filter((n) => n.method === "item/agentMessage/delta").length >= 5);
    proxy.cut(300);
    expect((await completed).params.turn.status).toBe("completed");

    const childId = child[0]!.threadId!;
    expect(new Set(child.map((n) => n.threadId))).toEqual(new Set([childId]));
    expect(streamed).toBe(prompts.subAgent.childText);
    const seqs = child.map((n) => n.seq!);
    expect(seqs).toEqual(seqs.map((_, i) => seqs[0]! + i));
    const logged: [number, string][] = [];
    await new HttpClient({ baseUrl: daemon().httpUrl }).events(childId, {
      after: 0,
      until: "turnCompleted",
      onEvent: (ev) => {
        if (ev.seq !== undefined) logged.push([ev.seq, ev.method]);
      },
    }).done;
    expect(stored(child)).toEqual(logged);
  });
});

/** The numbers and methods of the notifications the durable log keeps: all but the deltas of completed items. */
function stored(ns: Notification[]): [number, string][] {
  return ns.filter((n) => !n.method.endsWith("/delta") && !n.method.endsWith("Delta")).map((n) => [n.seq!, n.method]);
}
