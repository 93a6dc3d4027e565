// The HTTP API client (/v1, api/openapi.yaml): typed from the OpenAPI
// document through openapi-fetch, with the thread event stream of
// events.ts.

import createClient, { type Client } from "openapi-fetch";
import { type Auth, noAuth, withQuery } from "./auth.js";
import { HttpError, type Problem } from "./errors.js";
import { EventStream, type EventStreamOptions } from "./events.js";
import type { components, operations, paths } from "./generated/openapi.js";

/** The OpenAPI document's schemas, by name (Thread, Turn, ItemList, …). */
export type Schemas = components["schemas"];

/** Options of HttpClient. */
export interface HttpClientOptions {
  /** The daemon's URL: http(s)://host:port (ws:// and wss:// are taken as http:// and https://). */
  baseUrl: string;
  /** Credentials for each request and stream; default none. */
  auth?: Auth;
  /** The fetch to use; default the global one. */
  fetch?: typeof fetch;
}

/** How long a turn request waits for the turn to end. */
export interface WaitOptions {
  /** true: until the turn ends; a number: at most that many seconds (Prefer: wait=N). */
  wait?: boolean | number;
}

/** Options of startTurn. */
export interface StartTurnOptions extends WaitOptions {
  /** A retried POST with the same key never starts a second turn. */
  idempotencyKey?: string;
}

/**
 * A client of the HTTP API. Every method throws HttpError (with the
 * problem+json body) on an error status.
 */
export class HttpClient {
  /** The openapi-fetch client the methods use, for requests they do not wrap. */
  readonly raw: Client<paths>;
  private readonly baseUrl: string;
  private readonly auth: Auth;
  private readonly fetchImpl: typeof fetch;

  constructor(opts: HttpClientOptions) {
    this.baseUrl = opts.baseUrl.replace(/^ws(s?):\/\//, "http$1://").replace(/\/+$/, "");
    this.auth = opts.auth ?? noAuth();
    this.fetchImpl = opts.fetch ?? ((input, init) => globalThis.fetch(input, init));
    const auth = this.auth;
    this.raw = createClient<paths>({
      baseUrl: `${this.baseUrl}/v1`,
      fetch: (req) => this.fetchImpl(req),
      credentials: auth.fetchCredentials ?? "same-origin",
    });
    this.raw.use({
      async onRequest({ request }) {
        const creds = await auth.credentials("http");
        const req = creds.query ? new Request(withQuery(request.url, creds.query), request) : request;
        for (const [k, v] of Object.entries(creds.headers ?? {})) req.headers.set(k, v);
        return req;
      },
    });
  }

  /** Creates a thread owned by the caller. */
  async createThread(body: Schemas["ThreadCreateRequest"] = {}): Promise<Schemas["Thread"]> {
    return (await unwrap(this.raw.POST("/threads", { body }))).thread;
  }

  /** Lists the caller's threads, newest first. */
  listThreads(query: NonNullable<operations["listThreads"]["parameters"]["query"]> = {}): Promise<Schemas["ThreadList"]> {
    return unwrap(this.raw.GET("/threads", { params: { query } }));
  }

  /** Reads one thread. */
  async getThread(threadId: string): Promise<Schemas["Thread"]> {
    return (await unwrap(this.raw.GET("/threads/{threadId}", { params: { path: { threadId } } }))).thread;
  }

  /** Lists the sub-agent threads a thread's turns spawned. */
  listChildren(threadId: string): Promise<Schemas["ThreadList"]> {
    return unwrap(this.raw.GET("/threads/{threadId}/children", { params: { path: { threadId } } }));
  }

  /** Lists a thread's persisted items, each with its position. */
  listItems(
    threadId: string,
    query: NonNullable<operations["listItems"]["parameters"]["query"]> = {},
  ): Promise<Schemas["ItemList"]> {
    return unwrap(this.raw.GET("/threads/{threadId}/items", { params: { path: { threadId }, query } }));
  }

  /**
   * Starts a turn (or adds the input to the running one). Its eventsAfter
   * is where the turn's events start on the stream (events(…, {after})).
   */
  startTurn(threadId: string, body: Schemas["TurnCreateRequest"], opts: StartTurnOptions = {}): Promise<Schemas["Turn"]> {
    return unwrap(
      this.raw.POST("/threads/{threadId}/turns", {
        params: {
          path: { threadId },
          ...waitParams(opts),
          header: {
            ...waitHeader(opts),
            ...(opts.idempotencyKey !== undefined ? { "Idempotency-Key": opts.idempotencyKey } : {}),
          },
        },
        body,
      }),
    );
  }

  /** Reads a turn: status, items so far, final message and usage. */
  getTurn(threadId: string, turnId: string, opts: WaitOptions = {}): Promise<Schemas["Turn"]> {
    return unwrap(
      this.raw.GET("/threads/{threadId}/turns/{turnId}", {
        params: { path: { threadId, turnId }, ...waitParams(opts), header: waitHeader(opts) },
      }),
    );
  }

  /** Interrupts a running turn. */
  interruptTurn(threadId: string, turnId: string, opts: WaitOptions = {}): Promise<Schemas["Turn"]> {
    return unwrap(
      this.raw.POST("/threads/{threadId}/turns/{turnId}/interrupt", {
        params: { path: { threadId, turnId }, ...waitParams(opts), header: waitHeader(opts) },
      }),
    );
  }

  /** Answers a dynamic tool call shown on the event stream (item/tool/call). */
  answerToolCall(threadId: string, callId: string, body: Schemas["ToolCallAnswer"]): Promise<Schemas["ToolCallAnswered"]> {
    return unwrap(this.raw.POST("/threads/{threadId}/tool-calls/{callId}", { params: { path: { threadId, callId } }, body }));
  }

  /** Answers an approval or user-input request shown on the event stream, by its requestId. */
  answerApproval(
    threadId: string,
    requestId: string,
    body: Schemas["ApprovalDecision"] | Schemas["UserInputAnswer"],
  ): Promise<{ threadId: string; requestId: string }> {
    return unwrap(
      this.raw.POST("/threads/{threadId}/approvals/{requestId}", { params: { path: { threadId, requestId } }, body }),
    );
  }

  /** Lists the daemon's MCP servers and their status. */
  listMcpServers(detail?: "full" | "toolsAndAuthOnly"): Promise<Schemas["MCPServerList"]> {
    return unwrap(this.raw.GET("/mcp-servers", { params: { query: detail ? { detail } : {} } }));
  }

  /**
   * Starts a browser session for the caller's bearer token: the daemon sets
   * its HttpOnly session cookie, which the browser then sends on the
   * websocket and every request (cookieAuth). A page's script never sees
   * the cookie.
   */
  startSession(): Promise<Schemas["Session"]> {
    return unwrap(this.raw.POST("/auth/session", {}));
  }

  /** Ends the session of the cookie the request carries, and clears the cookie (logging out). */
  async endSession(): Promise<void> {
    await unwrap(this.raw.DELETE("/auth/session", {}));
  }

  /**
   * Streams a thread's events (server-sent events over fetch), reconnecting
   * with Last-Event-ID so that no event is lost or repeated.
   */
  events(threadId: string, opts: EventStreamOptions): EventStream {
    return new EventStream({ baseUrl: this.baseUrl, auth: this.auth, fetch: this.fetchImpl }, threadId, opts);
  }
}

function waitParams(opts: WaitOptions): { query?: { wait: boolean } } {
  return opts.wait === true ? { query: { wait: true } } : {};
}

function waitHeader(opts: WaitOptions): { Prefer?: string } {
  return typeof opts.wait === "number" ? { Prefer: `wait=${opts.wait}` } : {};
}

// unwrap returns a successful answer's body or throws its problem.
async function unwrap<T>(p: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  const { data, error, response } = await p;
  if (response.ok) return data as T;
  const body = error as Partial<Problem> | undefined;
  const problem: Problem =
    typeof body?.type === "string" && typeof body.title === "string"
      ? (body as Problem)
      : { type: "about:blank", title: response.statusText || `HTTP ${response.status}`, status: response.status };
  throw new HttpError(response.status, problem);
}
