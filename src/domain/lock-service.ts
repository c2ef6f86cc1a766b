import type { LeaseLimits } from './limits.js';
import type { LockState } from './lock-values.js';
import { LockHeldError } from './errors.js';
import {
  type HeldQuery,
  inNamespaces,
  type LeaseGrant,
  type LeaseObserver,
  type LeaseRenewal,
  type OperationResult,
} from './lease-rules.js';
import { type Eviction, type LeaseRefusals, LeaseService, type LockSetOperation, newOwnerToken } from './lease-service.js';
import type { LeaseStoreHost } from './lease-store.js';
import { LeaseVocabulary } from './lease-vocabulary.js';
import type { WaitGate } from './wait-gate.js';
import type { ChangeWatch, IndexedView } from './watch.js';

export type Operation = 'acquire' | 'renew' | 'release' | 'inspect';
export type { OperationResult } from './lease-rules.js';
export type { Eviction, FreshLease, LockSetOperation } from './lease-service.js';
export { newOwnerToken };

/**
 * What the lock service reports as it works, so metrics (or anything else) can listen without the
 * lock rules knowing about them. Every method is optional.
 */
export interface LockObserver extends LeaseObserver {
  /** `waitedSeconds`: the part of an acquire's duration spent waiting in the key's queue (0 otherwise). */
  operation?(op: Operation, result: OperationResult, durationSeconds: number, waitedSeconds: number): void;
  /** A lock set's call ended (lock sets run on the lock service's engine); see LeaseServiceObserver.setOperation. */
  setOperation?(op: LockSetOperation, result: OperationResult, durationSeconds: number, waitedSeconds: number): void;
}

export interface AcquireOptions {
  readonly holder?: string | null;
  /** Wait up to this long in the key's queue when the lock is held; 0 = answer at once. */
  readonly waitMs?: number;
  /** Aborted when the caller goes away; a wait ends and any lease handed to it is given back. */
  readonly signal?: AbortSignal;
  /**
   * The caller's Idempotency-Key and who sent it: while the lease this acquire grants is live, an acquire
   * by the same caller with the same key gets that lease back instead of lock_held.
   */
  readonly idempotency?: { readonly callerId: string; readonly key: string };
  /** Lock-delay after an expiry (see AcquireInput.lockDelayMs); 0 or absent: none. */
  readonly lockDelayMs?: number;
}

export type LockGrant = LeaseGrant;

export type LockRenewal = LeaseRenewal;

/** A held lock as an administrator sees it: where it is and who holds it, never the owner token. */
export interface HeldLockView extends LockState {
  readonly namespace: string;
  readonly key: string;
}

export interface ListHeldQuery extends HeldQuery {
  readonly limit: number;
  readonly cursor?: string;
}

/** A lock refuses in its own words; its capacity is fixed at 1, so the store never reports a mismatch. */
const LOCK_REFUSALS: LeaseRefusals = {
  full: (key, retryAfterMs) => new LockHeldError(key, retryAfterMs),
  mismatch: (key, _requested, _live, retryAfterMs) => new LockHeldError(key, retryAfterMs),
};

/**
 * Locks: a lease of weight 1 on a key of capacity 1, in the lock's words, over the lease engine
 * (LeaseService: TTL and wait bounds, owner tokens, quota, the late-grant guard). It knows nothing of
 * HTTP or Redis.
 */
export class LockService extends LeaseVocabulary<'lock'> {
  constructor(
    store: LeaseStoreHost,
    /** The bounds, also read by the other primitives' services (permits.ts). */
    readonly limits: LeaseLimits,
    observer: LockObserver = {},
  ) {
    super(
      'lock',
      new LeaseService(store.leases, limits, {
        lostLease: (op) => observer.lostLease?.(op),
        waited: (seconds, granted) => observer.waited?.(seconds, granted),
        operation: (_kind, op, result, seconds, waited) => observer.operation?.(op, result, seconds, waited),
        setOperation: (op, result, seconds, waited) => observer.setOperation?.(op, result, seconds, waited),
      }),
    );
  }

  /** This instance's waiting callers, shared with the other primitives (semaphores, read/write locks). */
  get waitGate(): WaitGate {
    return this.lease.waitGate;
  }

  /** Blocking queries on this instance (one subscription per watched key). */
  get changes(): ChangeWatch<IndexedView> {
    return this.lease.changesOf('lock');
  }

  /** Aborted at shutdown (for the other primitives' waits on this instance). */
  get closingSignal(): AbortSignal {
    return this.lease.closingSignal;
  }

  /** Callers of this instance waiting for a lock right now. */
  get waitingCallers(): number {
    return this.lease.waitGate.count;
  }

  /** Answers every waiting caller with ShuttingDownError; called once shutdown begins. */
  shutdown(): void {
    this.lease.shutdown();
  }

  /**
   * Every method takes the caller's namespace and composes the store's id from it (namespaces.ts), so
   * the same key in two namespaces is two locks with their own fencing sequences. With a cap on locks
   * held per namespace, a grant also takes a quota slot (see NamespaceQuota).
   */
  acquire(namespace: string, key: string, ttlMs: number, options: AcquireOptions = {}): Promise<LockGrant> {
    const { holder = null, waitMs = 0, signal, idempotency, lockDelayMs } = options;
    const ask = { kind: 'lock', namespace, key, capacity: 1, weight: 1, ttlMs, holder, waitMs, signal, idempotency, lockDelayMs } as const;
    return this.lease.acquire(ask, LOCK_REFUSALS);
  }

  /**
   * An administrator's override: frees the lock whoever holds it (see LeaseService.forceRelease).
   * Returns what was evicted, or null when the lock was not held.
   */
  async forceRelease(namespace: string, key: string, fencingToken?: number): Promise<Eviction | null> {
    const [evicted] = await this.lease.forceRelease('lock', namespace, key, fencingToken);
    return evicted ?? null;
  }

  /** One page of held locks, in one namespace or all of them. Never shows owner tokens. */
  async listHeld(query: ListHeldQuery): Promise<{ locks: HeldLockView[]; nextCursor: string | null }> {
    const page = await this.lease.listHeld('lock', query);
    const locks = inNamespaces(page.leases, (parsed, { id: _id, ...state }): HeldLockView => ({ ...parsed, ...state }));
    return { locks, nextCursor: page.nextCursor };
  }

  /** The lock-delay asked for, checked against the bounds. */
  checkLockDelay(lockDelayMs: number): number {
    return this.lease.checkLockDelay(lockDelayMs);
  }

  checkWaitMs(waitMs: number): void {
    this.lease.checkWaitMs(waitMs);
  }

  checkTtl(ttlMs: number): void {
    this.lease.checkTtl(ttlMs);
  }
}
