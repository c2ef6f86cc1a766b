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
 * The wall clock as the host keeps it (NTP), never read backwards: a step forward is taken at once; after
 * a step back the time stands still until the wall clock passes it again.
 *
 * For a store whose lease ends several processes judge (etcd): they agree only as far as their clocks
 * do, so each must follow the clock NTP keeps in step. monotonicWallClock reads the wall clock once, at
 * start: a step after that is never taken up, and two instances started either side of it disagree by
 * the whole step for as long as they run (on a VM whose clock is stepped now and then, some 150 ms within
 * minutes). Never backwards, so no lease this process ends is counted twice nor a token decided on an
 * earlier time than one before it.
 */
export function forwardWallClock(read: () => number = Date.now): Clock {
  let last = -Infinity;
  return () => {
    const now = read();
    if (now > last) last = now;
    return last;
  };
}

/** This process's forward wall clock (forwardWallClock), one for every store that reads it. */
export const sharedWallClock: Clock = forwardWallClock();
