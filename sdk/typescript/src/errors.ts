// The errors the library throws. Each transport has one class for what the
// daemon answered (RpcError for JSON-RPC, HttpError for the HTTP API) and the
// connection failures share ConnectionError.

/** The JSON-RPC error codes the daemon answers with (docs/protocol.md §2.4). */
export const RpcErrorCode = {
  /** Invalid request: not initialized, bad params, domain errors (unknown thread, …). */
  InvalidRequest: -32600,
  /** A method the daemon does not serve. */
  MethodNotFound: -32601,
  /** Semantic checks on params. */
  InvalidParams: -32602,
  /** Internal error; the daemon's log has the details. */
  Internal: -32603,
  /** The daemon is overloaded; retry later. */
  Overloaded: -32001,
} as const;

/** An error answer to a JSON-RPC request, with its code. */
export class RpcError extends Error {
  /** The JSON-RPC error code (see RpcErrorCode). */
  readonly code: number;
  /** The error's data member, when the daemon sent one. */
  readonly data: unknown;
  /** The request's method. */
  readonly method: string;
  /** The error's message member, as sent. */
  readonly rpcMessage: string;

  constructor(method: string, code: number, message: string, data?: unknown) {
    super(`${method}: ${message} (${code})`);
    this.name = "RpcError";
    this.method = method;
    this.code = code;
    this.rpcMessage = message;
    this.data = data;
  }

  /** True when the daemon is draining: retry after reconnecting. */
  get shuttingDown(): boolean {
    const d = this.data as { reason?: unknown } | undefined;
    return this.code === RpcErrorCode.InvalidRequest && d?.reason === "serverShuttingDown";
  }
}

/** An RFC 9457 problem, the body of every HTTP API error. */
export interface Problem {
  /** A stable urn:appserver:problem:… type, one per error class. */
  type: string;
  title: string;
  status: number;
  detail?: string;
  instance?: string;
}

/** An HTTP API answer with an error status. */
export class HttpError extends Error {
  /** The HTTP status. */
  readonly status: number;
  /** The problem body, or a stand-in made from the status when the body was not a problem. */
  readonly problem: Problem;

  constructor(status: number, problem: Problem) {
    super(`${problem.title}${problem.detail ? `: ${problem.detail}` : ""} (${status})`);
    this.name = "HttpError";
    this.status = status;
    this.problem = problem;
  }

  /** The problem type without its urn:appserver:problem: prefix, e.g. "not-found". */
  get kind(): string {
    return this.problem.type.replace(/^urn:appserver:problem:/, "");
  }
}

/**
 * The connection failed or was lost: a request sent on it got no answer
 * (it may or may not have been carried out), or a stream could not be
 * opened. `cause` holds the underlying error when there is one.
 */
export class ConnectionError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "ConnectionError";
  }
}

/**
 * The events after a stream's position are gone from the daemon's log
 * (HTTP 410, or a stream/error event): re-read the thread's items, then
 * stream again without a position.
 */
export class EventsGoneError extends Error {
  /** The problem the daemon answered with. */
  readonly problem: Problem;

  constructor(problem: Problem) {
    super(problem.detail ?? problem.title);
    this.name = "EventsGoneError";
    this.problem = problem;
  }
}

/** The operation was given up because the caller aborted it or the client was closed. */
export class AbortError extends Error {
  constructor(message = "aborted") {
    super(message);
    this.name = "AbortError";
  }
}
