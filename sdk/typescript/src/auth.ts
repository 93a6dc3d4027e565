// How a client proves who it is. The transports ask an Auth for credentials
// each time they open something (an HTTP request, a websocket, an event
// stream), so a credential that is fetched per connection (a single-use
// ticket) or that changes (a refreshed token) works as well as a fixed one.

/** Credentials for one request or connection. */
export interface Credentials {
  /** HTTP headers, e.g. Authorization. Browsers cannot send these on a websocket. */
  headers?: Record<string, string>;
  /** Query parameters added to the URL. */
  query?: Record<string, string>;
  /** Websocket subprotocols to offer. */
  protocols?: string[];
}

/** What a transport is opening. */
export type Channel = "http" | "websocket" | "sse";

/** Supplies credentials; see bearerAuth, ticketAuth and cookieAuth. */
export interface Auth {
  /** The credentials for opening channel; called once per request or connection attempt. */
  credentials(channel: Channel): Credentials | Promise<Credentials>;
  /**
   * fetch's credentials mode for HTTP requests and event streams
   * ("include" sends cookies cross-origin); default "same-origin".
   */
  fetchCredentials?: RequestCredentials;
}

/** A token, or a function that returns the current one. */
export type TokenSource = string | (() => string | Promise<string>);

async function tokenOf(source: TokenSource): Promise<string> {
  return typeof source === "string" ? source : await source();
}

/**
 * `Authorization: Bearer <token>` on every channel: the daemon's capability
 * token or JWT, or an HTTP API principal's token. Browsers cannot put a
 * header on a websocket, so in a browser use it for HTTP only.
 */
export function bearerAuth(token: TokenSource): Auth {
  return {
    async credentials() {
      return { headers: { Authorization: `Bearer ${await tokenOf(token)}` } };
    },
  };
}

/** No credentials: a daemon on loopback without authentication. */
export function noAuth(): Auth {
  return { credentials: () => ({}) };
}

/**
 * The browser's cookies: no credentials of its own, fetch sends cookies
 * (mode "include" for a daemon on another origin of the same site) and the
 * browser sends them on the websocket upgrade. The daemon's session cookie
 * comes from HttpClient.startSession.
 */
export function cookieAuth(mode: RequestCredentials = "include"): Auth {
  return { credentials: () => ({}), fetchCredentials: mode };
}

/** withQuery returns url with the credentials' query parameters added. */
export function withQuery(url: string, query: Record<string, string> | undefined): string {
  if (!query || Object.keys(query).length === 0) return url;
  const u = new URL(url);
  for (const [k, v] of Object.entries(query)) u.searchParams.set(k, v);
  return u.toString();
}
