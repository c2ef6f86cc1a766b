import type {
  EvictedLease,
  LeaseAcquire,
  LeaseAcquireOutcome,
  LeaseKind,
  LeaseReads,
  LeaseRenewOutcome,
} from '../../domain/lease-store.js';
import type { LeaseStore, LeaseStoreHost } from '../../domain/lease-store.js';
import type { AcquireInput, AcquireOutcome, ForceReleaseOutcome, IndexedLockState, ListPage, ListQuery } from '../../domain/lock-store.js';
import type {
  LockSetAcquireOutcome,
  LockSetInput,
  LockSetRenewOutcome,
  LockState,
  QuotaSlotOutcome,
  RenewOutcome,
} from '../../domain/lock-store.js';
import { withReleaseRequest } from '../../domain/permit-store.js';
import type { EvictedPermit, PermitAcquireInput, PermitAcquireOutcome, PermitKind, QueuedCaller } from '../../domain/permit-store.js';
import type { IndexedPermitState, PermitListPage, PermitListQuery, PermitState } from '../../domain/permit-store.js';
import type { ReleaseRequest, ReleaseRequestInput } from '../../domain/permit-store.js';

/**
 * A store's one lease engine (memory-leases.ts, redis-leases.ts, etcd-leases.ts): one acquire for every
 * kind of key, and the calls on held keys keyed by kind.
 */
export interface LeaseEngine {
  acquire(request: LeaseAcquire): Promise<LeaseAcquireOutcome>;
  renew(kind: LeaseKind, keys: readonly string[], ownerToken: string, ttlMs: number): Promise<LeaseRenewOutcome>;
  release(kind: LeaseKind, keys: readonly string[], ownerToken: string): Promise<boolean>;
  forceRelease(kind: LeaseKind, key: string, fencingToken?: number): Promise<EvictedLease[]>;
  requestRelease(kind: LeaseKind, key: string, fencingToken: number, request: ReleaseRequestInput): Promise<ReleaseRequest | null>;
  queue(kind: LeaseKind, key: string, limit: number): Promise<QueuedCaller[]>;
  watchChanges(kind: LeaseKind, key: string, onChange: () => void): Promise<() => void>;
  lockState(key: string): Promise<LockState | null>;
  lockIndexed(key: string): Promise<IndexedLockState>;
  listLocks(query: ListQuery): Promise<ListPage>;
  inspectPermits(kind: PermitKind, key: string): Promise<PermitState | null>;
  inspectPermitsIndexed(kind: PermitKind, key: string): Promise<IndexedPermitState>;
  listPermits(kind: PermitKind, query: PermitListQuery): Promise<PermitListPage>;
}

/** What a store adds to its engine to make the domain's port: its kind and its quota slots. */
type StoreParts = Pick<LeaseStore, 'kind' | 'quotaInside' | 'quotaInsideFrom' | 'reserveQuotaSlot' | 'extendQuotaSlot' | 'freeQuotaSlot'>;

/**
 * The domain's port (LeaseStore) over a store's engine: every call on leases goes straight to the
 * engine's own method (one acquire for every kind); only the reads pick the engine's read of the kind,
 * whose answers differ in shape (a lock's state, or a key's holders). The store's kind and quota slots
 * are looked up on the store on each call.
 */
function leaseStoreOver(store: StoreParts, engine: LeaseEngine): LeaseStore {
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
    acquire: (request) => engine.acquire(request),
    renew: (kind, keys, ownerToken, ttlMs) => engine.renew(kind, keys, ownerToken, ttlMs),
    release: (kind, keys, ownerToken) => engine.release(kind, keys, ownerToken),
    forceRelease: (kind, key, fencingToken) => engine.forceRelease(kind, key, fencingToken),
    requestRelease: (kind, key, fencingToken, request) => engine.requestRelease(kind, key, fencingToken, request),
    queue: (kind, key, limit) => engine.queue(kind, key, limit),
    watchChanges: (kind, key, onChange) => engine.watchChanges(kind, key, onChange),
    inspect<K extends LeaseKind>(kind: K, key: string): Promise<Reads<K>['state'] | null> {
      return kind === 'lock' ? engine.lockState(key) : engine.inspectPermits(kind, key);
    },
    inspectIndexed<K extends LeaseKind>(kind: K, key: string): Promise<Reads<K>['indexed']> {
      return kind === 'lock' ? engine.lockIndexed(key) : engine.inspectPermitsIndexed(kind, key);
    },
    list<K extends LeaseKind>(kind: K, query: ListQuery): Promise<Reads<K>['page']> {
      return kind === 'lock' ? engine.listLocks(query) : engine.listPermits(kind, query);
    },
  };
}

/** The answer to a renewal of one key, in the one-key words (LockStore's and PermitStore's). */
async function renewedOne(renewal: Promise<LeaseRenewOutcome>): Promise<RenewOutcome> {
  const outcome = await renewal;
  if (!outcome.renewed) return outcome;
  const { expiresAtMs, releaseRequested } = outcome;
  return withReleaseRequest({ renewed: true as const, fencingToken: outcome.fencingTokens[0] as number, expiresAtMs }, releaseRequested);
}

/**
 * LockStore's lock and lock-set methods over a store's `permits` engine: a lock is the engine's
 * capacity-1 key, a lock set its several-keys acquire. Written once for every store (the Redis engine
 * serves them with its capacity-1 fast path, the lock scripts).
 */
export abstract class EngineLockWords implements LeaseStoreHost {
  /** The store's engine, serving every primitive. */
  abstract readonly permits: LeaseEngine;
  abstract readonly kind: LeaseStore['kind'];
  abstract reserveQuotaSlot(namespace: string, quotaSlotId: string, ttlMs: number, maxQuotaSlots: number): Promise<QuotaSlotOutcome>;
  abstract extendQuotaSlot(namespace: string, quotaSlotId: string, expiresAtMs: number, maxQuotaSlots: number): Promise<void>;
  abstract freeQuotaSlot(namespace: string, quotaSlotId: string, maxQuotaSlots: number): Promise<void>;
  private port: LeaseStore | undefined;

  /** The domain's one port: the engine itself, with this store's kind and quota slots (made on first use). */
  get leases(): LeaseStore {
    this.port ??= leaseStoreOver(this, this.permits);
    return this.port;
  }

  async acquire(input: AcquireInput): Promise<AcquireOutcome> {
    const { id, ownerToken, ttlMs, holder, waitMs, signal, idempotencyKey, lockDelayMs, maxHeldInNamespace } = input;
    const outcome = await this.permits.acquire({
      kind: 'lock',
      keys: [id],
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
  }

  renew(key: string, ownerToken: string, ttlMs: number): Promise<RenewOutcome> {
    return renewedOne(this.permits.renew('lock', [key], ownerToken, ttlMs));
  }

  requestRelease(key: string, fencingToken: number, request: ReleaseRequestInput): Promise<ReleaseRequest | null> {
    return this.permits.requestRelease('lock', key, fencingToken, request);
  }

  release(key: string, ownerToken: string): Promise<boolean> {
    return this.permits.release('lock', [key], ownerToken);
  }

  inspect(key: string): Promise<LockState | null> {
    return this.permits.lockState(key);
  }

  inspectIndexed(key: string): Promise<IndexedLockState> {
    return this.permits.lockIndexed(key);
  }

  watchChanges(key: string, onChange: () => void): Promise<() => void> {
    return this.permits.watchChanges('lock', key, onChange);
  }

  async forceRelease(key: string, fencingToken?: number): Promise<ForceReleaseOutcome> {
    const [evicted] = await this.permits.forceRelease('lock', key, fencingToken);
    if (evicted === undefined) return { released: false };
    return { released: true, holder: evicted.holder, fencingToken: evicted.fencingToken, evictedOwnerToken: evicted.ownerToken };
  }

  /** Every key or none, in one step of the engine. */
  async acquireSet({ keys, ownerToken, ttlMs, holder, lockDelayMs }: LockSetInput): Promise<LockSetAcquireOutcome> {
    const outcome = await this.permits.acquire({ kind: 'lock', keys, capacity: 1, weight: 1, ownerToken, ttlMs, holder, lockDelayMs });
    if (outcome.acquired) {
      return { acquired: true, fencingTokens: outcome.fencingTokens, expiresAtMs: outcome.expiresAtMs, decidedAt: outcome.decidedAt };
    }
    // (Keys of capacity 1: never a mismatch.)
    return {
      acquired: false,
      retryAfterMs: outcome.retryAfterMs,
      busyKey: outcome.reason === 'full' ? outcome.busyKey : (keys[0] as string),
    };
  }

  renewSet(keys: readonly string[], ownerToken: string, ttlMs: number): Promise<LockSetRenewOutcome> {
    return this.permits.renew('lock', keys, ownerToken, ttlMs);
  }

  releaseSet(keys: readonly string[], ownerToken: string): Promise<boolean> {
    return this.permits.release('lock', keys, ownerToken);
  }

  queue(key: string, limit: number): Promise<QueuedCaller[]> {
    return this.permits.queue('lock', key, limit);
  }

  list(query: ListQuery): Promise<ListPage> {
    return this.permits.listLocks(query);
  }
}

/**
 * PermitStore's words for calls on one key over the engine itself (a semaphore's or read/write
 * lock's key is one key of its capacity).
 */
export abstract class EnginePermitWords {
  abstract acquire(request: LeaseAcquire): Promise<LeaseAcquireOutcome>;
  abstract renew(kind: LeaseKind, keys: readonly string[], ownerToken: string, ttlMs: number): Promise<LeaseRenewOutcome>;
  abstract release(kind: LeaseKind, keys: readonly string[], ownerToken: string): Promise<boolean>;
  abstract requestRelease(kind: LeaseKind, key: string, fencingToken: number, request: ReleaseRequestInput): Promise<ReleaseRequest | null>;
  abstract forceRelease(kind: LeaseKind, key: string, fencingToken?: number): Promise<EvictedLease[]>;
  abstract queue(kind: LeaseKind, key: string, limit: number): Promise<QueuedCaller[]>;
  abstract watchChanges(kind: LeaseKind, key: string, onChange: () => void): Promise<() => void>;

  async acquirePermit(input: PermitAcquireInput): Promise<PermitAcquireOutcome> {
    const outcome = await this.acquire({ ...input, keys: [input.key] });
    if (!outcome.acquired) {
      return outcome.reason === 'full' ? { acquired: false, reason: 'full', retryAfterMs: outcome.retryAfterMs } : outcome;
    }
    const { fencingTokens, expiresAtMs, decidedAt } = outcome;
    return { acquired: true, fencingToken: fencingTokens[0] as number, expiresAtMs, decidedAt };
  }

  renewPermit(kind: PermitKind, key: string, ownerToken: string, ttlMs: number): Promise<RenewOutcome> {
    return renewedOne(this.renew(kind, [key], ownerToken, ttlMs));
  }

  requestPermitRelease(kind: PermitKind, key: string, fencingToken: number, request: ReleaseRequestInput): Promise<ReleaseRequest | null> {
    return this.requestRelease(kind, key, fencingToken, request);
  }

  releasePermit(kind: PermitKind, key: string, ownerToken: string): Promise<boolean> {
    return this.release(kind, [key], ownerToken);
  }

  watchPermitChanges(kind: PermitKind, key: string, onChange: () => void): Promise<() => void> {
    return this.watchChanges(kind, key, onChange);
  }

  permitQueue(kind: PermitKind, key: string, limit: number): Promise<QueuedCaller[]> {
    return this.queue(kind, key, limit);
  }

  forceReleasePermits(kind: PermitKind, key: string, fencingToken?: number): Promise<EvictedPermit[]> {
    return this.forceRelease(kind, key, fencingToken);
  }
}
