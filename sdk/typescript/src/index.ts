// @appserver/client: a TypeScript client of appserver for browsers and Node.
//
// AppServerClient speaks the websocket JSON-RPC protocol; HttpClient the
// HTTP API under /v1 with its event stream. Both reconnect and resume from
// the last event they delivered. The protocol's types are generated from the
// reference JSON Schema (src/generated/protocol.ts) and the HTTP API's from
// api/openapi.yaml (src/generated/openapi.ts); src/extensions.ts lists what
// appserver adds to the wire.

export * from "./auth.js";
export { Backoff, type ConnectionState, type ReconnectOptions, type StateChange } from "./backoff.js";
export * from "./client.js";
export * from "./errors.js";
export * from "./events.js";
export * from "./http.js";
export * from "./protocol.js";
export * from "./ticket.js";
export { openSocket, type Socket, type SocketFactory, type SocketOptions } from "./socket.js";
