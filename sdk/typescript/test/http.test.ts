// The HTTP client and its event stream against a real daemon.

import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { HttpClient, HttpError, type StateChange, type StreamEvent } from "../src/index.js";
import { CutProxy, daemon, workspace } from "./helpers.js";
import { prompts, weatherTool } from "./script.js";

const text = (t: string) => ({ type: "text" as const, text: t });

describe("HttpClient", () => {
  test("runs a turn and waits for it", async () => {
    const http = new HttpClient({ baseUrl: daemon().httpUrl });
    const thread = await http.createThread({ cwd: await workspace() });
    const turn = await http.startTurn(thread.id, { input: [text(prompts.httpTurn.prompt)] }, { wait: true });
    expect(turn.status).toBe("completed");
    expect(turn.finalMessage).toBe(prompts.httpTurn.text);

    const items = await http.listItems(thread.id);
    expect(items.data.map((i) => i.item.type)).toEqual(["userMessage", "agentMessage"]);
    expect((await http.getThread(thread.id)).id).toBe(thread.id);
  });

  test("errors are problems with their status", async () => {
    const http = new HttpClient({ baseUrl: daemon().wsUrl }); // the ws:// address works too
    const err = await http.getThread("00000000-0000-7000-8000-000000000000").catch((e) => e);
    expect(err).toBeInstanceOf(HttpError);
    expect(err.status).toBe(404);
    expect(err.kind).toBe("not-found");
    expect(err.problem.type).toBe("urn:appserver:problem:not-found");
  });

  test("answers a dynamic tool call shown on the event stream", async () => {
    const http = new HttpClient({ baseUrl: daemon().httpUrl });
    const thread = await http.createThread({ cwd: await workspace(), dynamicTools: [weatherTool] });
    const turn = await http.startTurn(thread.id, { input: [text(prompts.httpTool.prompt)] });
    const methods: string[] = [];
    const answered: Promise<unknown>[] = [];
    await http.events(thread.id, {
      after: turn.eventsAfter!,
      until: "turnCompleted",
      onEvent: (ev) => {
        methods.push(ev.method);
        if (ev.method === "item/tool/call") {
          expect(ev.params.arguments).toEqual({ city: "Oslo" });
          answered.push(
            http.answerToolCall(thread.id, ev.params.callId, {
              contentItems: [{ type: "inputText", text: "Rain, 9C" }],
              success: true,
            }),
          );
        }
      },
    }).done;
    expect(await Promise.all(answered)).toEqual([{ threadId: thread.id, callId: prompts.httpTool.callId }]);
    expect(methods).toContain("item/tool/call/resolved");
    const ended = await http.getTurn(thread.id, turn.id, { wait: true });
    expect(ended.status).toBe("completed");
    expect(ended.finalMessage).toBe(prompts.httpTool.text);
  });

  test("answers an approval shown on the event stream", async () => {
    const http = new HttpClient({ baseUrl: daemon().httpUrl });
    const cwd = await workspace();
    const thread = await http.createThread({ cwd, approvalPolicy: "untrusted", sandbox: "workspace-write" });
    const turn = await http.startTurn(thread.id, { input: [text(prompts.httpApprove.prompt)] });
    const requests: string[] = [];
    await http.events(thread.id, {
      after: turn.eventsAfter!,
      until: "turnCompleted",
      onEvent: (ev) => {
        if (ev.method === "item/commandExecution/requestApproval") {
          requests.push(ev.requestId!);
          void http.answerApproval(thread.id, ev.requestId!, { decision: "accept" });
        }
      },
    }).done;
    expect(requests).toHaveLength(1);
    expect((await http.getTurn(thread.id, turn.id)).finalMessage).toBe(prompts.httpApprove.text);
    expect(existsSync(join(cwd, prompts.httpApprove.file))).toBe(true);
  });

  test("the event stream resumes after a forced disconnect without a gap or a repeat", async () => {
    const proxy = await CutProxy.start(daemon().httpUrl);
    // Each stream request's position, as the daemon sees it.
    const resumedFrom: (string | null)[] = [];
    const http = new HttpClient({
      baseUrl: proxy.url("http"),
      fetch: (input, init) => {
        if (String(input instanceof Request ? input.url : input).includes("/events")) {
          resumedFrom.push(new Headers(init?.headers).get("Last-Event-ID"));
        }
        return fetch(input, init);
      },
    });
    const thread = await http.createThread({ cwd: await workspace() });
    const turn = await http.startTurn(thread.id, { input: [text(prompts.resumeSse.prompt)] });

    const events: StreamEvent[] = [];
    const states: StateChange["state"][] = [];
    let streamed = "";
    let cut = -1;
    let lastBeforeCut = "";
    await http.events(thread.id, {
      after: turn.eventsAfter!,
      until: "turnCompleted",
      reconnect: { initialDelayMs: 20, maxDelayMs: 200 },
      onStateChange: (c) => states.push(c.state),
      onEvent: (ev) => {
        events.push(ev);
        if (cut < 0) lastBeforeCut = ev.id;
        if (ev.method !== "item/agentMessage/delta") return;
        streamed += ev.params.delta;
        // Cut the stream in the middle of the message, for long enough
        // that the turn goes on without the client.
        if (cut < 0 && streamed.length > 40) {
          cut = ev.position;
          proxy.cut(300);
        }
      },
    }).done;

    expect(cut).toBeGreaterThan(0);
    // The first request starts at the turn, the ones after the cut where
    // the stream was (the refused ones while the proxy was down included).
    expect(resumedFrom[0]).toBe(String(turn.eventsAfter));
    expect(new Set(resumedFrom.slice(1))).toEqual(new Set([lastBeforeCut]));
    expect(states.slice(0, 3)).toEqual(["connecting", "open", "reconnecting"]);
    expect(states.slice(-2)).toEqual(["open", "closed"]);
    expect(events.at(-1)?.method).toBe("turn/completed");
    expect(events.filter((e) => e.position > cut).length).toBeGreaterThan(5);
    expect(streamed).toBe(prompts.resumeSse.text);

    // Positions only grow, and the thread's numbered events are all there.
    const positions = events.map((e) => e.position);
    expect(positions).toEqual([...positions].sort((a, b) => a - b));
    expect(new Set(positions).size).toBe(positions.length);
    const seqs = events.filter((e) => e.seq !== undefined).map((e) => e.seq!);
    expect(seqs).toEqual(seqs.map((_, i) => seqs[0]! + i));

    // The same events as a stream read straight from the daemon.
    const direct = new HttpClient({ baseUrl: daemon().httpUrl });
    const again: [string, string][] = [];
    await direct.events(thread.id, {
      after: turn.eventsAfter!,
      until: "turnCompleted",
      onEvent: (ev) => again.push([ev.id, ev.method]),
    }).done;
    expect(events.map((e) => [e.id, e.method])).toEqual(again);
  });
});
