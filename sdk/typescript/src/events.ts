// The HTTP API's event stream (GET /v1/threads/{id}/events), read over
// fetch rather than EventSource: EventSource cannot send an Authorization
// header or a per-connection ticket header, Node 20 has none, and it retries
// on its own schedule without telling 410 (events gone) from a dropped
// connection. fetch streams work alike in browsers and Node; the SSE framing
// is parsed by eventsource-parser.
//
// Resume. Every event has its position as SSE id; the stream remembers the
// last one and reconnects with Last-Event-ID, and the daemon continues right
// after it (docs/http-api.md, "Events"). Events at or below the last
// position are dropped, so none is delivered twice.

import { createParser } from "eventsource-parser";
import { type Auth, withQuery } from "./auth.js";
import { Backoff, type ReconnectOptions, type StateChange, sleep } from "./backoff.js";
import { AbortError, ConnectionError, EventsGoneError, HttpError, type Problem } from "./errors.js";
import type { HttpStreamEvents } from "./extensions.js";

/**
 * The factor between a thread notification's number (seq) and its
 * position on the stream; other events sit between two numbered ones.
 */
export const POSITIONS_PER_SEQ = 65_536;

/** One event of a thread's stream. */
export type StreamEvent = {
  [M in keyof HttpStreamEvents]: {
    /** The event's SSE id: its position, as a string (what Last-Event-ID takes). */
    id: string;
    /** The position as a number; it grows along the thread. */
    position: number;
    /** The thread notification's number in its log (position / 65,536), for numbered notifications. */
    seq?: number;
    /** The SSE event name: the notification or request method. */
    method: M;
    params: HttpStreamEvents[M];
    /** On approval and user-input requests: answer with HttpClient.answerApproval. */
    requestId?: string;
    /** When the daemon emitted it (Unix ms). */
    emittedAtMs?: number;
  };
}[keyof HttpStreamEvents];

/** Options of an event stream. */
export interface EventStreamOptions {
  /** Start right after this position (?after=); default: every event the daemon still buffers. */
  after?: number | string;
  /** End the stream after the first turn/completed. */
  until?: "turnCompleted";
  /** Reconnect policy, or false to end the stream when the connection is lost. */
  reconnect?: ReconnectOptions | false;
  /**
   * Reconnect when nothing (not even a keep-alive, sent every 15 s) came for
   * this long; default 45,000 ms.
   */
  idleTimeoutMs?: number;
  /** Called with each event, in order. */
  onEvent: (event: StreamEvent) => void;
  /** Called on every state change, for UIs. */
  onStateChange?: (change: StateChange) => void;
  /** Closes the stream when aborted. */
  signal?: AbortSignal;
}

/** What an event stream needs from its HTTP client. */
export interface StreamTransport {
  /** The daemon's base URL (http://host:port). */
  baseUrl: string;
  auth: Auth;
  fetch: typeof fetch;
}

/**
 * A thread's event stream, reconnecting and resuming from the last event it
 * delivered. done settles when it ends: resolved after `until` was met or
 * close(), rejected with what ended it otherwise (EventsGoneError, an
 * HttpError such as 401 or 404, a ConnectionError once reconnecting gave up).
 */
export class EventStream {
  /** Settles when the stream has ended. */
  readonly done: Promise<void>;
  private lastId: string | undefined;
  private lastPosition = -1;
  private readonly closer = new AbortController();

  constructor(
    private readonly transport: StreamTransport,
    private readonly threadId: string,
    private readonly opts: EventStreamOptions,
  ) {
    if (opts.after !== undefined) {
      this.lastId = String(opts.after);
      this.lastPosition = Number(opts.after);
    }
    const outer = opts.signal;
    if (outer) {
      if (outer.aborted) this.close();
      else outer.addEventListener("abort", () => this.close(), { once: true });
    }
    this.done = this.run();
    // done is for callers who want it; an unobserved failure has been
    // reported through onStateChange.
    this.done.catch(() => {});
  }

  /** The id of the last event delivered, to resume from in another stream. */
  get lastEventId(): string | undefined {
    return this.lastId;
  }

  /** Ends the stream. */
  close(): void {
    this.closer.abort(new AbortError("the stream was closed"));
  }

  private state(change: StateChange): void {
    this.opts.onStateChange?.(change);
  }

  private async run(): Promise<void> {
    const backoff = new Backoff(this.opts.reconnect === false ? { maxAttempts: 0 } : this.opts.reconnect);
    let opened = false;
    let lastError: unknown;
    try {
      while (!this.closer.signal.aborted) {
        this.state({ state: opened ? "reconnecting" : "connecting", attempt: backoff.attempt, ...(lastError ? { error: lastError } : {}) });
        try {
          const ended = await this.attempt(() => {
            opened = true;
            backoff.reset();
            this.state({ state: "open", attempt: 0 });
          });
          if (ended) break;
          lastError = new ConnectionError("the event stream ended");
        } catch (err) {
          if (this.closer.signal.aborted) break;
          if (fatal(err)) throw err;
          lastError = err;
        }
        if (backoff.exhausted) throw new ConnectionError("the event stream was lost", { cause: lastError });
        await sleep(backoff.next(), this.closer.signal).catch(() => {});
      }
      this.state({ state: "closed", attempt: 0 });
    } catch (err) {
      this.state({ state: "closed", attempt: backoff.attempt, error: err });
      throw err;
    }
  }

  // attempt reads the stream once; it resolves true when the stream ended
  // as asked (until), false when the daemon ended it otherwise.
  private async attempt(onOpen: () => void): Promise<boolean> {
    const { baseUrl, auth } = this.transport;
    const creds = await auth.credentials("sse");
    const url = new URL(`/v1/threads/${encodeURIComponent(this.threadId)}/events`, baseUrl);
    if (this.lastId !== undefined) url.searchParams.set("after", this.lastId);
    if (this.opts.until) url.searchParams.set("until", this.opts.until);
    const headers: Record<string, string> = { Accept: "text/event-stream", ...creds.headers };
    if (this.lastId !== undefined) headers["Last-Event-ID"] = this.lastId;

    const attempt = new AbortController();
    const stop = () => attempt.abort(this.closer.signal.reason);
    this.closer.signal.addEventListener("abort", stop, { once: true });
    const idleMs = this.opts.idleTimeoutMs ?? 45_000;
    let idle: ReturnType<typeof setTimeout> | undefined;
    const touch = () => {
      if (idle !== undefined) clearTimeout(idle);
      idle = setTimeout(() => attempt.abort(new ConnectionError(`no data on the event stream for ${idleMs} ms`)), idleMs);
    };
    try {
      touch();
      const res = await this.transport.fetch(withQuery(url.toString(), creds.query), {
        headers,
        signal: attempt.signal,
        cache: "no-store",
        credentials: auth.fetchCredentials ?? "same-origin",
      });
      if (!res.ok) throw await httpError(res);
      if (!res.body) throw new ConnectionError("the event stream has no body");
      onOpen();
      let ended = false;
      let failure: unknown;
      const parser = createParser({
        onEvent: (msg) => {
          if (ended || failure) return;
          try {
            ended = this.deliver(msg.id, msg.event, msg.data);
          } catch (err) {
            failure = err;
          }
        },
      });
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          touch();
          parser.feed(value);
          if (failure || ended) break;
        }
      } catch (err) {
        throw attempt.signal.aborted ? (attempt.signal.reason ?? err) : new ConnectionError("the event stream was cut", { cause: err });
      } finally {
        reader.cancel().catch(() => {});
      }
      if (failure) throw failure;
      return ended;
    } finally {
      if (idle !== undefined) clearTimeout(idle);
      this.closer.signal.removeEventListener("abort", stop);
    }
  }

  // deliver hands one SSE event to the consumer unless it was delivered
  // before; it returns true when the stream is to end (until).
  private deliver(id: string | undefined, event: string | undefined, data: string): boolean {
    const body = JSON.parse(data) as { method?: string; params?: unknown; emittedAtMs?: number; requestId?: string };
    const method = body.method ?? event ?? "message";
    if (method === "stream/error") throw new EventsGoneError(body.params as Problem);
    if (id === undefined) return false; // every event of this API has an id
    const position = Number(id);
    if (!Number.isFinite(position) || position <= this.lastPosition) return false;
    this.lastId = id;
    this.lastPosition = position;
    const ev = { id, position, method, params: body.params } as StreamEvent;
    if (position % POSITIONS_PER_SEQ === 0) ev.seq = position / POSITIONS_PER_SEQ;
    if (typeof body.requestId === "string") ev.requestId = body.requestId;
    if (typeof body.emittedAtMs === "number") ev.emittedAtMs = body.emittedAtMs;
    this.opts.onEvent(ev);
    return this.opts.until === "turnCompleted" && method === "turn/completed";
  }
}

/** httpError reads an error answer: a problem+json body, or a stand-in. */
export async function httpError(res: Response): Promise<HttpError | EventsGoneError> {
  let problem: Problem | undefined;
  try {
    const body = (await res.json()) as Partial<Problem>;
    if (typeof body?.type === "string" && typeof body.title === "string") problem = body as Problem;
  } catch {
    // not JSON
  }
  const p = problem ?? { type: "about:blank", title: res.statusText || `HTTP ${res.status}`, status: res.status };
  return res.status === 410 ? new EventsGoneError(p) : new HttpError(res.status, p);
}

// fatal tells the failures that reconnecting cannot mend.
function fatal(err: unknown): boolean {
  if (err instanceof EventsGoneError) return true;
  if (err instanceof HttpError) return err.status >= 400 && err.status < 500 && err.status !== 408 && err.status !== 429;
  return err instanceof SyntaxError; // a body that is not the API's
}
