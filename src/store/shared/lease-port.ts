import type {
  EvictedLease,
  LeaseAcquire,
  LeaseAcquireOutcome,
  LeaseKind,
  LeaseReads,
  LeaseRenewOutcome,
} from '../../domain/lease-store.js';
import type { LeaseStore } from '../../domain/lease-store.js';
import type { IndexedLockState, ListPage, ListQuery, LockState } from '../../domain/lock-values.js';
import type { PermitKind, QueuedCaller } from '../../domain/permit-values.js';
import type { IndexedPermitState, PermitListPage, PermitListQuery, PermitState } from '../../domain/permit-values.js';
import type { ReleaseRequest, ReleaseRequestInput } from '../../domain/permit-values.js';

/**
 * A store's one lease engine (memory-leases.ts, redis-leases.ts, etcd-leases.ts): one acquire for every
 * kind of key, and the calls on held keys keyed by kind.
 */
export interface LeaseEngine {
  acquire(request: LeaseAcquire): Promise<LeaseAcquireOutcome>;
  renew(kind: LeaseKind, ids: readonly string[], ownerToken: string, ttlMs: number): Promise<LeaseRenewOutcome>;
  release(kind: LeaseKind, ids: readonly string[], ownerToken: string): Promise<boolean>;
  forceRelease(kind: LeaseKind, id: string, fencingToken?: number): Promise<EvictedLease[]>;
  requestRelease(kind: LeaseKind, id: string, fencingToken: number, request: ReleaseRequestInput): Promise<ReleaseRequest | null>;
  queue(kind: LeaseKind, id: string, limit: number): Promise<QueuedCaller[]>;
  watchChanges(kind: LeaseKind, id: string, onChange: () => void): Promise<() => void>;
  lockState(id: string): Promise<LockState | null>;
  lockIndexed(id: string): Promise<IndexedLockState>;
  listLocks(query: ListQuery): Promise<ListPage>;
  inspectPermits(kind: PermitKind, id: string): Promise<PermitState | null>;
  inspectPermitsIndexed(kind: PermitKind, id: string): Promise<IndexedPermitState>;
  listPermits(kind: PermitKind, query: PermitListQuery): Promise<PermitListPage>;
}

/** What a store adds to its engine to make the domain's port: its kind and its quota slots. */
export type StoreParts = Pick<
  LeaseStore,
  'kind' | 'quotaInside' | 'quotaInsideFrom' | 'reserveQuotaSlot' | 'extendQuotaSlot' | 'freeQuotaSlot' | 'retireQuotaSlot'
>;

/**
 * The domain's port (LeaseStore) over a store's engine: every call on leases goes straight to the
 * engine's own method (one acquire for every kind); only the reads pick the engine's read of the kind,
 * whose answers differ in shape (a lock's state, or a key's holders). The store's kind and quota slots
 * are looked up on the store on each call. A store makes it once, after its engine:
 * `this.leases = leaseStoreOver(this, this.engine)`.
 */
export function leaseStoreOver(store: StoreParts, engine: LeaseEngine): LeaseStore {
  type Reads<K extends LeaseKind> = LeaseReads[K];
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
    retireQuotaSlot: (...args) => store.retireQuotaSlot(...args),
    acquire: (request) => engine.acquire(request),
    renew: (kind, ids, ownerToken, ttlMs) => engine.renew(kind, ids, ownerToken, ttlMs),
    release: (kind, ids, ownerToken) => engine.release(kind, ids, ownerToken),
    forceRelease: (kind, id, fencingToken) => engine.forceRelease(kind, id, fencingToken),
    requestRelease: (kind, id, fencingToken, request) => engine.requestRelease(kind, id, fencingToken, request),
    queue: (kind, id, limit) => engine.queue(kind, id, limit),
    watchChanges: (kind, id, onChange) => engine.watchChanges(kind, id, onChange),
    inspect<K extends LeaseKind>(kind: K, id: string): Promise<Reads<K>['state'] | null> {
      return kind === 'lock' ? engine.lockState(id) : engine.inspectPermits(kind, id);
    },
    inspectIndexed<K extends LeaseKind>(kind: K, id: string): Promise<Reads<K>['indexed']> {
      return kind === 'lock' ? engine.lockIndexed(id) : engine.inspectPermitsIndexed(kind, id);
    },
    list<K extends LeaseKind>(kind: K, query: ListQuery): Promise<Reads<K>['page']> {
      return kind === 'lock' ? engine.listLocks(query) : engine.listPermits(kind, query);
    },
  };
}
