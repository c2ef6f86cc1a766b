/**
 * The one store port of the lease engine: a lease on a key of capacity N, taken with a weight, under
 * an owner token, until a TTL on the store's clock runs out. A lock is capacity 1 weight 1; a
 * semaphore capacity N weight 1; a read/write lock gives a reader weight 1 and a writer the whole
 * capacity; a lock set is one acquire over several keys of capacity 1. Lock-delay, idempotency, FIFO
 * waiting and the in-store quota are options of the one request. The domain services speak only this
 * port (lease-service.ts).
 *
 * Each store exposes its one engine as this port (`LeaseStoreHost.leases`): one acquire per store
 * serves every primitive, and the port is all a store offers for leases (Store: the port, its kind and
 * its lifecycle).
 */
import type {
  AcquireInput,
  IndexedLockState,
  ListPage,
  ListQuery,
  LockSetRenewOutcome,
  LockState,
  QueuedCaller,
  QuotaSlotStore,
} from './lock-values.js';
import type { IndexedPermitState, PermitKind, PermitListPage, PermitState, ReleaseRequest, ReleaseRequestInput } from './permit-values.js';

/** What kind of store serves the leases, for health output and logs. */
export type StoreKind = 'memory' | 'redis' | 'etcd';

/** Which primitive a key belongs to: the same name under each kind is a different key. */
export type LeaseKind = 'lock' | PermitKind;

/**
 * One acquire: `ids` (store ids) are one key, or a lock set's keys (distinct, sorted, of one namespace).
 * The rest is a lock's acquire (AcquireInput) without its one key: `waitMs` and `signal` for one key
 * only; `idempotencyKey` for locks only; `lockDelayMs` for locks and lock sets; `maxHeldInNamespace`
 * for locks only, on a store with `quotaInside`.
 */
export interface LeaseAcquire extends Omit<AcquireInput, 'id'> {
  readonly kind: LeaseKind;
  readonly ids: readonly string[];
  /** What the key holds in all (1 for a lock). */
  readonly capacity: number;
  /** What this lease takes of it (1 to `capacity`). */
  readonly weight: number;
}

export type LeaseAcquireOutcome =
  | {
      readonly acquired: true;
      /**
       * performance.now() when the store command that established the lease was sent: the caller
       * measures from here whether the answer is still fresh enough to hand out.
       */
      readonly decidedAt: number;
      /** One per key, in the order of `ids`. */
      readonly fencingTokens: readonly number[];
      readonly expiresAtMs: number;
      /**
       * A lock's idempotent replay: the lock was already held by a live lease acquired with the same
       * idempotency key; that lease is the answer (its owner token and holder, not the ones asked for),
       * and nothing changed.
       */
      readonly replayed?: { readonly ownerToken: string; readonly holder: string | null };
      /**
       * Granted after waiting in the key's queue (handed over), not at once: only then is the call's time
       * time in the queue (keyholder_lock_wait_seconds) rather than acquire latency.
       */
      readonly queued?: true;
    }
  | {
      readonly acquired: false;
      readonly reason: 'full';
      /**
       * Until the earliest live lease ends, when the answer was decided (for a wait that ran out: when it
       * ran out, not when it began); at least 1. With `quotaFull`: until the namespace's earliest quota
       * slot ends.
       */
      readonly retryAfterMs: number;
      /** The key that was busy (for one key: that key). */
      readonly busyId: string;
      /** The namespace holds its cap (a store with the quota inside its lock steps). */
      readonly quotaFull?: true;
    }
  | {
      readonly acquired: false;
      readonly reason: 'mismatch';
      /** The capacity the live leases were granted under. */
      readonly capacity: number;
      /** Until the last live lease ends (the capacity is free to change then): at least 1. */
      readonly retryAfterMs: number;
    };

/** A renewal over one key or several: a lock set's answer (fencing tokens in the order of the keys). */
export type LeaseRenewOutcome = LockSetRenewOutcome;

/** A lease an administrator evicted; the owner token is for quota bookkeeping only, never shown. */
export interface EvictedLease {
  readonly holder: string | null;
  readonly fencingToken: number;
  readonly ownerToken: string;
  /** Its end when it was evicted (Unix ms, store clock): its quota slot is retired until then. */
  readonly expiresAtMs: number;
  /**
   * It took no unit of a quota the store counts inside its lock steps (quotaInside): its quota slot, if
   * it has one (a lock set's key), was counted through the quota-slot calls and is the caller's to give back.
   */
  readonly quotaOutside?: true;
}

/** What each kind's reads answer: a lock keeps its own shapes (its HTTP answers are built from them). */
export type LeaseReads = {
  readonly lock: { readonly state: LockState; readonly indexed: IndexedLockState; readonly page: ListPage };
} & {
  readonly [K in PermitKind]: { readonly state: PermitState; readonly indexed: IndexedPermitState; readonly page: PermitListPage };
};

export interface LeaseStore extends QuotaSlotStore {
  /** What kind of store this is, for health output and logs. */
  readonly kind: StoreKind;
  /**
   * True when the store keeps the namespace quota inside its own lock steps (locks only): acquire takes
   * the slot (LeaseAcquire.maxHeldInNamespace), renew moves it, release, force release and a cancelled
   * wait give it back, each in the same atomic step. Otherwise the lease service keeps the quota with
   * the QuotaSlotStore calls around them.
   */
  readonly quotaInside?: boolean;
  /**
   * With `quotaInside`: the smallest cap the store keeps inside its lock steps. A smaller cap is kept by
   * the lease service with the QuotaSlotStore calls (the Redis store's shards would round a small cap too
   * coarsely; docs/limits.md). Absent: every cap.
   */
  readonly quotaInsideFrom?: number;
  /**
   * Grants the lease if its weight fits beside the live ones and nobody is queued (all keys or none);
   * otherwise waits up to `waitMs` in the key's FIFO queue, or says why not and until when. Throws
   * TooManyWaitersError when the key's queue is full, IdempotencyKeyReusedError as AcquireInput says.
   */
  acquire(request: LeaseAcquire): Promise<LeaseAcquireOutcome>;
  /** Extends the lease on every key to `ttlMs` from now, only if `ownerToken` holds each. Keeps the fencing tokens. */
  renew(kind: LeaseKind, ids: readonly string[], ownerToken: string, ttlMs: number): Promise<LeaseRenewOutcome>;
  /** Ends the lease (on every key `ownerToken` holds among `ids`); false when it held none. */
  release(kind: LeaseKind, ids: readonly string[], ownerToken: string): Promise<boolean>;
  /** Ends every live lease on `id`, or only the one with `fencingToken`; what it evicted (empty: nothing). */
  forceRelease(kind: LeaseKind, id: string, fencingToken?: number): Promise<EvictedLease[]>;
  /**
   * Asks the holder of the live lease with `fencingToken` on `id` to let go, without evicting it: the
   * request is stored with that lease (its renewals carry it) and ends with it. Null when no live lease
   * has that token (nothing changed).
   */
  requestRelease(kind: LeaseKind, id: string, fencingToken: number, request: ReleaseRequestInput): Promise<ReleaseRequest | null>;
  /** The live leases on `id`, or null when none is live. Never owner tokens. */
  inspect<K extends LeaseKind>(kind: K, id: string): Promise<LeaseReads[K]['state'] | null>;
  /** inspect, with what the key's watch index needs. */
  inspectIndexed<K extends LeaseKind>(kind: K, id: string): Promise<LeaseReads[K]['indexed']>;
  /** The first `limit` live callers queued for `id`, head first. */
  queue(kind: LeaseKind, id: string, limit: number): Promise<QueuedCaller[]>;
  /**
   * One page of the keys with live leases whose id starts with `query.prefix`, without blocking the
   * store. A key held for the whole listing appears at least once; the Redis store may show one twice,
   * and its pages hold about `limit` keys (SCAN's COUNT is a hint), so only `nextCursor: null` means the end.
   */
  list<K extends LeaseKind>(kind: K, query: ListQuery): Promise<LeaseReads[K]['page']>;
  /** Change notices of `id` (see ChangeFeed). */
  watchChanges(kind: LeaseKind, id: string, onChange: () => void): Promise<() => void>;
}

/**
 * A store as the domain is handed it: its one lease port. Each store's `leases` is its engine itself
 * (store/shared/lease-port.ts), with the store's kind and quota slots.
 */
export interface LeaseStoreHost {
  readonly leases: LeaseStore;
}

/** A store as the app holds it: its lease port, and its lifecycle (the health check and closing). */
export interface Store extends LeaseStoreHost {
  readonly kind: StoreKind;
  /**
   * The clock this process decides leases on, Unix ms, when it does (the embedded store: the wall clock
   * at start plus monotonic time since, which a later step of the wall clock leaves apart from Date.now();
   * etcd: the wall clock as NTP keeps it, never read backwards). The instance's own dates that are read
   * beside the store's (history's releases and force releases) are taken on it. Absent: the store's clock
   * is elsewhere (Redis's), and the instance's wall clock is the nearest.
   */
  readonly clock?: () => number;
  /** Resolves when the store can serve requests; rejects otherwise. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
