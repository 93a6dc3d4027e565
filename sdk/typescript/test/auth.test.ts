// Credentials on both transports, against a daemon that requires a
// capability token.

import { describe, expect, onTestFinished, test } from "vitest";
import { AppServerClient, bearerAuth, HttpClient, HttpError, type StateChange } from "../src/index.js";
import { guarded } from "./helpers.js";

describe("bearerAuth", () => {
  test("the token opens the websocket and the HTTP API; the token function is asked each time", async () => {
    let asked = 0;
    const auth = bearerAuth(() => {
      asked++;
      return guarded().token;
    });
    const client = new AppServerClient({ url: guarded().wsUrl, auth });
    onTestFinished(() => client.close());
    await client.connect();
    const { thread } = await client.request("thread/start", {});
    const http = new HttpClient({ baseUrl: guarded().httpUrl, auth });
    expect((await http.getThread(thread.id)).id).toBe(thread.id);
    expect(asked).toBe(2);
  });

  test("a wrong token is refused once, not retried", async () => {
    const states: StateChange["state"][] = [];
    const client = new AppServerClient({
      url: guarded().wsUrl,
      auth: bearerAuth("wrong"),
      reconnect: { initialDelayMs: 1 },
      onStateChange: (c) => states.push(c.state),
    });
    onTestFinished(() => client.close());
    await expect(client.connect()).rejects.toThrow(/401/);
    expect(states).toEqual(["connecting", "closed"]);

    const err = await new HttpClient({ baseUrl: guarded().httpUrl, auth: bearerAuth("wrong") }).listThreads().catch((e) => e);
    expect(err).toBeInstanceOf(HttpError);
    expect(err.kind).toBe("unauthorized");
  });
});
