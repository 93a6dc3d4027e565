// Helpers of the tests: the daemon's address, a proxy whose connections a
// test can cut, and waiting for a notification.

import { mkdtemp, realpath } from "node:fs/promises";
import { createConnection, createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { inject, onTestFinished } from "vitest";
import type { AppServerClient, NotificationOf, ServerNotifications } from "../src/index.js";

/** The daemon the global setup started, without authentication. */
export const daemon = () => inject("daemon");

/** The daemon the global setup started that requires a capability token. */
export const guarded = () => inject("guarded");

/** A fresh directory, the cwd of a test's thread. */
export async function workspace(): Promise<string> {
  return realpath(await mkdtemp(join(tmpdir(), "appserver-sdk-ws-")));
}

/**
 * A TCP proxy in front of the daemon: cut() drops every connection through
 * it at once, as a network failure would, while it keeps accepting new ones.
 */
export class CutProxy {
  private readonly conns = new Set<Socket>();
  private readonly server: Server;
  private port = 0;
  private downUntil = 0;

  private constructor(private readonly target: URL) {
    this.server = createServer((client) => this.relay(client));
  }

  /** Starts a proxy to the daemon of url (ws:// or http://); it stops when the test ends. */
  static async start(url: string): Promise<CutProxy> {
    const proxy = new CutProxy(new URL(url));
    await new Promise<void>((resolve) => proxy.server.listen(0, "127.0.0.1", resolve));
    const addr = proxy.server.address();
    if (addr === null || typeof addr === "string") throw new Error("proxy has no port");
    proxy.port = addr.port;
    onTestFinished(() => proxy.close());
    return proxy;
  }

  private relay(client: Socket): void {
    if (Date.now() < this.downUntil) {
      client.destroy();
      return;
    }
    const upstream = createConnection({ host: this.target.hostname, port: Number(this.target.port) });
    this.conns.add(client);
    this.conns.add(upstream);
    const end = () => {
      client.destroy();
      upstream.destroy();
      this.conns.delete(client);
      this.conns.delete(upstream);
    };
    client.on("error", end).on("close", end);
    upstream.on("error", end).on("close", end);
    client.pipe(upstream);
    upstream.pipe(client);
  }

  /** The proxy's URL with scheme. */
  url(scheme: "ws" | "http"): string {
    return `${scheme}://127.0.0.1:${this.port}`;
  }

  /** Drops every connection through the proxy, and refuses new ones for downMs. */
  cut(downMs = 0): void {
    this.downUntil = Date.now() + downMs;
    for (const c of this.conns) c.destroy();
    this.conns.clear();
  }

  /** Stops the proxy. */
  close(): Promise<void> {
    this.cut();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** Resolves with the first notification of method about threadId. */
export function next<M extends keyof ServerNotifications>(
  client: AppServerClient,
  method: M,
  threadId: string,
): Promise<NotificationOf<M>> {
  return new Promise((resolve) => {
    const off = client.on(method, (_p, n) => {
      if (n.threadId !== threadId) return;
      off();
      resolve(n);
    });
  });
}

/** Resolves once cond() holds, checking on every notification. */
export function until(client: AppServerClient, cond: () => boolean): Promise<void> {
  return new Promise((resolve) => {
    if (cond()) return resolve();
    const off = client.onNotification(() => {
      if (!cond()) return;
      off();
      resolve();
    });
  });
}
