/**
 * The lock's and the permits' one-key words (acquire(id, ..), renew(id, ..), acquireSet, inspect,
 * acquirePermit, ...) written once over a store's one lease port. The stores speak only the port
 * (`store.leases`); the conformance contracts and many tests are written in these words, so each call
 * here is a thin translation to the port, the same for every store: what a test sees through them is
 * what the port answered.
 */
import type { EvictedLease, LeaseRenewOutcome, LeaseStore, Store } from '../../src/domain/lease-store.js';
import type {
  AcquireInput,
  IndexedLockState,
  ListPage,
  ListQuery,
  LockSetRenewOutcome,
  LockState,
  QuotaSlotStore,
  RenewOutcome,
} from '../../src/domain/lock-values.js';
import { withReleaseRequest } from '../../src/domain/permit-values.js';
import type {
  IndexedPermitState,
  PermitKind,
  PermitListPage,
  PermitListQuery,
  PermitState,
  QueuedCaller,
  ReleaseRequest,
  ReleaseRequestInput,
} from '../../src/domain/permit-values.js';

/** A lock's acquire in the one-key words (a grant of capacity 1, weight 1). */
export type AcquireOutcome =
  | {
      readonly acquired: true;
      readonly fencingToken: number;
      readonly expiresAtMs: number;
      readonly decidedAt: number;
      readonly replayed?: { readonly ownerToken: string; readonly holder: string | null };
    }
  | { readonly acquired: false; readonly retryAfterMs: number; readonly quotaFull?: true };

export type ForceReleaseOutcome =
  | { readonly released: true; readonly holder: string | null; readonly fencingToken: number; readonly evictedOwnerToken: string }
  | { readonly released: false };

export interface LockSetInput {
  readonly ids: readonly string[];
  readonly ownerToken: string;
  readonly ttlMs: number;
  readonly holder: string | null;
  readonly lockDelayMs?: number;
}

export type LockSetAcquireOutcome =
  | { readonly acquired: true; readonly fencingTokens: readonly number[]; readonly expiresAtMs: number; readonly decidedAt: number }
  | { readonly acquired: false; readonly retryAfterMs: number; readonly busyId: string };

export interface PermitAcquireInput {
  readonly kind: PermitKind;
  readonly id: string;
  readonly ownerToken: string;
  readonly ttlMs: number;
  readonly holder: string | null;
  readonly weight: number;
  readonly capacity: number;
  readonly waitMs?: number;
  readonly signal?: AbortSignal;
}

export type PermitAcquireOutcome =
  | { readonly acquired: true; readonly fencingToken: number; readonly expiresAtMs: number; readonly decidedAt: number }
  | { readonly acquired: false; readonly reason: 'full'; readonly retryAfterMs: number }
  | { readonly acquired: false; readonly reason: 'mismatch'; readonly capacity: number; readonly retryAfterMs: number };

export type EvictedPermit = EvictedLease;

/** A lock set's words: every key or none, each one step of the port. */
export interface LockSetStore {
  acquireSet(input: LockSetInput): Promise<LockSetAcquireOutcome>;
  renewSet(ids: readonly string[], ownerToken: string, ttlMs: number): Promise<LockSetRenewOutcome>;
  releaseSet(ids: readonly string[], ownerToken: string): Promise<boolean>;
}

/** A semaphore's or read/write lock's words for one key. */
export interface PermitStore {
  acquirePermit(input: PermitAcquireInput): Promise<PermitAcquireOutcome>;
  renewPermit(kind: PermitKind, id: string, ownerToken: string, ttlMs: number): Promise<RenewOutcome>;
  releasePermit(kind: PermitKind, id: string, ownerToken: string): Promise<boolean>;
  inspectPermits(kind: PermitKind, id: string): Promise<PermitState | null>;
  permitQueue(kind: PermitKind, id: string, limit: number): Promise<QueuedCaller[]>;
  inspectPermitsIndexed(kind: PermitKind, id: string): Promise<IndexedPermitState>;
  watchPermitChanges(kind: PermitKind, id: string, onChange: () => void): Promise<() => void>;
  forceReleasePermits(kind: PermitKind, id: string, fencingToken?: number): Promise<EvictedPermit[]>;
  requestPermitRelease(kind: PermitKind, id: string, fencingToken: number, request: ReleaseRequestInput): Promise<ReleaseRequest | null>;
  listPermits(kind: PermitKind, query: PermitListQuery): Promise<PermitListPage>;
}

/** A lock's words for one key, its lock sets, and the port's kind and quota slots. */
export interface LockWords extends LockSetStore, QuotaSlotStore {
  readonly kind: Store['kind'];
  readonly quotaInside?: boolean;
  readonly quotaInsideFrom?: number;
  readonly lockSets: LockSetStore;
  readonly permits: PermitStore;
  acquire(input: AcquireInput): Promise<AcquireOutcome>;
  renew(id: string, ownerToken: string, ttlMs: number): Promise<RenewOutcome>;
  release(id: string, ownerToken: string): Promise<boolean>;
  inspect(id: string): Promise<LockState | null>;
  queue(id: string, limit: number): Promise<QueuedCaller[]>;
  inspectIndexed(id: string): Promise<IndexedLockState>;
  watchChanges(id: string, onChange: () => void): Promise<() => void>;
  forceRelease(id: string, fencingToken?: number): Promise<ForceReleaseOutcome>;
  requestRelease(id: string, fencingToken: number, request: ReleaseRequestInput): Promise<ReleaseRequest | null>;
  list(query: ListQuery): Promise<ListPage>;
}

/** A store with the words over its port (withWords). */
export type Worded<S extends Store = Store> = S & LockWords;

/** Any store in the words: what the conformance contracts speak. */
export type LockStore = Worded;

/** The answer to a renewal of one key, in the one-key words. */
async function renewedOne(renewal: Promise<LeaseRenewOutcome>): Promise<RenewOutcome> {
  const outcome = await renewal;
  if (!outcome.renewed) return outcome;
  const { expiresAtMs, releaseRequested } = outcome;
  return withReleaseRequest({ renewed: true as const, fencingToken: outcome.fencingTokens[0] as number, expiresAtMs }, releaseRequested);
}

/** A lock set's words over the port: the port's several-keys acquire of capacity-1 keys. */
export function lockSetWords(leases: LeaseStore): LockSetStore {
  return {
    async acquireSet({ ids, ownerToken, ttlMs, holder, lockDelayMs }) {
      const outcome = await leases.acquire({ kind: 'lock', ids, capacity: 1, weight: 1, ownerToken, ttlMs, holder, lockDelayMs });
      if (outcome.acquired) {
        return { acquired: true, fencingTokens: outcome.fencingTokens, expiresAtMs: outcome.expiresAtMs, decidedAt: outcome.decidedAt };
      }
      // (Keys of capacity 1: never a mismatch.)
      return {
        acquired: false,
        retryAfterMs: outcome.retryAfterMs,
        busyId: outcome.reason === 'full' ? outcome.busyId : (ids[0] as string),
      };
    },
    renewSet: (ids, ownerToken, ttlMs) => leases.renew('lock', ids, ownerToken, ttlMs),
    releaseSet: (ids, ownerToken) => leases.release('lock', ids, ownerToken),
  };
}

/** A semaphore's or read/write lock's words over the port: one key of its capacity. */
export function permitWords(leases: LeaseStore): PermitStore {
  return {
    async acquirePermit(input) {
      const outcome = await leases.acquire({ ...input, ids: [input.id] });
      if (!outcome.acquired) {
        return outcome.reason === 'full'
          ? { acquired: false, reason: 'full', retryAfterMs: outcome.retryAfterMs }
          : { acquired: false, reason: 'mismatch', capacity: outcome.capacity, retryAfterMs: outcome.retryAfterMs };
      }
      const { fencingTokens, expiresAtMs, decidedAt } = outcome;
      return { acquired: true, fencingToken: fencingTokens[0] as number, expiresAtMs, decidedAt };
    },
    renewPermit: (kind, id, ownerToken, ttlMs) => renewedOne(leases.renew(kind, [id], ownerToken, ttlMs)),
    releasePermit: (kind, id, ownerToken) => leases.release(kind, [id], ownerToken),
    inspectPermits: (kind, id) => leases.inspect(kind, id),
    permitQueue: (kind, id, limit) => leases.queue(kind, id, limit),
    inspectPermitsIndexed: (kind, id) => leases.inspectIndexed(kind, id),
    watchPermitChanges: (kind, id, onChange) => leases.watchChanges(kind, id, onChange),
    forceReleasePermits: (kind, id, fencingToken) => leases.forceRelease(kind, id, fencingToken),
    requestPermitRelease: (kind, id, fencingToken, request) => leases.requestRelease(kind, id, fencingToken, request),
    listPermits: (kind, query) => leases.list(kind, query),
  };
}

/** A lock's words over the port (with its lock sets and the permits' words beside them). */
export function lockWords(leases: LeaseStore): LockWords {
  const lockSets = lockSetWords(leases);
  return {
    get kind() {
      return leases.kind;
    },
    get quotaInside() {
      return leases.quotaInside;
    },
    get quotaInsideFrom() {
      return leases.quotaInsideFrom;
    },
    lockSets,
    permits: permitWords(leases),
    ...lockSets,
    reserveQuotaSlot: (...args) => leases.reserveQuotaSlot(...args),
    extendQuotaSlot: (...args) => leases.extendQuotaSlot(...args),
    freeQuotaSlot: (...args) => leases.freeQuotaSlot(...args),
    retireQuotaSlot: (...args) => leases.retireQuotaSlot(...args),
    async acquire(input) {
      const { id, ownerToken, ttlMs, holder, waitMs, signal, idempotencyKey, lockDelayMs, maxHeldInNamespace } = input;
      const outcome = await leases.acquire({
        kind: 'lock',
        ids: [id],
        capacity: 1,
        weight: 1,
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
        // (A key of capacity 1: never a mismatch.) A store with the quota inside says when it was the quota.
        return outcome.reason === 'full' && outcome.quotaFull
          ? { acquired: false, retryAfterMs: outcome.retryAfterMs, quotaFull: true }
          : { acquired: false, retryAfterMs: outcome.retryAfterMs };
      }
      const { fencingTokens, expiresAtMs, decidedAt, replayed } = outcome;
      const fencingToken = fencingTokens[0] as number;
      return replayed
        ? { acquired: true, fencingToken, expiresAtMs, decidedAt, replayed }
        : { acquired: true, fencingToken, expiresAtMs, decidedAt };
    },
    renew: (id, ownerToken, ttlMs) => renewedOne(leases.renew('lock', [id], ownerToken, ttlMs)),
    release: (id, ownerToken) => leases.release('lock', [id], ownerToken),
    inspect: (id) => leases.inspect('lock', id),
    inspectIndexed: (id) => leases.inspectIndexed('lock', id),
    queue: (id, limit) => leases.queue('lock', id, limit),
    watchChanges: (id, onChange) => leases.watchChanges('lock', id, onChange),
    requestRelease: (id, fencingToken, request) => leases.requestRelease('lock', id, fencingToken, request),
    async forceRelease(id, fencingToken) {
      const [evicted] = await leases.forceRelease('lock', id, fencingToken);
      if (evicted === undefined) return { released: false };
      return { released: true, holder: evicted.holder, fencingToken: evicted.fencingToken, evictedOwnerToken: evicted.ownerToken };
    },
    list: (query) => leases.list('lock', query),
  };
}

/**
 * `store` with the words over its port: the words come first (a store's own quota-slot methods are
 * the port's too), everything else is the store's own (its `leases`, ping, close, a memory store's
 * sweep, ...), called on the store itself. The words read `store.leases` when made: wrap a store whose
 * port a test replaces (withLeases) after replacing it.
 */
export function withWords<S extends Store>(store: S): Worded<S> {
  const words = lockWords(store.leases);
  return new Proxy(store, {
    get(target, prop) {
      if (prop in words) return Reflect.get(words, prop) as unknown;
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
    has: (target, prop) => prop in words || prop in target,
  }) as Worded<S>;
}
