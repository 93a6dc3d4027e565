// Tickets: how a browser opens a websocket or an event stream, which cannot
// carry an Authorization header. The bearer token buys a single-use ticket
// (POST /v1/auth/ticket) each time one of them is opened; the ticket goes
// in a subprotocol of the websocket or the query of the stream, and the
// token itself never goes into a URL.

import { type Auth, type Channel, type Credentials, type TokenSource } from "./auth.js";
import { httpError } from "./events.js";
import type { components } from "./generated/openapi.js";

/** The subprotocol offered beside a ticket, and the one the daemon selects: the ticket is never echoed. */
export const WEBSOCKET_PROTOCOL = "appserver";

/** Starts the subprotocol that carries a ticket. */
export const TICKET_PROTOCOL_PREFIX = "appserver.ticket.";

/** A ticket, as POST /v1/auth/ticket answers. */
export type Ticket = components["schemas"]["Ticket"];

/** Options of ticketAuth. */
export interface TicketAuthOptions {
  /** The daemon's URL (http(s):// or ws(s)://), where tickets are asked for. */
  baseUrl: string;
  /**
   * The bearer token (the operator's or a principal's) that tickets are
   * issued for; it is also sent, as a header, on plain HTTP requests. A
   * function is called each time.
   */
  token?: TokenSource;
  /**
   * Gets a ticket some other way than POST /v1/auth/ticket with token:
   * from the page's own server, say, which keeps the token away from the
   * browser. Without token, plain HTTP requests then carry nothing (pair it
   * with a cookie, or use a server that needs none).
   */
  issue?: (channel: "websocket" | "sse") => Promise<string>;
  /** The fetch that asks for tickets; default the global one. */
  fetch?: typeof fetch;
}

/**
 * A fresh single-use ticket for every websocket and event stream the
 * client opens (and reopens, after a dropped connection), the bearer token
 * on plain HTTP requests. In browsers this is how a websocket is
 * authenticated; it works in Node too. A refused token rejects with the
 * daemon's HttpError (401), which the clients do not retry.
 */
export function ticketAuth(opts: TicketAuthOptions): Auth {
  const base = opts.baseUrl.replace(/^ws(s?):\/\//, "http$1://").replace(/\/+$/, "");
  const fetchImpl = opts.fetch ?? ((input, init) => globalThis.fetch(input, init));
  const bearer = async (): Promise<Record<string, string>> => {
    if (opts.token === undefined) return {};
    const token = typeof opts.token === "string" ? opts.token : await opts.token();
    return { Authorization: `Bearer ${token}` };
  };
  const issue =
    opts.issue ??
    (async () => {
      const res = await fetchImpl(`${base}/v1/auth/ticket`, { method: "POST", headers: await bearer(), cache: "no-store" });
      if (!res.ok) throw await httpError(res);
      return ((await res.json()) as Ticket).ticket;
    });
  return {
    async credentials(channel: Channel): Promise<Credentials> {
      if (channel === "http") return { headers: await bearer() };
      const ticket = await issue(channel);
      if (channel === "websocket") return { protocols: [WEBSOCKET_PROTOCOL, TICKET_PROTOCOL_PREFIX + ticket] };
      return { query: { ticket } };
    },
  };
}
