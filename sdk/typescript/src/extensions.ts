// appserver's own additions to the wire, written by hand because the
// reference schema (from which every other protocol type here is generated)
// does not have them. They are the whole list: the websocket protocol's
// event sequence numbers (docs/protocol.md §2.3, §2.6, §4.3) and the events
// only the HTTP API's event stream carries (docs/http-api.md, "Events").

import type {
  ClientRequests,
  DynamicToolCallParams,
  InitializeCapabilities,
  InitializeParams,
  ServerNotifications,
  ServerRequests,
  ThreadResumeParams,
} from "./generated/protocol.js";
import type { Problem } from "./errors.js";

/**
 * initialize capabilities as appserver reads them: `eventSeq` (ours, with
 * `experimentalApi`) makes thread notifications carry `seq` and lets
 * thread/resume take `afterSeq`.
 */
export type AppserverCapabilities = InitializeCapabilities & {
  /** Number thread notifications (`seq`) and accept thread/resume `afterSeq`. */
  eventSeq?: boolean;
};

/** initialize params with appserver's capabilities. */
export type AppserverInitializeParams = Omit<InitializeParams, "capabilities"> & {
  capabilities?: AppserverCapabilities | null;
};

/** thread/resume params with appserver's `afterSeq`. */
export type AppserverThreadResumeParams = ThreadResumeParams & {
  /**
   * Replay the thread's notifications numbered after this one from the
   * durable event log before the live ones, without gaps or repeats (needs
   * the eventSeq capability).
   */
  afterSeq?: number;
};

/** The client requests as appserver takes them: the reference's, with our params. */
export type AppserverClientRequests = Omit<ClientRequests, "initialize" | "thread/resume"> & {
  initialize: { params: AppserverInitializeParams; result: ClientRequests["initialize"]["result"] };
  "thread/resume": { params: AppserverThreadResumeParams; result: ClientRequests["thread/resume"]["result"] };
};

/**
 * The top-level members of a notification frame on the websocket: the
 * reference's `emittedAtMs`, and our `seq`, the notification's number in
 * its thread's durable event log (1, 2, …), present on thread
 * notifications for a connection that initialized with eventSeq.
 */
export interface NotificationFrame {
  method: string;
  params?: unknown;
  emittedAtMs?: number;
  seq?: number;
}

/** The params of item/tool/call/resolved (HTTP event stream only). */
export interface ToolCallResolvedParams {
  threadId: string;
  turnId: string;
  callId: string;
  /** success, failure, client_error, invalid_response, cancelled, timeout, superseded or closed. */
  outcome: string;
}

/**
 * The events of GET /v1/threads/{id}/events, by SSE event name: the
 * protocol's notifications, the server requests a thread's client answers
 * over HTTP, and the stream's own two events.
 */
export type HttpStreamEvents = ServerNotifications & {
  [M in keyof ServerRequests]: ServerRequests[M]["params"];
} & {
  "item/tool/call": DynamicToolCallParams;
  "item/tool/call/resolved": ToolCallResolvedParams;
  /** The stream fell behind and events were dropped; it ends the stream. */
  "stream/error": Problem;
};
