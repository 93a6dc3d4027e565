// The protocol's types as the clients use them: the generated types and
// method maps, appserver's extensions, and the shapes of what the
// websocket client hands to listeners and handlers.

import type { RequestId, ServerNotifications, ServerRequests, ThreadResumeResponse } from "./generated/protocol.js";
import type { AppserverClientRequests } from "./extensions.js";

export type * from "./generated/protocol.js";
export { serverRequestMethods, servedClientMethods } from "./generated/protocol.js";
export type * from "./extensions.js";

/** A client→server request method. */
export type Method = keyof AppserverClientRequests;
/** The params of request method M. */
export type ParamsOf<M extends Method> = AppserverClientRequests[M]["params"];
/** The result of request method M. */
export type ResultOf<M extends Method> = AppserverClientRequests[M]["result"];

/** A notification as listeners get it. */
export type Notification = {
  [M in keyof ServerNotifications]: {
    method: M;
    params: ServerNotifications[M];
    /**
     * Its number in its thread's durable event log (appserver's own, on
     * thread notifications): it grows by one along the thread, and the
     * client never delivers the same thread's number twice.
     */
    seq?: number;
    /** The thread the notification is about, when it names one. */
    threadId?: string;
    /** When the daemon emitted it (Unix ms). */
    emittedAtMs?: number;
  };
}[keyof ServerNotifications];

/** The notification of method M. */
export type NotificationOf<M extends keyof ServerNotifications> = Extract<Notification, { method: M }>;

/** A server→client request method. */
export type ServerRequestMethod = keyof ServerRequests;

/** What a server request handler gets besides the params. */
export interface ServerRequestContext {
  /** The request's JSON-RPC id (it may change when the request is offered again after a reconnect). */
  readonly id: RequestId;
  /** The request's method. */
  readonly method: ServerRequestMethod;
  /**
   * Aborted when the answer is no longer wanted: another client answered
   * (serverRequest/resolved), the turn ended, or the client was closed.
   */
  readonly signal: AbortSignal;
}

/** Answers the server requests of method M. */
export type ServerRequestHandler<M extends ServerRequestMethod> = (
  params: ServerRequests[M]["params"],
  ctx: ServerRequestContext,
) => ServerRequests[M]["result"] | Promise<ServerRequests[M]["result"]>;

/** What the client did for a subscribed thread after it reconnected. */
export interface Resumed {
  /** The thread. */
  threadId: string;
  /**
   * The position the thread's events were replayed from: every notification
   * numbered after it follows, none is missing. Undefined when the client
   * knew no position (a thread resumed without one saw no numbered event
   * yet): response then carries the thread's turns, to be reloaded from.
   */
  afterSeq?: number;
  /** The thread/resume answer, when it succeeded. */
  response?: ThreadResumeResponse;
  /** Why the thread could not be resumed; the client dropped the subscription. */
  error?: unknown;
}
