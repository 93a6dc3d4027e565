// Reconnect timing shared by the websocket client and the event streams.

/** How a client waits between attempts to reconnect. */
export interface ReconnectOptions {
  /** The first wait, in ms (default 250). */
  initialDelayMs?: number;
  /** The longest wait, in ms (default 10,000). */
  maxDelayMs?: number;
  /** Each wait is the previous one times this (default 2). */
  factor?: number;
  /** Attempts in a row before giving up; default Infinity. */
  maxAttempts?: number;
}

/** The states a connection goes through; see the clients' onStateChange. */
export type ConnectionState = "connecting" | "open" | "reconnecting" | "closed";

/** A state change, with the error that caused it when there is one. */
export interface StateChange {
  state: ConnectionState;
  /** The failed attempts in a row so far (while reconnecting). */
  attempt: number;
  /** Why the connection was lost or closed, if it failed. */
  error?: unknown;
}

/**
 * Backoff computes the waits: exponential, each with a random half, so
 * that many clients dropped at once by a daemon restart do not come back at
 * once.
 */
export class Backoff {
  private readonly initial: number;
  private readonly max: number;
  private readonly factor: number;
  readonly maxAttempts: number;
  /** The failed attempts since the last success. */
  attempt = 0;

  constructor(opts: ReconnectOptions = {}, private readonly random: () => number = Math.random) {
    this.initial = opts.initialDelayMs ?? 250;
    this.max = opts.maxDelayMs ?? 10_000;
    this.factor = opts.factor ?? 2;
    this.maxAttempts = opts.maxAttempts ?? Number.POSITIVE_INFINITY;
  }

  /** The wait before the next attempt; counts the attempt. */
  next(): number {
    const cap = Math.min(this.max, this.initial * this.factor ** this.attempt);
    this.attempt++;
    return Math.round(cap / 2 + (this.random() * cap) / 2);
  }

  /** True when the attempts are used up. */
  get exhausted(): boolean {
    return this.attempt >= this.maxAttempts;
  }

  /** Starts over after a success. */
  reset(): void {
    this.attempt = 0;
  }
}

/** sleep waits ms, or rejects with signal's reason when it aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(t);
      reject(signal?.reason);
    };
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
