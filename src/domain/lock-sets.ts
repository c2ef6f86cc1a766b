import type { LeaseLimits } from './limits.js';
import type { LockService } from './lock-service.js';
import type { LeaseStoreHost } from './lease-store.js';
import type { FreshLease, LeaseService, LeaseSetGrant, LeaseSetRenewal } from './lease-service.js';

export { MAX_LOCK_SET_KEYS } from './lease-service.js';

export interface LockSetOptions {
  readonly holder?: string | null;
  /** Retry for up to this long while some key of the set is busy (see LeaseService.acquireSet). */
  readonly waitMs?: number;
  readonly lockDelayMs?: number;
  readonly signal?: AbortSignal;
}

export type LockSetGrant = LeaseSetGrant;

export type LockSetRenewal = LeaseSetRenewal;

/**
 * Lock sets: several keys of the caller's namespace held under ONE owner token, all or none: one
 * multi-key acquire of the lease engine (LeaseService.acquireSet has the rules: no queue, retry on a
 * change of the busy key, one quota slot per key). It runs on the lock service's engine, so a set's
 * waits count among that instance's waiting callers and end at its shutdown.
 */
export class LockSetService {
  private readonly lease: LeaseService;

  constructor(
    /** The store the lock service runs on (the set is served by the same engine). */
    _store: LeaseStoreHost,
    _limits: LeaseLimits,
    locks: LockService,
  ) {
    this.lease = locks.lease;
  }

  acquire(namespace: string, keys: readonly string[], ttlMs: number, options: LockSetOptions = {}): Promise<LockSetGrant> {
    const { holder = null, waitMs = 0, lockDelayMs = 0, signal } = options;
    return this.lease.acquireSet({ namespace, keys, ttlMs, holder, waitMs, lockDelayMs, signal });
  }

  renew(namespace: string, keys: readonly string[], ownerToken: string, ttlMs: number): Promise<LockSetRenewal> {
    return this.lease.renewSet(namespace, keys, ownerToken, ttlMs);
  }

  /** The late-answer check again, as the answer is about to leave the process (LeaseService.confirmFresh). */
  confirmFresh(namespace: string, lease: FreshLease): Promise<void> {
    return this.lease.confirmFresh('lock', namespace, lease);
  }

  release(namespace: string, keys: readonly string[], ownerToken: string): Promise<void> {
    return this.lease.releaseSet(namespace, keys, ownerToken);
  }
}
