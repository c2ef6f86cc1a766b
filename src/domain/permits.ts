import { type DomainError, HolderChangedError } from './errors.js';
import { FreshnessGuard } from './freshness.js';
import {
  type HeldQuery,
  inNamespaces,
  type LeaseGrant,
  type LeaseObserver,
  type LeaseRenewal,
  LeaseRules,
  observeOperation,
  type OperationResult,
} from './lease-rules.js';
import type { LockLimits } from './limits.js';
import type { LockStore } from './lock-store.js';
import { newOwnerToken } from './lock-service.js';
import { lockId } from './namespaces.js';
import {
  type IndexedPermitState,
  MAX_QUEUE_SHOWN,
  type PermitKind,
  type PermitListQuery,
  type PermitState,
  type PermitStore,
  type QueuedCaller,
} from './permit-store.js';
import { NamespaceQuota } from './quota.js';
import type { WaitGate } from './wait-gate.js';
import { ChangeWatch, permitWatchSource } from './watch.js';

export type PermitOperation = 'acquire' | 'renew' | 'release' | 'inspect';

/** What the permit services report as they work (metrics listen here); every method is optional. */
export interface PermitObserver extends LeaseObserver {
  /** `waitedSeconds`: the part of an acquire's duration spent waiting in the key's queue (0 otherwise). */
  operation?(kind: PermitKind, op: PermitOperation, result: OperationResult, durationSeconds: number, waitedSeconds: number): void;
}

/** One acquire as the permit core needs it (the semaphore and rwlock services fill it in). */
export interface PermitRequest {
  readonly namespace: string;
  readonly key: string;
  readonly ttlMs: number;
  readonly holder: string | null;
  readonly weight: number;
  readonly capacity: number;
  readonly waitMs: number;
  readonly signal?: AbortSignal;
}

/** How a primitive words a refusal: the room is taken, or the caller's capacity is not the live one. */
export interface PermitRefusals {
  /** `weight`: what the refused caller asked for (a read/write lock tells the modes apart by it). */
  full(key: string, retryAfterMs: number, weight: number): DomainError;
  mismatch(key: string, requestedCapacity: number, liveCapacity: number, retryAfterMs: number): DomainError;
}

export type PermitGrant = LeaseGrant;

export type PermitRenewal = LeaseRenewal;

export interface HeldPermitsView {
  readonly namespace: string;
  readonly key: string;
  readonly state: PermitState;
}

/**
 * The rules every multi-holder primitive shares (see permit-store.ts): TTL and wait bounds, owner
 * tokens, the namespace quota (one slot per lease, as for locks), the instance's wait caps and the
 * late-grant guard. One instance per primitive; the semaphore and read/write lock services add their
 * own vocabulary on top. Knows nothing of HTTP or Redis.
 */
export class PermitCore {
  private readonly permits: PermitStore;
  private readonly quota: NamespaceQuota;
  private readonly freshness: FreshnessGuard;
  /** TTL and wait bounds, waiting grants, renew and release (shared with the lock service). */
  private readonly rules: LeaseRules;
  /** Blocking queries on this primitive's keys (one subscription per watched key on this instance). */
  private readonly changes: ChangeWatch<IndexedPermitState>;

  constructor(
    readonly kind: PermitKind,
    private readonly store: LockStore,
    limits: LockLimits,
    gate: WaitGate,
    private readonly refusals: PermitRefusals,
    private readonly observer: PermitObserver = {},
  ) {
    this.permits = store.permits;
    // A lease of this primitive is given back through its own store method, not the lock's release.
    const giveBack = { release: (id: string, ownerToken: string) => this.store$().releasePermit(kind, id, ownerToken) };
    this.quota = new NamespaceQuota({ ...bindSlots(store), ...giveBack }, limits.maxHeldLocksPerNamespace ?? 0);
    this.freshness = new FreshnessGuard(giveBack);
    const { quota, freshness } = this;
    this.rules = new LeaseRules({ limits, gate, quota, freshness, observer, giveBack: giveBack.release });
    this.changes = new ChangeWatch(permitWatchSource(this.permits, kind));
  }

  async acquire(request: PermitRequest): Promise<PermitGrant> {
    const waited = { seconds: 0 };
    return this.observe(
      'acquire',
      async () => {
        this.rules.checkTtl(request.ttlMs);
        const { waitMs } = request;
        this.rules.checkWaitMs(waitMs);
        const store = this.store$();
        const id = lockId(request.namespace, request.key);
        const claim = { namespace: request.namespace, id, ownerToken: newOwnerToken(), ttlMs: request.ttlMs };
        const grant =
          waitMs === 0
            ? await this.quota.grantNow(claim, () => this.acquireOnce(store, request, id, claim.ownerToken, 0, undefined))
            : await this.quota.grantWaiting(claim, waitMs, () => this.acquireWaiting(store, request, id, claim.ownerToken, waited));
        return {
          key: request.key,
          ownerToken: claim.ownerToken,
          fencingToken: grant.fencingToken,
          ttlMs: request.ttlMs,
          expiresAtMs: grant.expiresAtMs,
          holder: request.holder,
          decidedAt: grant.decidedAt,
        };
      },
      waited,
    );
  }

  private async acquireOnce(
    store: PermitStore,
    request: PermitRequest,
    id: string,
    ownerToken: string,
    waitMs: number,
    signal: AbortSignal | undefined,
  ): Promise<{ fencingToken: number; expiresAtMs: number; decidedAt: number }> {
    const { ttlMs, holder, weight, capacity, key } = request;
    const outcome = await store.acquirePermit({ kind: this.kind, key: id, ownerToken, ttlMs, holder, weight, capacity, waitMs, signal });
    if (!outcome.acquired) {
      throw outcome.reason === 'mismatch'
        ? this.refusals.mismatch(key, capacity, outcome.capacity, outcome.retryAfterMs)
        : this.refusals.full(key, outcome.retryAfterMs, weight);
    }
    if (waitMs === 0) await this.freshness.refuseIfLate({ id, ownerToken, ttlMs, decidedAt: outcome.decidedAt });
    return outcome;
  }

  private acquireWaiting(store: PermitStore, request: PermitRequest, id: string, ownerToken: string, waited: { seconds: number }) {
    return this.rules.grantWaiting({
      waited,
      namespace: request.namespace,
      id,
      ttlMs: request.ttlMs,
      callerSignal: request.signal,
      acquire: (signal) => this.acquireOnce(store, request, id, ownerToken, request.waitMs, signal),
      ownerOf: () => ownerToken,
    });
  }

  async renew(namespace: string, key: string, ownerToken: string, ttlMs: number): Promise<PermitRenewal> {
    return this.observe('renew', () =>
      this.rules.renew(namespace, key, ownerToken, ttlMs, (id) => this.store$().renewPermit(this.kind, id, ownerToken, ttlMs)),
    );
  }

  async release(namespace: string, key: string, ownerToken: string): Promise<void> {
    return this.observe('release', () =>
      this.rules.release(namespace, key, ownerToken, (id) => this.store$().releasePermit(this.kind, id, ownerToken)),
    );
  }

  async inspect(namespace: string, key: string): Promise<PermitState | null> {
    return this.observe('inspect', () => this.store$().inspectPermits(this.kind, lockId(namespace, key)));
  }

  /**
   * A blocking query, as LockService.watch: the state and watch index, at once when the index differs
   * from `index` (or `index` is undefined, or waitMs is 0), otherwise as soon as it changes, otherwise
   * after `waitMs` with the unchanged state. `onChange`: see ChangeWatch.wait.
   */
  async watch(
    namespace: string,
    key: string,
    index: number | undefined,
    waitMs: number,
    signal?: AbortSignal,
    onChange?: (view: IndexedPermitState) => void,
  ): Promise<IndexedPermitState> {
    const id = lockId(namespace, key);
    const changes = this.changes;
    return this.rules.watch(changes, id, { namespace, index, waitMs, signal, onChange }, () =>
      this.observe('inspect', () => changes.current(id)),
    );
  }

  /** The first callers queued for the key, head first (at most MAX_QUEUE_SHOWN), with the weight each asks for. */
  queue(namespace: string, key: string): Promise<QueuedCaller[]> {
    return this.observe('inspect', () => this.store$().permitQueue(this.kind, lockId(namespace, key), MAX_QUEUE_SHOWN));
  }

  /**
   * An administrator's override: ends every live lease on the key, or with `fencingToken` only that
   * one. Returns what was evicted (for the audit log). When the named lease is no longer live but
   * others are: HolderChangedError (nothing was changed).
   */
  async forceRelease(
    namespace: string,
    key: string,
    fencingToken?: number,
  ): Promise<Array<{ holder: string | null; fencingToken: number }>> {
    const id = lockId(namespace, key);
    const evicted = await this.store$().forceReleasePermits(this.kind, id, fencingToken);
    if (evicted.length === 0 && fencingToken !== undefined) {
      const current = await this.store$().inspectPermits(this.kind, id);
      const first = current?.holders[0];
      if (first !== undefined) throw new HolderChangedError(key, fencingToken, first);
    }
    await Promise.all(evicted.map((e) => this.quota.free(namespace, e.ownerToken)));
    return evicted.map(({ holder, fencingToken }) => ({ holder, fencingToken }));
  }

  /** One page of keys with live leases, in one namespace or all of them (as LockService.listHeld). */
  async listHeld(
    query: HeldQuery & { limit: number; cursor?: string },
  ): Promise<{ entries: HeldPermitsView[]; nextCursor: string | null }> {
    const listQuery: PermitListQuery = { prefix: this.rules.listPrefix(query), limit: query.limit, cursor: query.cursor };
    const page = await this.store$().listPermits(this.kind, listQuery);
    const entries = inNamespaces(page.entries, (parsed, { state }): HeldPermitsView => ({ ...parsed, state }));
    return { entries, nextCursor: page.nextCursor };
  }

  /** The late-grant check once more as the answer leaves the process (see LockService.confirmFresh). */
  async confirmFresh(namespace: string, lease: { key: string; ownerToken: string; ttlMs: number; decidedAt: number }): Promise<void> {
    await this.freshness.refuseIfLate({ ...lease, id: lockId(namespace, lease.key) });
  }

  private store$(): PermitStore {
    return this.permits;
  }

  private observe<T>(op: PermitOperation, run: () => Promise<T>, waited?: { readonly seconds: number }): Promise<T> {
    return observeOperation(run, (result, seconds) => this.observer.operation?.(this.kind, op, result, seconds, waited?.seconds ?? 0));
  }
}

/** The quota slot methods of a store, bound so they can be passed on apart from it. */
function bindSlots(store: LockStore): Pick<LockStore, 'reserveSlot' | 'extendSlot' | 'freeSlot'> {
  return {
    reserveSlot: (...args) => store.reserveSlot(...args),
    extendSlot: (...args) => store.extendSlot(...args),
    freeSlot: (...args) => store.freeSlot(...args),
  };
}
