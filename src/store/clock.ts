import { performance } from 'node:perf_hooks';

/** Milliseconds since the Unix epoch, with a fractional part. */
export type Clock = () => number;

/**
 * Wall-clock time at process start plus monotonic time since: it never steps backwards inside one
 * process (an NTP correction cannot shorten or stretch a lease), and across restarts it starts again
 * from the wall clock, which keeps fencing tokens floored at real time.
 */
export const monotonicWallClock: Clock = () => performance.timeOrigin + performance.now();

/**
 * The fencing token rule shared by every store: strictly above the last token issued for the key, and
 * never below the store's clock in microseconds. The clock floor is what keeps tokens increasing when
 * the per-key counter is lost (data loss, restart, expiry of an idle key's state).
 */
export function nextFencingToken(lastToken: number, nowMs: number): number {
  return Math.max(lastToken + 1, Math.floor(nowMs * 1000));
}
