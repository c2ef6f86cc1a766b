/**
 * The one store port of the lease engine: a lease on a key of capacity N, taken with a weight, under
 * an owner token, until a TTL on the store's clock runs out. A lock is capacity 1 weight 1; a
 * semaphore capacity N weight 1; a read/write lock gives a reader weight 1 and a writer the whole
 * capacity; a lock set is one acquire over several keys of capacity 1. Lock-delay, idempotency, FIFO
 * waiting and the in-store quota are options of the one request. The domain services speak only this
 * port (lease-service.ts).
 *
 * Each store exposes its one engine as this port (`LeaseStoreHost.leases`): one acquire per store
 * serves every primitive. The LockStore (lock-store.ts) and PermitStore (permit-store.ts) words each
 * store also has are written over the same engine (store/shared/engine-words.ts).
 */
import type {
  AcquireInput,
  IndexedLockState,
  ListPage,
  ListQuery,
  LockSetRenewOutcome,
  LockState,
  LockStore,
  QueuedCaller,
  QuotaSlotStore,
} from './lock-store.js';
import type { IndexedPermitState, PermitKind, PermitListPage, PermitState, ReleaseRequest, ReleaseRequestInput } from './permit-store.js';

/** Which primitive a key belongs to: the same name under each kind is a different key. */
export type LeaseKind = 'lock' | PermitKind;

/**
 * One acquire: `keys` (store ids) are one key, or a lock set's keys (distinct, sorted, of one namespace).
 * The rest is a lock's acquire (AcquireInput) without its one key: `waitMs` and `signal` for one key
 * only; `idempotencyKey` for locks only; `lockDelayMs` for locks and lock sets; `maxHeldInNamespace`
 * for locks only, on a store with `quotaInside`.
 */
export interface LeaseAcquire extends Omit<AcquireInput, 'id'> {
  readonly kind: LeaseKind;
  readonly keys: readonly string[];
  /** What the key holds in all (1 for a lock). */
  readonly capacity: number;
  /** What this lease takes of it (1 to `capacity`). */
  readonly weight: number;
}

export type LeaseAcquireOutcome =
  | {
      readonly acquired: true;
      /** performance.now() when the store command that established the lease was sent. */
      readonly decidedAt: number;
      /** One per key, in the order of `keys`. */
      readonly fencingTokens: readonly number[];
      readonly expiresAtMs: number;
      /** A lock's idempotent replay: the earlier lease's owner token and holder (see AcquireOutcome). */
      readonly replayed?: { readonly ownerToken: string; readonly holder: string | null };
    }
  | {
      readonly acquired: false;
      readonly reason: 'full';
      /** At least 1 (see AcquireOutcome, PermitAcquireOutcome). */
      readonly retryAfterMs: number;
      /** The key that was busy (for one key: that key). */
      readonly busyKey: string;
      /** The namespace holds its cap (a store with the quota inside its lock steps). */
      readonly quotaFull?: true;
    }
  | {
      readonly acquired: false;
      readonly reason: 'mismatch';
      /** The capacity the live leases were granted under. */
      readonly capacity: number;
      readonly retryAfterMs: number;
    };

/** A renewal over one key or several: a lock set's answer (fencing tokens in the order of the keys). */
export type LeaseRenewOutcome = LockSetRenewOutcome;

/** A lease an administrator evicted; the owner token is for quota bookkeeping only, never shown. */
export interface EvictedLease {
  readonly holder: string | null;
  readonly fencingToken: number;
  readonly ownerToken: string;
}

/** What each kind's reads answer: a lock keeps its own shapes (its HTTP answers are built from them). */
export type LeaseReads = {
  readonly lock: { readonly state: LockState; readonly indexed: IndexedLockState; readonly page: ListPage };
} & {
  readonly [K in PermitKind]: { readonly state: PermitState; readonly indexed: IndexedPermitState; readonly page: PermitListPage };
};

export interface LeaseStore extends QuotaSlotStore {
  /** What kind of store this is, for health output and logs. */
  readonly kind: LockStore['kind'];
  /** See LockStore.quotaInside (locks only). */
  readonly quotaInside?: boolean;
  /** See LockStore.quotaInsideFrom. */
  readonly quotaInsideFrom?: number;
  /**
   * Grants the lease if its weight fits beside the live ones and nobody is queued (all keys or none);
   * otherwise waits up to `waitMs` in the key's FIFO queue, or says why not and until when. Throws
   * TooManyWaitersError when the key's queue is full, IdempotencyKeyReusedError as AcquireInput says.
   */
  acquire(request: LeaseAcquire): Promise<LeaseAcquireOutcome>;
  /** Extends the lease on every key to `ttlMs` from now, only if `ownerToken` holds each. Keeps the fencing tokens. */
  renew(kind: LeaseKind, keys: readonly string[], ownerToken: string, ttlMs: number): Promise<LeaseRenewOutcome>;
  /** Ends the lease (on every key `ownerToken` holds among `keys`); false when it held none. */
  release(kind: LeaseKind, keys: readonly string[], ownerToken: string): Promise<boolean>;
  /** Ends every live lease on `key`, or only the one with `fencingToken`; what it evicted (empty: nothing). */
  forceRelease(kind: LeaseKind, key: string, fencingToken?: number): Promise<EvictedLease[]>;
  /**
   * Asks the holder of the live lease with `fencingToken` on `key` to let go, without evicting it: the
   * request is stored with that lease (its renewals carry it) and ends with it. Null when no live lease
   * has that token (nothing changed).
   */
  requestRelease(kind: LeaseKind, key: string, fencingToken: number, request: ReleaseRequestInput): Promise<ReleaseRequest | null>;
  /** The live leases on `key`, or null when none is live. Never owner tokens. */
  inspect<K extends LeaseKind>(kind: K, key: string): Promise<LeaseReads[K]['state'] | null>;
  /** inspect, with what the key's watch index needs. */
  inspectIndexed<K extends LeaseKind>(kind: K, key: string): Promise<LeaseReads[K]['indexed']>;
  /** The first `limit` live callers queued for `key`, head first. */
  queue(kind: LeaseKind, key: string, limit: number): Promise<QueuedCaller[]>;
  /** One page of keys with live leases (see LockStore.list). */
  list<K extends LeaseKind>(kind: K, query: ListQuery): Promise<LeaseReads[K]['page']>;
  /** Change notices of `key` (see ChangeFeed). */
  watchChanges(kind: LeaseKind, key: string, onChange: () => void): Promise<() => void>;
}

/**
 * A store as the domain is handed it: its one lease port. Each store's `leases` is its engine itself
 * (store/shared/engine-words.ts), with the store's kind and quota slots; the LockStore and PermitStore
 * words beside it are what the conformance contracts and tests speak.
 */
export interface LeaseStoreHost {
  readonly leases: LeaseStore;
}

/** The store's one lease port (see LeaseStoreHost). */
export function leaseStoreOf(store: LeaseStoreHost): LeaseStore {
  return store.leases;
}

/** A store as the app holds it: the domain's port (`leases`) and the LockStore words beside it. */
export type StoreWithLeases = LockStore & LeaseStoreHost;
