import { setTimeout as sleep } from 'node:timers/promises';
import { KeyholderError } from './errors.js';

/** Milliseconds on the monotonic clock: never jumps with NTP or a wall-clock change. */
export const monotonicNow = (): number => performance.now();

export interface BackoffOptions {
  /** First backoff step; doubles on each attempt. */
  readonly baseDelayMs: number;
  /** Largest backoff step (a server's Retry-After may still ask for longer, and is honoured). */
  readonly maxDelayMs: number;
}

/** What a retry hook is told: which attempt failed, with what, and how long the client waits now. */
export interface RetryEvent {
  readonly attempt: number;
  readonly delayMs: number;
  readonly error: KeyholderError;
}

/**
 * How long to wait before attempt `attempt + 1`: never less than the server's Retry-After, never less
 * than the exponential step, plus up to half a step of random jitter so that callers told "retry in 1 s"
 * at the same moment do not all come back at the same moment.
 */
export function retryDelayMs(retryAfterMs: number | undefined, attempt: number, backoff: BackoffOptions): number {
  const step = Math.min(backoff.maxDelayMs, backoff.baseDelayMs * 2 ** Math.max(0, attempt - 1));
  return Math.max(retryAfterMs ?? 0, step) + Math.random() * (step / 2);
}

/**
 * Runs `attempt` until it succeeds, throws a non-retryable error, or the next try would start after
 * `deadlineAt` (monotonic ms): then the last error is thrown rather than sleeping for nothing.
 */
export async function withRetries<T>(
  attempt: (attemptNumber: number) => Promise<T>,
  options: BackoffOptions & {
    readonly deadlineAt: number;
    readonly signal?: AbortSignal | undefined;
    readonly onRetry?: ((event: RetryEvent) => void) | undefined;
  },
): Promise<T> {
  for (let n = 1; ; n++) {
    try {
      return await attempt(n);
    } catch (err) {
      if (!(err instanceof KeyholderError) || !err.retryable) throw err;
      options.signal?.throwIfAborted();
      const delayMs = retryDelayMs(err.retryAfterMs, n, options);
      if (monotonicNow() + delayMs >= options.deadlineAt) throw err;
      options.onRetry?.({ attempt: n, delayMs, error: err });
      await pause(delayMs, options.signal);
    }
  }
}

/** Waits `ms`; a signal that aborts meanwhile ends the wait with the signal's reason. */
export async function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  try {
    await sleep(ms, undefined, signal ? { signal } : undefined);
  } catch (sleepErr) {
    // The timer rejects with an AbortError of its own; the caller is owed the signal's reason.
    signal?.throwIfAborted();
    throw sleepErr;
  }
}
