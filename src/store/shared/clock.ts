import { performance } from 'node:perf_hooks';

/** Milliseconds since the Unix epoch, with a fractional part. */
export type Clock = () => number;

/**
 * Wall-clock time at process start plus monotonic time since: it never steps backwards inside one
 * process (an NTP correction cannot shorten or stretch a lease), and across restarts it starts again
 * from the wall clock, which keeps fencing tokens floored at real time.
 */
export const monotonicWallClock: Clock = () => performance.timeOrigin + performance.now();
