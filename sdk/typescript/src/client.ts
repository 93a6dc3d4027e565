// The websocket JSON-RPC client: requests, notifications, server requests,
// and reconnect with resume.
//
// Resume. The client initializes with experimentalApi and eventSeq, so the
// daemon numbers each thread's notifications (`seq`, docs/protocol.md §2.6).
// It keeps, per thread, the last number it delivered and drops any
// notification at or below it, and it keeps the threads this connection is
// subscribed to (thread/start, thread/resume, thread/fork; thread/unsubscribe
// ends one). After a reconnect it resumes each with thread/resume afterSeq,
// and the daemon replays what the thread's log holds after that number
// before the live notifications: nothing lost, nothing repeated. A
// sub-agent's notifications reach its ancestors' subscribers numbered in
// the sub-agent's own log, which resuming the ancestor does not replay: the
// client follows such threads and resumes them too.
//
// Server requests. A handler's invocation outlives the connection it came
// on: when the daemon offers the same request again after a reconnect (it
// does for requests still waiting, §7), the answer goes back under the new
// id instead of calling the handler twice. serverRequest/resolved (another
// client answered) and the end of the request's turn abort its signal.

import { type Auth, noAuth, withQuery } from "./auth.js";
import { Backoff, type ConnectionState, type ReconnectOptions, type StateChange, sleep } from "./backoff.js";
import { AbortError, ConnectionError, HttpError, RpcError, RpcErrorCode } from "./errors.js";
import type { AppserverCapabilities, NotificationFrame } from "./extensions.js";
import type { ClientInfo, InitializeResponse, RequestId, ServerNotifications } from "./generated/protocol.js";
import { serverRequestMethods } from "./generated/protocol.js";
import type {
  Method,
  Notification,
  NotificationOf,
  ParamsOf,
  Resumed,
  ResultOf,
  ServerRequestContext,
  ServerRequestHandler,
  ServerRequestMethod,
} from "./protocol.js";
import { openSocket, type Socket, type SocketFactory } from "./socket.js";

/** Options of AppServerClient. */
export interface ClientOptions {
  /** The daemon's websocket URL, e.g. ws://127.0.0.1:7878. */
  url: string;
  /** Who the client is (initialize's clientInfo); default appserver-ts. */
  clientInfo?: ClientInfo;
  /** Credentials for the websocket upgrade; default none. */
  auth?: Auth;
  /**
   * Capabilities besides experimentalApi and eventSeq, which the client
   * always sets (resume needs them).
   */
  capabilities?: Omit<AppserverCapabilities, "experimentalApi" | "eventSeq">;
  /** Reconnect policy, or false to close when the connection is lost. */
  reconnect?: ReconnectOptions | false;
  /** Called on every state change, for UIs. */
  onStateChange?: (change: StateChange) => void;
  /** How long initialize and each thread/resume after a reconnect may take (default 30 s). */
  handshakeTimeoutMs?: number;
  /** Opens the websocket; default openSocket (ws in Node, the browser's WebSocket elsewhere). */
  socketFactory?: SocketFactory;
}

/** Options of one request. */
export interface RequestOptions {
  /** Gives up waiting for the answer (the daemon may still carry the request out). */
  signal?: AbortSignal;
  /** Gives up after this many ms. */
  timeoutMs?: number;
}

type ParamsArgs<M extends Method> = undefined extends ParamsOf<M>
  ? [params?: ParamsOf<M>, options?: RequestOptions]
  : [params: ParamsOf<M>, options?: RequestOptions];

type Pending = {
  method: string;
  socket: Socket;
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
  cleanup: () => void;
  onResult?: (result: unknown) => void;
};

type Invocation = {
  key: string;
  id: RequestId;
  socket: Socket | undefined;
  threadId?: string;
  turnId?: string;
  abort: AbortController;
  answer?: { result: unknown } | { error: { code: number; message: string } };
  sent?: boolean; // the answer went out (it may have been lost with its connection)
};

// keptAnswers bounds the answered requests kept to answer again if the
// daemon offers them again; each is forgotten when settled (its turn ended,
// serverRequest/resolved) or, beyond this many, oldest first.
const keptAnswers = 256;

// Requests the daemon sends to every subscriber of a thread: a client with
// no handler for them stays silent, so that another client can answer.
const fanOut = new Set<string>([
  "item/commandExecution/requestApproval",
  "item/fileChange/requestApproval",
  "item/tool/requestUserInput",
  "mcpServer/elicitation/request",
  "item/permissions/requestApproval",
]);
const serverRequests = new Set<string>(serverRequestMethods);

const defaultClientInfo: ClientInfo = { name: "appserver-ts", title: null, version: "0.1.0" };

/**
 * A websocket JSON-RPC client of appserver. connect() opens and initializes
 * it; afterwards it reconnects by itself (unless reconnect is false) and
 * resumes the threads it is subscribed to.
 */
export class AppServerClient {
  private readonly opts: ClientOptions;
  private readonly auth: Auth;
  private readonly backoff: Backoff;
  private readonly closer = new AbortController();
  private current: Socket | undefined; // the socket, once initialized
  private stateValue: ConnectionState = "closed";
  private nextId = 1;
  private readonly pending = new Map<RequestId, Pending>();
  private readonly waiters = new Set<{ resolve: (s: Socket) => void; reject: (e: unknown) => void }>();
  private readonly listeners = new Map<string, Set<(n: Notification) => void>>();
  private readonly resumedListeners = new Set<(r: Resumed) => void>();
  private readonly handlers = new Map<string, ServerRequestHandler<ServerRequestMethod>>();
  private readonly subscribed = new Set<string>();
  // Threads whose numbered notifications came without a subscription of
  // this client's (sub-agents of a subscribed thread), and threads whose
  // notifications are no longer wanted (unsubscribed).
  private readonly followed = new Set<string>();
  private readonly unwanted = new Set<string>();
  private readonly lastSeqs = new Map<string, number>();
  private readonly invocations = new Map<string, Invocation>();
  private loop: Promise<void> | undefined;
  private initResult: InitializeResponse | undefined;
  private closedError: unknown;

  constructor(opts: ClientOptions) {
    this.opts = opts;
    this.auth = opts.auth ?? noAuth();
    this.backoff = new Backoff(opts.reconnect === false ? { maxAttempts: 0 } : opts.reconnect);
  }

  /** The connection's state. */
  get state(): ConnectionState {
    return this.stateValue;
  }

  /** The initialize answer of the current (or last) connection. */
  get initializeResponse(): InitializeResponse | undefined {
    return this.initResult;
  }

  /**
   * Opens the connection and initializes it, retrying by the reconnect
   * policy; resolves with the initialize answer.
   */
  async connect(): Promise<InitializeResponse> {
    if (this.closer.signal.aborted) throw new ConnectionError("the client is closed");
    this.loop ??= this.run();
    await this.openSocket();
    return this.initResult as InitializeResponse;
  }

  /** Closes the connection for good: pending requests fail, handlers are aborted. */
  close(): void {
    if (this.closer.signal.aborted) return;
    this.closer.abort(new AbortError("the client was closed"));
    this.finish(undefined);
  }

  /** Sends a request and waits for its result; an error answer throws RpcError. */
  async request<M extends Method>(method: M, ...args: ParamsArgs<M>): Promise<ResultOf<M>> {
    const [params, options] = args;
    const socket = await this.openSocket(options?.signal);
    if (method === "thread/resume") {
      const p = params as ParamsOf<"thread/resume">;
      // The replay that follows the answer starts after afterSeq: deliver it
      // even where this client went further before.
      if (typeof p.afterSeq === "number") this.lastSeqs.set(p.threadId, p.afterSeq);
    }
    // track runs as the answer is read, before the notifications after it.
    return (await this.call(socket, method, params, options, (r) => this.track(method, params, r))) as ResultOf<M>;
  }

  /** Listens to notifications of one method; returns the function that stops it. */
  on<M extends keyof ServerNotifications>(
    method: M,
    listener: (params: ServerNotifications[M], notification: NotificationOf<M>) => void,
  ): () => void {
    return this.listen(method, (n) => listener(n.params as ServerNotifications[M], n as NotificationOf<M>));
  }

  /** Listens to every notification; returns the function that stops it. */
  onNotification(listener: (notification: Notification) => void): () => void {
    return this.listen("*", listener);
  }

  /** Listens to the thread resumptions after reconnects; returns the function that stops it. */
  onResumed(listener: (resumed: Resumed) => void): () => void {
    this.resumedListeners.add(listener);
    return () => this.resumedListeners.delete(listener);
  }

  /**
   * Answers the server requests of a method (approvals, user input, dynamic
   * tool calls, MCP elicitations) with handler's result; a handler that
   * throws answers with an error (an RpcError's code, else -32603). Without
   * a handler, requests sent to every subscriber (approvals, user input,
   * elicitations) are left for another client, others are answered -32601.
   * Returns the function that removes the handler.
   */
  handle<M extends ServerRequestMethod>(method: M, handler: ServerRequestHandler<M>): () => void {
    this.handlers.set(method, handler as unknown as ServerRequestHandler<ServerRequestMethod>);
    return () => {
      if (this.handlers.get(method) === (handler as unknown)) this.handlers.delete(method);
    };
  }

  /**
   * The number of the last notification of a thread this client delivered,
   * if it knows one: a later client can resume from it (thread/resume
   * afterSeq), e.g. after a page reload.
   */
  lastSeq(threadId: string): number | undefined {
    return this.lastSeqs.get(threadId);
  }

  /**
   * The threads the client resumes after a reconnect: those it subscribed
   * to, and the sub-agents of those whose notifications reached it.
   */
  subscriptions(): string[] {
    return [...new Set([...this.subscribed, ...this.followed])];
  }

  // --- connection loop ---

  private setState(state: ConnectionState, error?: unknown): void {
    this.stateValue = state;
    const change: StateChange = { state, attempt: this.backoff.attempt };
    if (error !== undefined) change.error = error;
    this.opts.onStateChange?.(change);
  }

  private async run(): Promise<void> {
    let opened = false;
    let lastError: unknown;
    while (!this.closer.signal.aborted) {
      this.setState(opened ? "reconnecting" : "connecting", lastError);
      try {
        lastError = await this.session(opened, () => {
          opened = true;
        });
      } catch (err) {
        lastError = err;
        if (fatal(err)) break;
      }
      if (this.closer.signal.aborted || this.backoff.exhausted) break;
      try {
        await sleep(this.backoff.next(), this.closer.signal);
      } catch {
        break;
      }
    }
    this.finish(lastError);
  }

  // finish ends the client: state closed, waiters and pending requests
  // rejected, handlers aborted.
  private finish(error: unknown): void {
    if (this.stateValue === "closed" && this.closedError !== undefined) return;
    this.closedError = error ?? new ConnectionError("the client is closed");
    // What the daemon answered (a refused initialize or credential) is
    // passed on as it is; a failed connection is a ConnectionError.
    const err =
      error instanceof RpcError || error instanceof HttpError
        ? error
        : error === undefined
          ? new ConnectionError("the client is closed")
          : new ConnectionError(`connection failed: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
    this.current?.close(1000, "client closed");
    this.current = undefined;
    for (const w of this.waiters) w.reject(err);
    this.waiters.clear();
    for (const [id, p] of this.pending) {
      this.pending.delete(id);
      p.cleanup();
      p.reject(err);
    }
    for (const inv of this.invocations.values()) inv.abort.abort(new AbortError("the client was closed"));
    this.invocations.clear();
    if (!this.closer.signal.aborted) this.closer.abort(err);
    this.setState("closed", error);
  }

  // session runs one connection: open, initialize, resume, then wait for it
  // to drop. It resolves with why it dropped once it was open, and throws
  // when it could not be opened.
  private async session(reconnecting: boolean, onOpen: () => void): Promise<unknown> {
    const creds = await this.auth.credentials("websocket");
    const socket = await (this.opts.socketFactory ?? openSocket)(withQuery(this.opts.url, creds.query), {
      ...(creds.protocols ? { protocols: creds.protocols } : {}),
      ...(creds.headers ? { headers: creds.headers } : {}),
    });
    let dropped!: (why: unknown) => void;
    const lost = new Promise<unknown>((resolve) => (dropped = resolve));
    let lastError: unknown;
    await new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        socket.close(1000, "client closed");
        reject(this.closer.signal.reason);
      };
      this.closer.signal.addEventListener("abort", onAbort, { once: true });
      socket.onopen = () => {
        this.closer.signal.removeEventListener("abort", onAbort);
        resolve();
      };
      socket.onerror = (ev) => {
        lastError = errorOf(ev);
      };
      socket.onclose = (ev) => {
        this.closer.signal.removeEventListener("abort", onAbort);
        reject(lastError ?? new ConnectionError(`websocket closed before opening (${ev.code}${ev.reason ? ` ${ev.reason}` : ""})`));
      };
    });
    socket.onerror = (ev) => {
      lastError = errorOf(ev);
    };
    socket.onclose = (ev) => {
      const why = lastError ?? new ConnectionError(`websocket closed (${ev.code}${ev.reason ? ` ${ev.reason}` : ""})`);
      this.dropped(socket, why);
      dropped(why);
    };
    socket.onmessage = (ev) => {
      if (typeof ev.data === "string") this.receive(socket, ev.data);
    };
    try {
      await Promise.race([this.handshake(socket, reconnecting), lost.then((why) => Promise.reject(why))]);
    } catch (err) {
      socket.close(1000, "handshake failed");
      throw err;
    }
    onOpen();
    this.backoff.reset();
    this.setState("open");
    for (const w of this.waiters) w.resolve(socket);
    this.waiters.clear();
    return lost;
  }

  private async handshake(socket: Socket, reconnecting: boolean): Promise<void> {
    const timeoutMs = this.opts.handshakeTimeoutMs ?? 30_000;
    const capabilities: AppserverCapabilities = { ...this.opts.capabilities, experimentalApi: true, eventSeq: true };
    this.initResult = (await this.call(
      socket,
      "initialize",
      { clientInfo: this.opts.clientInfo ?? defaultClientInfo, capabilities },
      { timeoutMs },
    )) as InitializeResponse;
    socket.send(JSON.stringify({ method: "initialized" }));
    // Answers to server requests may go out from now on (the requests the
    // resumes below bring included); requests of the client's own wait
    // for the state "open".
    this.current = socket;
    if (!reconnecting) return;
    await Promise.all(this.subscriptions().map((threadId) => this.resume(socket, threadId, timeoutMs)));
  }

  // resume subscribes the new connection to a thread again, from the last
  // delivered number when the client knows one.
  private async resume(socket: Socket, threadId: string, timeoutMs: number): Promise<void> {
    const afterSeq = this.lastSeqs.get(threadId);
    const params = afterSeq === undefined ? { threadId } : { threadId, afterSeq, excludeTurns: true };
    const resumed: Resumed = { threadId };
    if (afterSeq !== undefined) resumed.afterSeq = afterSeq;
    try {
      resumed.response = (await this.call(socket, "thread/resume", params, { timeoutMs })) as Resumed["response"];
      // A followed thread is now one this connection subscribed to.
      this.followed.delete(threadId);
      this.subscribed.add(threadId);
    } catch (err) {
      if (!(err instanceof RpcError)) throw err; // the connection failed: the next one resumes it
      this.subscribed.delete(threadId);
      this.followed.delete(threadId);
      resumed.error = err;
    }
    for (const l of this.resumedListeners) l(resumed);
  }

  // dropped forgets a socket that closed: its requests fail (their
  // answers are lost; the daemon may have carried them out) and its
  // server requests wait for the daemon to offer them again.
  private dropped(socket: Socket, why: unknown): void {
    if (this.current === socket) this.current = undefined;
    for (const [id, p] of this.pending) {
      if (p.socket !== socket) continue;
      this.pending.delete(id);
      p.cleanup();
      p.reject(new ConnectionError(`connection lost before ${p.method} was answered`, { cause: why }));
    }
    for (const inv of this.invocations.values()) if (inv.socket === socket) inv.socket = undefined;
  }

  private openSocket(signal?: AbortSignal): Promise<Socket> {
    if (this.current && this.stateValue === "open") return Promise.resolve(this.current);
    if (this.closer.signal.aborted) return Promise.reject(new ConnectionError("the client is closed", { cause: this.closedError }));
    if (!this.loop) return Promise.reject(new ConnectionError("not connected: call connect() first"));
    return new Promise((resolve, reject) => {
      const w = {
        resolve: (s: Socket) => {
          signal?.removeEventListener("abort", onAbort);
          resolve(s);
        },
        reject: (e: unknown) => {
          signal?.removeEventListener("abort", onAbort);
          reject(e);
        },
      };
      const onAbort = () => {
        this.waiters.delete(w);
        reject(signal?.reason ?? new AbortError());
      };
      if (signal?.aborted) return onAbort();
      signal?.addEventListener("abort", onAbort, { once: true });
      this.waiters.add(w);
    });
  }

  // --- requests ---

  private call(
    socket: Socket,
    method: string,
    params: unknown,
    options?: RequestOptions,
    onResult?: (result: unknown) => void,
  ): Promise<unknown> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const signal = options?.signal;
      const onAbort = () => {
        this.pending.delete(id);
        cleanup();
        reject(signal?.reason ?? new AbortError());
      };
      const cleanup = () => {
        if (timer !== undefined) clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
      };
      if (signal?.aborted) return onAbort();
      signal?.addEventListener("abort", onAbort, { once: true });
      if (options?.timeoutMs !== undefined) {
        timer = setTimeout(() => {
          this.pending.delete(id);
          cleanup();
          reject(new AbortError(`${method} timed out after ${options.timeoutMs} ms`));
        }, options.timeoutMs);
      }
      this.pending.set(id, { method, socket, resolve, reject, cleanup, ...(onResult ? { onResult } : {}) });
      const frame: { id: number; method: string; params?: unknown } = { id, method };
      if (params !== undefined) frame.params = params;
      try {
        socket.send(JSON.stringify(frame));
      } catch (err) {
        this.pending.delete(id);
        cleanup();
        reject(new ConnectionError(`could not send ${method}`, { cause: err }));
      }
    });
  }

  // track keeps the subscriptions and positions that requests change.
  private track(method: string, params: unknown, result: unknown): void {
    const threadOf = (r: unknown) => (r as { thread?: { id?: string } } | undefined)?.thread?.id;
    switch (method) {
      case "thread/start": {
        const id = threadOf(result);
        if (id === undefined) return;
        this.subscribed.add(id);
        this.unwanted.delete(id);
        // A new thread's log is empty: everything numbered is to come.
        if (!this.lastSeqs.has(id)) this.lastSeqs.set(id, 0);
        return;
      }
      case "thread/fork": {
        const id = threadOf(result);
        if (id === undefined) return;
        this.subscribed.add(id);
        this.unwanted.delete(id);
        return;
      }
      case "thread/resume": {
        const id = threadOf(result);
        if (id === undefined) return;
        const afterSeq = (params as { afterSeq?: unknown }).afterSeq;
        if (typeof afterSeq !== "number" && !this.subscribed.has(id)) {
          // Resumed from a snapshot (the turns in result): where it stands in
          // the log is known once its next numbered notification comes.
          this.lastSeqs.delete(id);
        }
        this.subscribed.add(id);
        this.followed.delete(id);
        this.unwanted.delete(id);
        return;
      }
      case "thread/unsubscribe": {
        const id = (params as { threadId?: string }).threadId;
        if (id === undefined) return;
        this.subscribed.delete(id);
        this.followed.delete(id);
        this.unwanted.add(id);
        this.lastSeqs.delete(id);
        return;
      }
    }
  }

  // --- incoming ---

  private receive(socket: Socket, text: string): void {
    let msg: unknown;
    try {
      msg = JSON.parse(text);
    } catch {
      return; // not JSON: nothing to answer it with
    }
    if (typeof msg !== "object" || msg === null || Array.isArray(msg)) return;
    const m = msg as { id?: RequestId | null; method?: unknown; params?: unknown; result?: unknown; error?: unknown };
    if (typeof m.method === "string") {
      if (m.id !== undefined && m.id !== null) this.serverRequest(socket, m.id, m.method, m.params);
      else this.notification(msg as NotificationFrame);
      return;
    }
    if (m.id === undefined || m.id === null) return;
    const p = this.pending.get(m.id);
    if (!p) return;
    this.pending.delete(m.id);
    p.cleanup();
    if (m.error !== undefined) {
      const e = m.error as { code?: unknown; message?: unknown; data?: unknown };
      p.reject(
        new RpcError(
          p.method,
          typeof e.code === "number" ? e.code : RpcErrorCode.Internal,
          typeof e.message === "string" ? e.message : "error",
          e.data,
        ),
      );
    } else {
      p.onResult?.(m.result);
      p.resolve(m.result);
    }
  }

  private notification(frame: NotificationFrame): void {
    const params = (frame.params ?? {}) as { threadId?: unknown; thread?: { id?: unknown } };
    const threadId =
      typeof params.threadId === "string" ? params.threadId : typeof params.thread?.id === "string" ? params.thread.id : undefined;
    if (typeof frame.seq === "number" && threadId !== undefined) {
      const last = this.lastSeqs.get(threadId);
      if (last !== undefined && frame.seq <= last) return; // delivered before
      this.lastSeqs.set(threadId, frame.seq);
      if (!this.subscribed.has(threadId) && !this.unwanted.has(threadId)) this.followed.add(threadId);
    }
    const n = { method: frame.method, params: frame.params } as Notification;
    if (typeof frame.seq === "number") n.seq = frame.seq;
    if (threadId !== undefined) n.threadId = threadId;
    if (typeof frame.emittedAtMs === "number") n.emittedAtMs = frame.emittedAtMs;
    this.settle(n);
    for (const key of [n.method, "*"]) {
      for (const l of this.listeners.get(key) ?? []) {
        try {
          l(n);
        } catch (err) {
          reportListenerError(err);
        }
      }
    }
  }

  // settle reacts to the notifications that end server requests and
  // subscriptions.
  private settle(n: Notification): void {
    switch (n.method) {
      case "serverRequest/resolved":
        for (const inv of this.invocations.values()) {
          if (inv.id === n.params.requestId && inv.threadId === n.params.threadId) this.drop(inv, "answered elsewhere");
        }
        return;
      case "turn/completed":
        for (const inv of this.invocations.values()) {
          if (inv.turnId === n.params.turn.id && inv.threadId === n.params.threadId) this.drop(inv, "the turn ended");
        }
        return;
      case "thread/archived":
      case "thread/deleted":
        this.subscribed.delete(n.params.threadId);
        this.followed.delete(n.params.threadId);
        return;
    }
  }

  private drop(inv: Invocation, why: string): void {
    this.invocations.delete(inv.key);
    if (!inv.answer) inv.abort.abort(new AbortError(why));
  }

  private serverRequest(socket: Socket, id: RequestId, method: string, params: unknown): void {
    const p = (params ?? {}) as { threadId?: unknown; turnId?: unknown; callId?: unknown; itemId?: unknown; approvalId?: unknown };
    const str = (v: unknown) => (typeof v === "string" ? v : undefined);
    const threadId = str(p.threadId);
    const turnId = str(p.turnId);
    // The same request offered again (after a reconnect) has the same
    // thread and call or item; an elicitation keeps its id.
    const what = str(p.callId) ?? (str(p.itemId) !== undefined ? `${p.itemId}/${str(p.approvalId) ?? ""}` : `id:${id}`);
    const key = `${method}\u0000${threadId ?? ""}\u0000${what}`;
    const known = this.invocations.get(key);
    if (known) {
      known.id = id;
      known.socket = socket;
      if (known.answer) this.answer(known);
      return;
    }
    const handler = serverRequests.has(method) ? this.handlers.get(method) : undefined;
    if (!handler) {
      if (fanOut.has(method)) return; // another client may answer it
      send(socket, { id, error: { code: RpcErrorCode.MethodNotFound, message: `no handler for ${method}` } });
      return;
    }
    const inv: Invocation = { key, id, socket, abort: new AbortController() };
    if (threadId !== undefined) inv.threadId = threadId;
    if (turnId !== undefined) inv.turnId = turnId;
    this.invocations.set(key, inv);
    const ctx: ServerRequestContext = {
      get id() {
        return inv.id;
      },
      method: method as ServerRequestMethod,
      signal: inv.abort.signal,
    };
    Promise.resolve()
      .then(() => handler(params as never, ctx))
      .then(
        (result) => {
          inv.answer = { result };
        },
        (err) => {
          inv.answer = {
            error: {
              code: err instanceof RpcError ? err.code : RpcErrorCode.Internal,
              message: err instanceof RpcError ? err.rpcMessage : err instanceof Error ? err.message : String(err),
            },
          };
        },
      )
      .then(() => this.answer(inv));
  }

  // answer sends an invocation's answer on its socket, or keeps it until
  // the daemon offers the request again on a new connection. A sent answer
  // is kept too: a socket that was closing when it went out lost it, and
  // the daemon then offers the request again after the reconnect.
  private answer(inv: Invocation): void {
    if (inv.abort.signal.aborted || this.invocations.get(inv.key) !== inv) return;
    if (!inv.socket || inv.socket !== this.current || !inv.answer) return;
    send(inv.socket, { id: inv.id, ...inv.answer });
    if (inv.sent) return;
    inv.sent = true;
    let sent = 0;
    for (const i of this.invocations.values()) if (i.sent) sent++;
    for (const i of this.invocations.values()) {
      if (sent <= keptAnswers) break;
      if (!i.sent) continue;
      this.invocations.delete(i.key);
      sent--;
    }
  }

  private listen(key: string, l: (n: Notification) => void): () => void {
    let set = this.listeners.get(key);
    if (!set) this.listeners.set(key, (set = new Set()));
    set.add(l);
    return () => set.delete(l);
  }
}

function send(socket: Socket, frame: unknown): void {
  try {
    socket.send(JSON.stringify(frame));
  } catch {
    // The socket is closing; the request is offered again after a reconnect.
  }
}

function errorOf(ev: unknown): Error {
  const e = ev as { error?: unknown; message?: unknown };
  if (e?.error instanceof Error) return new ConnectionError(e.error.message, { cause: e.error });
  if (typeof e?.message === "string") return new ConnectionError(e.message);
  return new ConnectionError("websocket error");
}

// fatal tells the failures that a retry cannot mend: refused credentials
// and a refused initialize.
function fatal(err: unknown): boolean {
  if (err instanceof RpcError) return true;
  if (err instanceof HttpError) return err.status === 401 || err.status === 403;
  const msg = err instanceof Error ? err.message : "";
  return /Unexpected server response: (401|403)\b/.test(msg);
}

function reportListenerError(err: unknown): void {
  // A listener's failure must not stop the others or the connection.
  setTimeout(() => {
    throw err;
  });
}
