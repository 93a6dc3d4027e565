// The websocket the client runs on: the platform's WebSocket in browsers,
// the `ws` package in Node (Node 20 has no global WebSocket, and ws can send
// headers on the upgrade, which a bearer token in Node needs). Both are
// driven through the small Socket interface, so a test or an embedder can
// bring its own.

import { ConnectionError } from "./errors.js";

/** The part of a WebSocket the client uses. */
export interface Socket {
  send(data: string): void;
  close(code?: number, reason?: string): void;
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: { code: number; reason: string }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
}

/** What opening a socket takes besides the URL. */
export interface SocketOptions {
  /** Subprotocols to offer. */
  protocols?: string[];
  /** Headers of the upgrade request; not possible with a browser's WebSocket. */
  headers?: Record<string, string>;
}

/** Opens a socket; the default is openSocket. */
export type SocketFactory = (url: string, opts: SocketOptions) => Socket | Promise<Socket>;

type WsModule = {
  WebSocket: new (url: string, protocols: string[] | undefined, opts: { headers?: Record<string, string> }) => Socket;
};

const isNode = (): boolean =>
  typeof (globalThis as { process?: { versions?: { node?: string } } }).process?.versions?.node === "string";

let wsModule: Promise<WsModule> | undefined;

/**
 * openSocket opens a websocket with the platform's implementation: `ws` in
 * Node (loaded on first use, so that browser bundles never include it), the
 * global WebSocket elsewhere.
 */
export const openSocket: SocketFactory = async (url, opts) => {
  if (isNode()) {
    // A computed specifier keeps bundlers from pulling ws into browser builds.
    const name = "ws";
    wsModule ??= import(/* @vite-ignore */ name) as Promise<WsModule>;
    const { WebSocket } = await wsModule;
    return new WebSocket(url, opts.protocols, { headers: opts.headers });
  }
  const WS = (globalThis as { WebSocket?: new (url: string, protocols?: string[]) => Socket }).WebSocket;
  if (!WS) throw new ConnectionError("no WebSocket implementation: pass a socket factory");
  if (opts.headers && Object.keys(opts.headers).length > 0) {
    throw new ConnectionError(
      "a browser's WebSocket cannot send headers: authenticate the websocket with a ticket or a cookie, not a bearer token",
    );
  }
  return new WS(url, opts.protocols);
};
