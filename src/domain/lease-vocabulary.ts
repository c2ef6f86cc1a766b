import type { LeaseRenewal } from './lease-rules.js';
import type { FreshLease, LeaseService, WatchViewOf } from './lease-service.js';
import type { LeaseKind, LeaseReads } from './lease-store.js';
import type { QueuedCaller, ReleaseRequest, ReleaseRequestInput } from './lock-values.js';

/**
 * One primitive's calls on one key, bound to its kind, over the lease engine: what a lock, a semaphore
 * and a read/write lock do the same way. LockService and PermitCore add what differs (the acquire's
 * shape, what a force release answers, a listing's entries).
 */
export abstract class LeaseVocabulary<K extends LeaseKind> {
  protected constructor(
    readonly kind: K,
    /** The lease engine (for a lock, the lock-set service runs on the same one). */
    readonly lease: LeaseService,
  ) {}

  renew(namespace: string, key: string, ownerToken: string, ttlMs: number): Promise<LeaseRenewal> {
    return this.lease.renew(this.kind, namespace, key, ownerToken, ttlMs);
  }

  release(namespace: string, key: string, ownerToken: string): Promise<void> {
    return this.lease.release(this.kind, namespace, key, ownerToken);
  }

  /** The live lease(s) on the key, or null when none is live. Never owner tokens. */
  inspect(namespace: string, key: string): Promise<LeaseReads[K]['state'] | null> {
    return this.lease.inspect(this.kind, namespace, key);
  }

  /** The first callers queued for the key, head first (at most MAX_QUEUE_SHOWN), with the weight each asks for. Never owner tokens. */
  queue(namespace: string, key: string): Promise<QueuedCaller[]> {
    return this.lease.queue(this.kind, namespace, key);
  }

  /** A blocking query on the key (see LeaseService.watch). */
  watch(
    namespace: string,
    key: string,
    index: number | undefined,
    waitMs: number,
    signal?: AbortSignal,
    onChange?: (view: WatchViewOf<K>) => void,
  ): Promise<WatchViewOf<K>> {
    return this.lease.watch(this.kind, namespace, key, { index, waitMs, signal, onChange });
  }

  /** Asks the holder of the lease with `fencingToken` to let go, not evicting it (LeaseService.requestRelease); null when none is live. */
  requestRelease(namespace: string, key: string, fencingToken: number, request: ReleaseRequestInput): Promise<ReleaseRequest | null> {
    return this.lease.requestRelease(this.kind, namespace, key, fencingToken, request);
  }

  /** The late-grant check again, as the answer is about to leave the process (see LeaseService.confirmFresh). */
  confirmFresh(namespace: string, lease: FreshLease): Promise<void> {
    return this.lease.confirmFresh(this.kind, namespace, lease);
  }
}
