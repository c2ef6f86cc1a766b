import { performance } from 'node:perf_hooks';

/**
 * 1 s past the lease end an acquire was told of: a key stays marked while acquires keep finding it
 * held, and a little after, for the release that ends the lease they waited on.
 */
export const CONTENDED_KEEP_MS = 1000;

/** Past this many marked keys, the ended marks are dropped (and all of them, if none has ended). */
const MAX_MARKED = 4096;

/**
 * The locks an acquire of this instance recently found held (refused, queued or its queue full): the
 * keys whose release may hand the lock to a waiter. Such a release leaves for Redis at once, ahead of
 * the requests read after it in the same turn (scripts.ts, `atOnce`); any other release waits for the
 * end of the turn and shares its socket write with the turn's other calls: on distinct keys, one write
 * per turn instead of one per release (a syscall per lock pair here, and fewer reads and writes in Redis).
 *
 * Only this instance's own acquires mark a key: a release of a key whose waiters all called other
 * instances leaves at the end of the turn, a turn later at most; the hand-over itself is unchanged.
 * Bounded: at most MAX_MARKED keys, each mark ending CONTENDED_KEEP_MS after the lease it was told of.
 */
export class ContendedKeys {
  private readonly until = new Map<string, number>();

  /** An acquire of `key` found it held, for `retryAfterMs` more. */
  mark(key: string, retryAfterMs: number, now = performance.now()): void {
    if (this.until.size >= MAX_MARKED && !this.until.has(key)) this.sweep(now);
    this.until.set(key, now + Math.max(0, retryAfterMs) + CONTENDED_KEEP_MS);
  }

  /** Whether a release of `key` may hand it over (an acquire found it held lately). */
  has(key: string, now = performance.now()): boolean {
    // Nothing marked (distinct keys): no lookup at all.
    if (this.until.size === 0) return false;
    const until = this.until.get(key);
    if (until === undefined) return false;
    if (until > now) return true;
    this.until.delete(key);
    return false;
  }

  /** Keys marked right now (ended marks not yet dropped included). */
  get size(): number {
    return this.until.size;
  }

  private sweep(now: number): void {
    for (const [key, until] of this.until) if (until <= now) this.until.delete(key);
    if (this.until.size >= MAX_MARKED) this.until.clear();
  }
}
