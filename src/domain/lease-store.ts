/**
 * The one store port of the lease engine: a lease on a key of capacity N, taken with a weight, under
 * an owner token, until a TTL on the store's clock runs out. A lock is capacity 1 weight 1; a
 * semaphore capacity N weight 1; a read/write lock gives a reader weight 1 and a writer the whole
 * capacity; a lock set is one acquire over several keys of capacity 1. Lock-delay, idempotency, FIFO
 * waiting and the in-store quota are options of the one request. The domain services speak only this
 * port (lease-service.ts).
 *
 * Each store still implements it through its lock, lock-set and permit methods (LockStore in
 * lock-store.ts, PermitStore in permit-store.ts): `leaseStoreOf` is the one place that chooses among
 * them, so one acquire per store serves every primitive.
 */
import { withReleaseRequest } from './permit-store.js';
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

type Reads<K extends LeaseKind> = LeaseReads[K];

/**
 * The lease port over a store's lock, lock-set and permit methods: the one place that picks among them.
 * A lock (capacity 1) goes to the store's lock steps, which are its capacity-1 engine (lock-delay,
 * idempotency, the in-store quota); several keys to its lock-set steps; a weighted lease to its permit
 * steps. Methods are looked up on each call, so a store wrapped for instrumentation (or a test's
 * stand-in) is followed as it is.
 */
export function leaseStoreOf(store: LockStore): LeaseStore {
  const one = (keys: readonly string[]): string => keys[0] as string;
  return {
    get kind() {
      return store.kind;
    },
    get quotaInside() {
      return store.quotaInside;
    },
    get quotaInsideFrom() {
      return store.quotaInsideFrom;
    },
    reserveQuotaSlot: (...args) => store.reserveQuotaSlot(...args),
    extendQuotaSlot: (...args) => store.extendQuotaSlot(...args),
    freeQuotaSlot: (...args) => store.freeQuotaSlot(...args),

    async acquire(request) {
      const { kind, keys, ownerToken, ttlMs, holder } = request;
      if (kind !== 'lock') {
        const { capacity, weight, waitMs, signal } = request;
        const key = one(keys);
        const outcome = await store.permits.acquirePermit({ kind, key, ownerToken, ttlMs, holder, weight, capacity, waitMs, signal });
        if (!outcome.acquired) return outcome.reason === 'full' ? { ...outcome, busyKey: key } : outcome;
        return { acquired: true, decidedAt: outcome.decidedAt, fencingTokens: [outcome.fencingToken], expiresAtMs: outcome.expiresAtMs };
      }
      if (keys.length > 1) {
        const outcome = await store.lockSets.acquireSet({ keys, ownerToken, ttlMs, holder, lockDelayMs: request.lockDelayMs });
        return outcome.acquired
          ? outcome
          : { acquired: false, reason: 'full', retryAfterMs: outcome.retryAfterMs, busyKey: outcome.busyKey };
      }
      const key = one(keys);
      const { waitMs, signal, idempotencyKey, lockDelayMs, maxHeldInNamespace } = request;
      const outcome = await store.acquire({
        id: key,
        ownerToken,
        ttlMs,
        holder,
        waitMs,
        signal,
        idempotencyKey,
        lockDelayMs,
        maxHeldInNamespace,
      });
      if (!outcome.acquired) {
        const { retryAfterMs, quotaFull } = outcome;
        return quotaFull
          ? { acquired: false, reason: 'full', retryAfterMs, busyKey: key, quotaFull }
          : { acquired: false, reason: 'full', retryAfterMs, busyKey: key };
      }
      const { decidedAt, fencingToken, expiresAtMs, replayed } = outcome;
      return replayed
        ? { acquired: true, decidedAt, fencingTokens: [fencingToken], expiresAtMs, replayed }
        : { acquired: true, decidedAt, fencingTokens: [fencingToken], expiresAtMs };
    },

    async renew(kind, keys, ownerToken, ttlMs) {
      if (kind === 'lock' && keys.length > 1) return store.lockSets.renewSet(keys, ownerToken, ttlMs);
      const outcome =
        kind === 'lock'
          ? await store.renew(one(keys), ownerToken, ttlMs)
          : await store.permits.renewPermit(kind, one(keys), ownerToken, ttlMs);
      if (!outcome.renewed) return outcome;
      const { fencingToken, expiresAtMs, releaseRequested } = outcome;
      return withReleaseRequest({ renewed: true as const, fencingTokens: [fencingToken], expiresAtMs }, releaseRequested);
    },

    release(kind, keys, ownerToken) {
      if (kind !== 'lock') return store.permits.releasePermit(kind, one(keys), ownerToken);
      return keys.length > 1 ? store.lockSets.releaseSet(keys, ownerToken) : store.release(one(keys), ownerToken);
    },

    async forceRelease(kind, key, fencingToken) {
      if (kind !== 'lock') return store.permits.forceReleasePermits(kind, key, fencingToken);
      const outcome = await store.forceRelease(key, fencingToken);
      return outcome.released
        ? [{ holder: outcome.holder, fencingToken: outcome.fencingToken, ownerToken: outcome.evictedOwnerToken }]
        : [];
    },

    requestRelease: (kind, key, fencingToken, request) =>
      kind === 'lock'
        ? store.requestRelease(key, fencingToken, request)
        : store.permits.requestPermitRelease(kind, key, fencingToken, request),

    inspect<K extends LeaseKind>(kind: K, key: string): Promise<Reads<K>['state'] | null> {
      return kind === 'lock' ? store.inspect(key) : store.permits.inspectPermits(kind, key);
    },

    inspectIndexed<K extends LeaseKind>(kind: K, key: string): Promise<Reads<K>['indexed']> {
      return kind === 'lock' ? store.inspectIndexed(key) : store.permits.inspectPermitsIndexed(kind, key);
    },

    queue: (kind, key, limit) => (kind === 'lock' ? store.queue(key, limit) : store.permits.permitQueue(kind, key, limit)),

    list<K extends LeaseKind>(kind: K, query: ListQuery): Promise<Reads<K>['page']> {
      return kind === 'lock' ? store.list(query) : store.permits.listPermits(kind, query);
    },

    watchChanges: (kind, key, onChange) =>
      kind === 'lock' ? store.watchChanges(key, onChange) : store.permits.watchPermitChanges(kind, key, onChange),
  } satisfies LeaseStore;
}
