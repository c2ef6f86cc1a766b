/**
 * The contract every lock store implements, in domain terms. Each method is ONE atomic step in the
 * store: there is no window between checking the owner and changing the lock. The store owns time:
 * expiry is measured on the store's clock, never computed from a caller's clock.
 */
import type { PermitStore, QueuedCaller, ReleaseRequest, ReleaseRequestInput } from './permit-store.js';

export { MAX_QUEUE_SHOWN, type QueuedCaller, type ReleaseRequest, type ReleaseRequestInput, withReleaseRequest } from './permit-store.js';

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
      /**
       * Set when the lock was already held by a live lease acquired with the same idempotency key: that
       * lease is the answer (its owner token and holder, not the ones asked for), and nothing changed.
       */
      readonly replayed?: { readonly ownerToken: string; readonly holder: string | null };
    } & Grant)
  | {
      readonly acquired: false;
      /**
       * Time left on the current holder's lease when the answer was decided (for a wait that ran out:
       * when it ran out, not when it began); at least 1. With `quotaFull`: until the namespace's
       * earliest quota slot ends.
       */
      readonly retryAfterMs: number;
      /** Only from a store that keeps the quota inside its lock steps: the namespace holds its cap. */
      readonly quotaFull?: true;
    };

/** `releaseRequested`: someone asked the holder to let go (ReleaseRequest); absent when nobody did. */
export type RenewOutcome = ({ readonly renewed: true; readonly releaseRequested?: ReleaseRequest } & Grant) | { readonly renewed: false };

export interface LockState {
  readonly holder: string | null;
  /**
   * Callers queued for this lock and still waiting: not those whose wait ran out, who left, or whose
   * keyholder instance stopped refreshing them (it died). Every store counts the same way.
   */
  readonly waiters: number;
  readonly fencingToken: number;
  readonly expiresAtMs: number;
  readonly ttlRemainingMs: number;
  /** Someone asked this lease's holder to let go (see ReleaseRequest); absent when nobody did. */
  readonly releaseRequested?: ReleaseRequest;
}

export interface AcquireInput {
  /** The store's id of the lock, `<namespace>/<key>` (the lock service composes it; the store treats it as opaque). */
  readonly id: string;
  readonly ownerToken: string;
  readonly ttlMs: number;
  /** A public label for the lease; null or "" for none (both read back as null). */
  readonly holder: string | null;
  /**
   * How long to wait in the key's FIFO queue when the lock is held (0 = do not wait). A caller that
   * does not wait is refused while others are queued: it never jumps the queue.
   */
  readonly waitMs?: number;
  /**
   * Aborts a wait (client gone, server shutting down): the waiter leaves the queue and the promise
   * rejects with the signal's reason. Already aborted when the call starts: nothing is taken, not even
   * a free lock, and the promise rejects the same way.
   */
  readonly signal?: AbortSignal;
  /**
   * `<scope>:<fingerprint>` (domain/idempotency.ts); stored with the lease it grants and gone with it.
   * While that lease is live, an acquire with the same value is answered with that lease (`replayed`)
   * instead of being refused, and one with the same scope but another fingerprint (the key reused for
   * another request) is rejected with IdempotencyKeyReusedError. Only immediate grants store it (a lease
   * handed to a waiter does not).
   */
  readonly idempotencyKey?: string;
  /**
   * Lock-delay: when this lease EXPIRES (not released, not force-released), the key stays unavailable
   * for this long after the lease end (Chubby, Consul). 0 or absent: none. The lock service bounds it
   * (never above the fencing grace, so the lock's state outlives the delay).
   */
  readonly lockDelayMs?: number;
  /**
   * Only for a store with `quotaInside`: the most leases (held or waited for) the lock's namespace may
   * have at once; 0 or absent = no cap.
   */
  readonly maxHeldInNamespace?: number;
}

/** A held lock as an administrator's listing shows it. Never carries the owner token. */
export interface LockListRow extends LockState {
  /** The store's id of the lock (the lock service composes it; the store treats it as opaque). */
  readonly id: string;
}

export interface ListQuery {
  /** Only ids starting with this; "" for all. */
  readonly prefix: string;
  /** Page size the store aims for (see LockStore.list for how exact it is). */
  readonly limit: number;
  /** Where the previous page stopped; undefined for the first page. Opaque to callers. */
  readonly cursor?: string;
}

export interface ListPage {
  readonly locks: readonly LockListRow[];
  /** Pass back to get the next page; null when the listing is complete. */
  readonly nextCursor: string | null;
}

/**
 * What a force release did. `evictedOwnerToken` is for the lock service's own bookkeeping (freeing the
 * evicted lease's quota slot); it is never sent to a client or written to a log.
 */
export type ForceReleaseOutcome =
  | {
      readonly released: true;
      readonly holder: string | null;
      readonly fencingToken: number;
      readonly evictedOwnerToken: string;
    }
  | { readonly released: false };

export type QuotaSlotOutcome = { readonly reserved: true } | { readonly reserved: false; readonly retryAfterMs: number };

/**
 * Per-namespace cap on leases held at once. A quota slot is one lease's claim on its namespace's quota
 * (not a Redis Cluster hash slot), named by the lease's owner token and ending when the lease would
 * end. Quota slots are kept apart from the lock records (see the lock service for why), and each
 * quota slot operation is atomic on its own.
 */
export interface QuotaSlotStore {
  /**
   * Takes a quota slot for `quotaSlotId` until `ttlMs` from now (store clock) if fewer than `maxQuotaSlots` live slots
   * exist in `namespace`; otherwise says when the earliest one ends. Expired slots never count.
   */
  reserveQuotaSlot(namespace: string, quotaSlotId: string, ttlMs: number, maxQuotaSlots: number): Promise<QuotaSlotOutcome>;
  /**
   * Moves an existing quota slot's end to `expiresAtMs` if that is later; does nothing for an unknown slot.
   * `maxQuotaSlots`: the cap the quota slot was reserved under (a store that splits the cap into shards finds the
   * slot's shard with it).
   */
  extendQuotaSlot(namespace: string, quotaSlotId: string, expiresAtMs: number, maxQuotaSlots: number): Promise<void>;
  /** Gives a quota slot back; does nothing for an unknown slot. `maxQuotaSlots`: as for extendQuotaSlot. */
  freeQuotaSlot(namespace: string, quotaSlotId: string, maxQuotaSlots: number): Promise<void>;
}

/**
 * A key's state as a watcher sees it: the live lease (or null) and the last fencing token the store
 * still remembers for the key (0 when it remembers none). domain/watch.ts turns this into the index.
 */
export interface IndexedLockState {
  readonly state: LockState | null;
  readonly lastFencingToken: number;
  /** While an expired lease's lock-delay runs: when it ends (Unix ms, store clock). */
  readonly lockDelayUntilMs?: number;
}

/**
 * Change notices for watched keys. `onChange` is called (at least once, maybe more) after each change
 * of `key` that any instance made: grant, release, force release, hand-over. A lease that EXPIRES is
 * not announced (nothing writes at that moment): the watcher times it itself. Resolves once notices
 * flow (so a state read after it cannot miss a later change); the returned function stops them.
 */
export interface ChangeFeed {
  watchChanges(key: string, onChange: () => void): Promise<() => void>;
}

/** A lock set: several keys of one namespace held under one owner token, all or none. */
export interface LockSetInput {
  /** Store ids, all of one namespace (one Redis Cluster slot), distinct, sorted. */
  readonly keys: readonly string[];
  readonly ownerToken: string;
  readonly ttlMs: number;
  readonly holder: string | null;
  readonly lockDelayMs?: number;
}

export type LockSetAcquireOutcome =
  | { readonly acquired: true; readonly fencingTokens: readonly number[]; readonly expiresAtMs: number; readonly decidedAt: number }
  /** Nothing was taken. `busyKey`: one key that was held (or delayed, or had callers queued). */
  | { readonly acquired: false; readonly retryAfterMs: number; readonly busyKey: string };

export type LockSetRenewOutcome =
  | {
      readonly renewed: true;
      readonly fencingTokens: readonly number[];
      readonly expiresAtMs: number;
      /** A release request on any of the set's keys (the first one found). */
      readonly releaseRequested?: ReleaseRequest;
    }
  | { readonly renewed: false };

/**
 * Lock sets, each operation ONE atomic step over all the set's keys (one Lua script on Redis, one
 * transaction on etcd).
 */
export interface LockSetStore {
  /** Grants every key to `ownerToken` if every key is free (no live lease, no lock-delay, nobody queued); otherwise nothing. */
  acquireSet(input: LockSetInput): Promise<LockSetAcquireOutcome>;
  /** Extends every key's lease, only if `ownerToken` holds a live lease on every one; otherwise nothing. */
  renewSet(keys: readonly string[], ownerToken: string, ttlMs: number): Promise<LockSetRenewOutcome>;
  /** Frees every key `ownerToken` holds among `keys`; false when it held none of them. */
  releaseSet(keys: readonly string[], ownerToken: string): Promise<boolean>;
}

/** A store's lock-set methods, bound to it, so they can be handed on apart from it (LockStore.lockSets). */
export function lockSetsOf(store: LockSetStore): LockSetStore {
  return {
    acquireSet: (input) => store.acquireSet(input),
    renewSet: (keys, ownerToken, ttlMs) => store.renewSet(keys, ownerToken, ttlMs),
    releaseSet: (keys, ownerToken) => store.releaseSet(keys, ownerToken),
  };
}

export interface LockStore extends QuotaSlotStore, ChangeFeed {
  /** What kind of store this is, for health output and logs. */
  readonly kind: 'memory' | 'redis' | 'etcd';
  /** Semaphores and read/write locks (permit-store.ts). */
  readonly permits: PermitStore;
  /**
   * True when the store keeps the namespace quota inside its own lock steps: acquire takes the slot
   * (AcquireInput.maxHeldInNamespace), renew moves it, release, force release and a cancelled wait
   * give it back, each in the same atomic step. Otherwise the lock service keeps the quota with the
   * QuotaSlotStore calls around them.
   */
  readonly quotaInside?: boolean;
  /**
   * With `quotaInside`: the smallest cap the store keeps inside its lock steps. A smaller cap is kept by
   * the lock service with the QuotaSlotStore calls (the Redis store's shards would round a small cap too
   * coarsely; docs/limits.md). Absent: every cap.
   */
  readonly quotaInsideFrom?: number;
  /**
   * Grants the lock if it is free (or its lease ran out) and nobody is queued; otherwise waits up to
   * `waitMs` in the key's FIFO queue, or reports the time left on the current lease. Throws
   * TooManyWaitersError when the key's queue is full.
   */
  acquire(input: AcquireInput): Promise<AcquireOutcome>;
  /** Extends the lease to `ttlMs` from now, only if `ownerToken` holds a live lease. Keeps the fencing token. */
  renew(id: string, ownerToken: string, ttlMs: number): Promise<RenewOutcome>;
  /** Frees the lock, only if `ownerToken` holds a live lease. Returns whether it did. */
  release(id: string, ownerToken: string): Promise<boolean>;
  /** The live lease on `id`, or null when nobody holds it. Never exposes the owner token. */
  inspect(id: string): Promise<LockState | null>;
  /** The first `limit` live callers queued for `id`, head first. */
  queue(id: string, limit: number): Promise<QueuedCaller[]>;
  /** inspect, with what a watcher's index needs (the last fencing token also when free). */
  inspectIndexed(id: string): Promise<IndexedLockState>;
  /** Lock sets. */
  readonly lockSets: LockSetStore;
  /**
   * Frees the live lease on `id` whoever holds it (an administrator's override). The last fencing
   * token is kept, so the next grant is numbered above the evicted one, and the evicted owner token
   * can no longer renew or release. With `fencingToken`, only the live lease with that token is freed,
   * in the same atomic step: an operator who looked at one lease never evicts a newer holder.
   */
  forceRelease(id: string, fencingToken?: number): Promise<ForceReleaseOutcome>;
  /**
   * Asks the holder of the live lease with `fencingToken` to let go (see ReleaseRequest), in one atomic
   * step; its renewals carry the request from then on. Null when no live lease has that token.
   */
  requestRelease(id: string, fencingToken: number, request: ReleaseRequestInput): Promise<ReleaseRequest | null>;
  /**
   * One page of the live leases whose id starts with `prefix`, without blocking the store. A lock held
   * for the whole listing appears at least once; the Redis store may show one twice, and its pages hold
   * about `limit` locks (SCAN's COUNT is a hint), so only `nextCursor: null` means the end.
   */
  list(query: ListQuery): Promise<ListPage>;
  /** Resolves when the store can serve requests; rejects otherwise. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
