import { performance } from 'node:perf_hooks';
import { type DomainError, type DomainErrorCode, InvalidRequestError, isDomainError, NotOwnerError, NotSupportedError, WaitAbortedError } from './errors.js';
import { FreshnessGuard } from './freshness.js';
import type { LockLimits } from './limits.js';
import type { LockStore } from './lock-store.js';
import { newOwnerToken } from './lock-service.js';
import { measure } from './measure.js';
import { lockId, parseLockId } from './namespaces.js';
import type { IndexedPermitState, PermitKind, PermitListQuery, PermitState, PermitStore } from './permit-store.js';
import { NamespaceQuota } from './quota.js';
import type { WaitGate } from './wait-gate.js';
import { ChangeWatch, permitWatchSource } from './watch.js';

export type PermitOperation = 'acquire' | 'renew' | 'release' | 'inspect';

/** What the permit services report as they work (metrics listen here); every method is optional. */
export interface PermitObserver {
  operation?(kind: PermitKind, op: PermitOperation, result: 'ok' | DomainErrorCode | 'error', durationSeconds: number): void;
  /** A renew or release arrived after its lease was gone. */
  lostLease?(op: 'renew' | 'release'): void;
  waited?(seconds: number, granted: boolean): void;
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

export interface PermitGrant {
  readonly key: string;
  readonly ownerToken: string;
  readonly fencingToken: number;
  readonly ttlMs: number;
  readonly expiresAtMs: number;
  readonly holder: string | null;
  readonly decidedAt: number;
}

export interface PermitRenewal {
  readonly key: string;
  readonly fencingToken: number;
  readonly ttlMs: number;
  readonly expiresAtMs: number;
  readonly decidedAt: number;
}

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
  private readonly permits: PermitStore | undefined;
  private readonly quota: NamespaceQuota;
  private readonly freshness: FreshnessGuard;
  /** Blocking queries on this primitive's keys (one subscription per watched key on this instance). */
  private readonly changes: ChangeWatch<IndexedPermitState> | undefined;

  constructor(
    readonly kind: PermitKind,
    private readonly store: LockStore,
    private readonly limits: LockLimits,
    private readonly gate: WaitGate,
    private readonly refusals: PermitRefusals,
    private readonly observer: PermitObserver = {},
  ) {
    this.permits = store.permits;
    // A lease of this primitive is given back through its own store method, not the lock's release.
    const giveBack = { release: (id: string, ownerToken: string) => this.store$().releasePermit(kind, id, ownerToken) };
    this.quota = new NamespaceQuota({ ...bindSlots(store), ...giveBack }, limits.maxHeldLocksPerNamespace ?? 0);
    this.freshness = new FreshnessGuard(giveBack);
    this.changes = this.permits && new ChangeWatch(permitWatchSource(this.permits, kind));
  }

  async acquire(request: PermitRequest): Promise<PermitGrant> {
    return this.observe('acquire', async () => {
      this.checkTtl(request.ttlMs);
      const { waitMs } = request;
      this.checkWaitMs(waitMs);
      const store = this.store$();
      const id = lockId(request.namespace, request.key);
      const claim = { namespace: request.namespace, id, ownerToken: newOwnerToken(), ttlMs: request.ttlMs };
      const grant =
        waitMs === 0
          ? await this.quota.grantNow(claim, () => this.acquireOnce(store, request, id, claim.ownerToken, 0, undefined))
          : await this.quota.grantWaiting(claim, waitMs, () => this.acquireWaiting(store, request, id, claim.ownerToken));
      return {
        key: request.key,
        ownerToken: claim.ownerToken,
        fencingToken: grant.fencingToken,
        ttlMs: request.ttlMs,
        expiresAtMs: grant.expiresAtMs,
        holder: request.holder,
        decidedAt: grant.decidedAt,
      };
    });
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

  private async acquireWaiting(store: PermitStore, request: PermitRequest, id: string, ownerToken: string) {
    const leave = this.gate.enter(request.namespace);
    const started = performance.now();
    let granted = false;
    try {
      const outcome = await this.acquireOnce(store, request, id, ownerToken, request.waitMs, this.gate.waitSignal(request.signal));
      granted = true;
      // The caller left while the grant was on its way: nobody will use this lease, give it back.
      if (request.signal?.aborted) {
        await store.releasePermit(this.kind, id, ownerToken).catch(() => undefined);
        throw new WaitAbortedError();
      }
      await this.freshness.refuseIfLate({ id, ownerToken, ttlMs: request.ttlMs, decidedAt: outcome.decidedAt });
      return outcome;
    } finally {
      leave();
      this.observer.waited?.((performance.now() - started) / 1000, granted);
    }
  }

  async renew(namespace: string, key: string, ownerToken: string, ttlMs: number): Promise<PermitRenewal> {
    return this.observe('renew', async () => {
      this.checkTtl(ttlMs);
      const id = lockId(namespace, key);
      const decidedAt = performance.now();
      const outcome = await this.store$().renewPermit(this.kind, id, ownerToken, ttlMs);
      if (!outcome.renewed) {
        this.observer.lostLease?.('renew');
        throw new NotOwnerError(key);
      }
      await this.freshness.refuseIfLate({ id, ownerToken, ttlMs, decidedAt });
      await this.quota.extend(namespace, ownerToken, outcome.expiresAtMs);
      return { key, fencingToken: outcome.fencingToken, ttlMs, expiresAtMs: outcome.expiresAtMs, decidedAt };
    });
  }

  async release(namespace: string, key: string, ownerToken: string): Promise<void> {
    return this.observe('release', async () => {
      const released = await this.store$().releasePermit(this.kind, lockId(namespace, key), ownerToken);
      if (!released) {
        this.observer.lostLease?.('release');
        throw new NotOwnerError(key);
      }
      await this.quota.free(namespace, ownerToken);
    });
  }

  async inspect(namespace: string, key: string): Promise<PermitState | null> {
    return this.observe('inspect', () => this.store$().inspectPermits(this.kind, lockId(namespace, key)));
  }

  /**
   * A blocking query, as LockService.watch: the state and watch index, at once when the index differs
   * from `index` (or `index` is undefined, or waitMs is 0), otherwise as soon as it changes, otherwise
   * after `waitMs` with the unchanged state.
   */
  async watch(namespace: string, key: string, index: number | undefined, waitMs: number, signal?: AbortSignal): Promise<IndexedPermitState> {
    const id = lockId(namespace, key);
    const changes = this.changes;
    if (changes === undefined) return this.store$().inspectPermitsIndexed(this.kind, id);
    if (index === undefined || waitMs === 0) return this.observe('inspect', () => changes.current(id));
    this.checkWaitMs(waitMs);
    // As the store's waits: a shutdown ends it (the gate's signal).
    return changes.wait(id, index, waitMs, this.gate.waitSignal(signal));
  }

  /** An administrator's override: ends every live lease on the key. Returns what was evicted (for the audit log). */
  async forceRelease(namespace: string, key: string): Promise<Array<{ holder: string | null; fencingToken: number }>> {
    const evicted = await this.store$().forceReleasePermits(this.kind, lockId(namespace, key));
    await Promise.all(evicted.map((e) => this.quota.free(namespace, e.ownerToken)));
    return evicted.map(({ holder, fencingToken }) => ({ holder, fencingToken }));
  }

  /** One page of keys with live leases, in one namespace or all of them (as LockService.listHeld). */
  async listHeld(query: { namespace?: string; prefix: string; limit: number; cursor?: string }): Promise<{ entries: HeldPermitsView[]; nextCursor: string | null }> {
    if (query.namespace === undefined && query.prefix !== '') {
      throw new InvalidRequestError('prefix', 'needs namespace: a key prefix is matched inside one namespace');
    }
    const listQuery: PermitListQuery = {
      prefix: query.namespace === undefined ? '' : lockId(query.namespace, query.prefix),
      limit: query.limit,
      cursor: query.cursor,
    };
    const page = await this.store$().listPermits(this.kind, listQuery);
    const entries: HeldPermitsView[] = [];
    for (const { key: id, state } of page.entries) {
      const parsed = parseLockId(id);
      if (parsed !== null) entries.push({ ...parsed, state });
    }
    return { entries, nextCursor: page.nextCursor };
  }

  /** The late-grant check once more as the answer leaves the process (see LockService.confirmFresh). */
  async confirmFresh(namespace: string, lease: { key: string; ownerToken: string; ttlMs: number; decidedAt: number }): Promise<void> {
    await this.freshness.refuseIfLate({ ...lease, id: lockId(namespace, lease.key) });
  }

  private store$(): PermitStore {
    if (this.permits === undefined) throw new NotSupportedError(this.kind === 'semaphore' ? 'semaphores' : 'read/write locks', this.store.kind);
    return this.permits;
  }

  private checkWaitMs(waitMs: number): void {
    if (!Number.isInteger(waitMs) || waitMs < 0 || waitMs > this.limits.maxWaitMs) {
      throw new InvalidRequestError('waitMs', `must be an integer from 0 to ${this.limits.maxWaitMs}`);
    }
  }

  private checkTtl(ttlMs: number): void {
    const { minTtlMs, maxTtlMs } = this.limits;
    if (!Number.isInteger(ttlMs) || ttlMs < minTtlMs || ttlMs > maxTtlMs) {
      throw new InvalidRequestError('ttlMs', `must be an integer from ${minTtlMs} to ${maxTtlMs}`);
    }
  }

  private observe<T>(op: PermitOperation, run: () => Promise<T>): Promise<T> {
    return measure<T, 'ok' | DomainErrorCode | 'error'>(
      run,
      'ok',
      (err) => (isDomainError(err) ? err.code : 'error'),
      (result, seconds) => this.observer.operation?.(this.kind, op, result, seconds),
    );
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

