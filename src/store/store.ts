/**
 * The contract every lock store implements, in domain terms. Each method is ONE atomic step in the
 * store: there is no window between checking the owner and changing the lock. The store owns time:
 * expiry is measured on the store's clock, never computed from a caller's clock.
 */

export interface Grant {
  readonly fencingToken: number;
  /** When the lease ends, in Unix milliseconds on the store's clock. */
  readonly expiresAtMs: number;
}

export type AcquireOutcome =
  | ({
      readonly acquired: true;
      /**
       * performance.now() when the store command that established this lease was sent: the caller
       * measures from here whether the answer is still fresh enough to hand out.
       */
      readonly decidedAt: number;
    } & Grant)
  | {
      readonly acquired: false;
      /** Time left on the current holder's lease (0 when unknown, e.g. a wait that timed out behind others). */
      readonly retryAfterMs: number;
    };

export type RenewOutcome = ({ readonly renewed: true } & Grant) | { readonly renewed: false };

export interface LockState {
  readonly holder: string | null;
  /** Callers queued for this lock. */
  readonly waiters: number;
  readonly fencingToken: number;
  readonly expiresAtMs: number;
  readonly ttlRemainingMs: number;
}

export interface AcquireInput {
  readonly key: string;
  readonly ownerToken: string;
  readonly ttlMs: number;
  readonly holder: string | null;
  /**
   * How long to wait in the key's FIFO queue when the lock is held (0 = do not wait). A caller that
   * does not wait is refused while others are queued: it never jumps the queue.
   */
  readonly waitMs?: number;
  /** Aborts a wait (client gone, server shutting down): the waiter leaves the queue and the promise rejects with the signal's reason. */
  readonly signal?: AbortSignal;
}

export interface LockStore {
  /** What kind of store this is, for health output and logs. */
  readonly kind: 'memory' | 'redis';
  /**
   * Grants the lock if it is free (or its lease ran out) and nobody is queued; otherwise waits up to
   * `waitMs` in the key's FIFO queue, or reports the time left on the current lease. Throws
   * TooManyWaitersError when the key's queue is full.
   */
  acquire(input: AcquireInput): Promise<AcquireOutcome>;
  /** Extends the lease to `ttlMs` from now, only if `ownerToken` holds a live lease. Keeps the fencing token. */
  renew(key: string, ownerToken: string, ttlMs: number): Promise<RenewOutcome>;
  /** Frees the lock, only if `ownerToken` holds a live lease. Returns whether it did. */
  release(key: string, ownerToken: string): Promise<boolean>;
  /** The live lease on `key`, or null when nobody holds it. Never exposes the owner token. */
  inspect(key: string): Promise<LockState | null>;
  /** Resolves when the store can serve requests; rejects otherwise. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
