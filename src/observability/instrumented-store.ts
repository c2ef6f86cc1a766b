import { performance } from 'node:perf_hooks';
import { isDomainError, OverloadedError } from '../domain/errors.js';
import type {
  AcquireInput,
  AcquireOutcome,
  ForceReleaseOutcome,
  IndexedLockState,
  ListPage,
  ListQuery,
  LockSetStore,
  LockState,
  LockStore,
  ReleaseRequest,
  ReleaseRequestInput,
  RenewOutcome,
  QuotaSlotOutcome,
} from '../domain/lock-store.js';
import { measure } from '../domain/measure.js';
import type { LeaseAcquire, LeaseAcquireOutcome, LeaseKind, LeaseStore, LeaseStoreHost } from '../domain/lease-store.js';
import type { LeaseTracker } from './lease-tracker.js';
import type {
  PermitAcquireInput,
  PermitAcquireOutcome,
  PermitKind,
  PermitListQuery,
  PermitStore,
  QueuedCaller,
} from '../domain/permit-store.js';

export type StoreOperation =
  | 'acquire'
  | 'renew'
  | 'release'
  | 'inspect'
  | 'ping'
  | 'force_release'
  | 'release_request'
  | 'list'
  | 'slot'
  | 'permit_acquire'
  | 'permit_renew'
  | 'permit_release'
  | 'permit_inspect'
  | 'permit_force_release'
  | 'permit_release_request'
  | 'permit_list';
export type StoreCallResult = 'ok' | 'unavailable' | 'error';

/** Where an instrumented store reports each call; implemented by the metrics module. */
export interface StoreCallSink {
  /**
   * One store call finished: answered, could not answer (down, timed out), or failed otherwise (a bug).
   * `waiting`: an acquire with waitMs, whose call lasts as long as its wait in the queue (not store latency).
   */
  storeCall(op: StoreOperation, result: StoreCallResult, durationSeconds: number, waiting: boolean): void;
  /** How long a lease granted here was held, observed when it is released here. */
  leaseHeld(heldSeconds: number): void;
  /** The store refused a call before sending it: its queue to Redis was full for too long (503 overloaded). */
  storeQueueShed(): void;
}

/**
 * A store decorator that times every call, tracks the store's health from the answers, and tells the
 * lease tracker about grants, renewals and releases. It changes no answer and no error. The domain
 * calls `leases` (its one port); the LockStore words are timed alike, under the same operations.
 */
export class InstrumentedStore implements LockStore, LeaseStoreHost {
  readonly kind: LockStore['kind'];
  readonly lockSets: LockSetStore;
  readonly permits: PermitStore;
  readonly leases: LeaseStore;
  readonly quotaInside: boolean;
  readonly quotaInsideFrom?: number;

  constructor(
    private readonly inner: LockStore & LeaseStoreHost,
    private readonly sink: StoreCallSink,
    private readonly tracker: LeaseTracker,
  ) {
    this.kind = inner.kind;
    const sets = inner.lockSets;
    // A set is timed and tracked as one lease (one owner token), under the lock operations' labels.
    this.lockSets = {
      acquireSet: async (input) => {
        const outcome = await this.timed('acquire', () => sets.acquireSet(input));
        if (outcome.acquired) this.tracker.granted(input.ownerToken, input.ttlMs);
        return outcome;
      },
      renewSet: async (keys, ownerToken, ttlMs) => {
        const outcome = await this.timed('renew', () => sets.renewSet(keys, ownerToken, ttlMs));
        if (outcome.renewed) this.tracker.renewed(ownerToken, ttlMs);
        return outcome;
      },
      releaseSet: async (keys, ownerToken) => {
        const released = await this.timed('release', () => sets.releaseSet(keys, ownerToken));
        if (released) this.releasedByOwner(ownerToken);
        return released;
      },
    };
    this.quotaInside = inner.quotaInside ?? false;
    if (inner.quotaInsideFrom !== undefined) this.quotaInsideFrom = inner.quotaInsideFrom;
    this.permits = this.instrumentPermits(inner.permits);
    this.leases = this.instrumentLeases(inner.leases);
  }

  /**
   * The domain's port, timed under the operations the LockStore and PermitStore words are (a lock's or
   * lock set's `acquire`, `renew`, ...; a semaphore's or read/write lock's `permit_acquire`, ...), and
   * its leases tracked alike (a lock set as one lease, one owner token).
   */
  private instrumentLeases(inner: LeaseStore): LeaseStore {
    const op = (kind: LeaseKind, lock: StoreOperation, permit: StoreOperation): StoreOperation => (kind === 'lock' ? lock : permit);
    return {
      kind: inner.kind,
      quotaInside: inner.quotaInside,
      quotaInsideFrom: inner.quotaInsideFrom,
      acquire: (request) => this.acquireLease(inner, request),
      renew: async (kind, keys, ownerToken, ttlMs) => {
        const outcome = await this.timed(op(kind, 'renew', 'permit_renew'), () => inner.renew(kind, keys, ownerToken, ttlMs));
        if (outcome.renewed) this.tracker.renewed(ownerToken, ttlMs);
        return outcome;
      },
      release: async (kind, keys, ownerToken) => {
        const released = await this.timed(op(kind, 'release', 'permit_release'), () => inner.release(kind, keys, ownerToken));
        if (released) this.releasedByOwner(ownerToken);
        return released;
      },
      forceRelease: async (kind, key, fencingToken) => {
        const evicted = await this.timed(op(kind, 'force_release', 'permit_force_release'), () =>
          inner.forceRelease(kind, key, fencingToken),
        );
        for (const e of evicted) this.tracker.released(e.ownerToken);
        return evicted;
      },
      requestRelease: (kind, key, fencingToken, request) =>
        this.timed(op(kind, 'release_request', 'permit_release_request'), () => inner.requestRelease(kind, key, fencingToken, request)),
      inspect: (kind, key) => this.timed(op(kind, 'inspect', 'permit_inspect'), () => inner.inspect(kind, key)),
      inspectIndexed: (kind, key) => this.timed(op(kind, 'inspect', 'permit_inspect'), () => inner.inspectIndexed(kind, key)),
      queue: (kind, key, limit) => this.timed(op(kind, 'inspect', 'permit_inspect'), () => inner.queue(kind, key, limit)),
      list: (kind, query) => this.timed(op(kind, 'list', 'permit_list'), () => inner.list(kind, query)),
      watchChanges: (kind, key, onChange) => inner.watchChanges(kind, key, onChange),
      reserveQuotaSlot: (namespace, quotaSlotId, ttlMs, maxQuotaSlots) =>
        this.timed('slot', () => inner.reserveQuotaSlot(namespace, quotaSlotId, ttlMs, maxQuotaSlots)),
      extendQuotaSlot: (namespace, quotaSlotId, expiresAtMs, maxQuotaSlots) =>
        this.timed('slot', () => inner.extendQuotaSlot(namespace, quotaSlotId, expiresAtMs, maxQuotaSlots)),
      freeQuotaSlot: (namespace, quotaSlotId, maxQuotaSlots) =>
        this.timed('slot', () => inner.freeQuotaSlot(namespace, quotaSlotId, maxQuotaSlots)),
    };
  }

  /** The port's acquire, timed inline as the lock words' acquire is (the hot path: no closures). */
  private async acquireLease(inner: LeaseStore, request: LeaseAcquire): Promise<LeaseAcquireOutcome> {
    const op: StoreOperation = request.kind === 'lock' ? 'acquire' : 'permit_acquire';
    // A waiting acquire's duration is mostly the wait, not store latency (see acquire). A lock set never waits.
    const waiting = Boolean(request.waitMs) && request.keys.length === 1;
    const started = performance.now();
    let outcome: LeaseAcquireOutcome;
    try {
      outcome = await inner.acquire(request);
    } catch (err) {
      this.sink.storeCall(op, this.failure(err), (performance.now() - started) / 1000, waiting);
      throw err;
    }
    this.sink.storeCall(op, 'ok', (performance.now() - started) / 1000, waiting);
    // A replay is the earlier lease, already tracked under its own owner token.
    if (outcome.acquired && outcome.replayed === undefined) this.tracker.granted(request.ownerToken, request.ttlMs);
    return outcome;
  }

  /** The same for semaphores and read/write locks: timed, and their leases tracked like locks'. */
  private instrumentPermits(inner: PermitStore): PermitStore {
    return {
      acquirePermit: async (input: PermitAcquireInput): Promise<PermitAcquireOutcome> => {
        const outcome = await this.timed('permit_acquire', () => inner.acquirePermit(input), Boolean(input.waitMs));
        if (outcome.acquired) this.tracker.granted(input.ownerToken, input.ttlMs);
        return outcome;
      },
      renewPermit: async (kind: PermitKind, key: string, ownerToken: string, ttlMs: number) => {
        const outcome = await this.timed('permit_renew', () => inner.renewPermit(kind, key, ownerToken, ttlMs));
        if (outcome.renewed) this.tracker.renewed(ownerToken, ttlMs);
        return outcome;
      },
      releasePermit: async (kind: PermitKind, key: string, ownerToken: string) => {
        const released = await this.timed('permit_release', () => inner.releasePermit(kind, key, ownerToken));
        if (released) this.releasedByOwner(ownerToken);
        return released;
      },
      inspectPermits: (kind: PermitKind, key: string) => this.timed('permit_inspect', () => inner.inspectPermits(kind, key)),
      permitQueue: (kind: PermitKind, key: string, limit: number) =>
        this.timed('permit_inspect', () => inner.permitQueue(kind, key, limit)),
      inspectPermitsIndexed: (kind: PermitKind, key: string) => this.timed('permit_inspect', () => inner.inspectPermitsIndexed(kind, key)),
      watchPermitChanges: (kind: PermitKind, key: string, onChange: () => void) => inner.watchPermitChanges(kind, key, onChange),
      forceReleasePermits: async (kind: PermitKind, key: string, fencingToken?: number) => {
        const evicted = await this.timed('permit_force_release', () => inner.forceReleasePermits(kind, key, fencingToken));
        for (const e of evicted) this.tracker.released(e.ownerToken);
        return evicted;
      },
      requestPermitRelease: (kind: PermitKind, key: string, fencingToken: number, request: ReleaseRequestInput) =>
        this.timed('permit_release_request', () => inner.requestPermitRelease(kind, key, fencingToken, request)),
      listPermits: (kind: PermitKind, query: PermitListQuery) => this.timed('permit_list', () => inner.listPermits(kind, query)),
    };
  }

  // acquire, renew and release (every lock call) time themselves inline rather than through timed():
  // the same figures without a promise and three closures more per call.
  async acquire(input: AcquireInput): Promise<AcquireOutcome> {
    // A waiting acquire's duration is mostly the wait (reported as keyholder_lock_wait_seconds), not
    // store latency: it is reported as waiting, and the latency metrics leave it out.
    const waiting = Boolean(input.waitMs);
    const started = performance.now();
    let outcome: AcquireOutcome;
    try {
      outcome = await this.inner.acquire(input);
    } catch (err) {
      this.sink.storeCall('acquire', this.failure(err), (performance.now() - started) / 1000, waiting);
      throw err;
    }
    this.sink.storeCall('acquire', 'ok', (performance.now() - started) / 1000, waiting);
    // A replay is the earlier lease, already tracked under its own owner token.
    if (outcome.acquired && outcome.replayed === undefined) this.tracker.granted(input.ownerToken, input.ttlMs);
    return outcome;
  }

  async renew(key: string, ownerToken: string, ttlMs: number): Promise<RenewOutcome> {
    const started = performance.now();
    let outcome: RenewOutcome;
    try {
      outcome = await this.inner.renew(key, ownerToken, ttlMs);
    } catch (err) {
      this.sink.storeCall('renew', this.failure(err), (performance.now() - started) / 1000, false);
      throw err;
    }
    this.sink.storeCall('renew', 'ok', (performance.now() - started) / 1000, false);
    if (outcome.renewed) this.tracker.renewed(ownerToken, ttlMs);
    return outcome;
  }

  async release(key: string, ownerToken: string): Promise<boolean> {
    const started = performance.now();
    let released: boolean;
    try {
      released = await this.inner.release(key, ownerToken);
    } catch (err) {
      this.sink.storeCall('release', this.failure(err), (performance.now() - started) / 1000, false);
      throw err;
    }
    this.sink.storeCall('release', 'ok', (performance.now() - started) / 1000, false);
    if (released) this.releasedByOwner(ownerToken);
    return released;
  }

  inspect(key: string): Promise<LockState | null> {
    return this.timed('inspect', () => this.inner.inspect(key));
  }

  queue(key: string, limit: number): Promise<QueuedCaller[]> {
    return this.timed('inspect', () => this.inner.queue(key, limit));
  }

  inspectIndexed(key: string): Promise<IndexedLockState> {
    return this.timed('inspect', () => this.inner.inspectIndexed(key));
  }

  watchChanges(key: string, onChange: () => void): Promise<() => void> {
    return this.inner.watchChanges(key, onChange);
  }

  ping(): Promise<void> {
    return this.timed('ping', () => this.inner.ping());
  }

  requestRelease(key: string, fencingToken: number, request: ReleaseRequestInput): Promise<ReleaseRequest | null> {
    return this.timed('release_request', () => this.inner.requestRelease(key, fencingToken, request));
  }

  async forceRelease(key: string, fencingToken?: number): Promise<ForceReleaseOutcome> {
    const outcome = await this.timed('force_release', () => this.inner.forceRelease(key, fencingToken));
    if (outcome.released) this.tracker.released(outcome.evictedOwnerToken);
    return outcome;
  }

  list(query: ListQuery): Promise<ListPage> {
    return this.timed('list', () => this.inner.list(query));
  }

  reserveQuotaSlot(namespace: string, quotaSlotId: string, ttlMs: number, maxQuotaSlots: number): Promise<QuotaSlotOutcome> {
    return this.timed('slot', () => this.inner.reserveQuotaSlot(namespace, quotaSlotId, ttlMs, maxQuotaSlots));
  }

  extendQuotaSlot(namespace: string, quotaSlotId: string, expiresAtMs: number, maxQuotaSlots: number): Promise<void> {
    return this.timed('slot', () => this.inner.extendQuotaSlot(namespace, quotaSlotId, expiresAtMs, maxQuotaSlots));
  }

  freeQuotaSlot(namespace: string, quotaSlotId: string, maxQuotaSlots: number): Promise<void> {
    return this.timed('slot', () => this.inner.freeQuotaSlot(namespace, quotaSlotId, maxQuotaSlots));
  }

  /** A lease its owner released: no longer tracked, and its hold time observed (every release path). */
  private releasedByOwner(ownerToken: string): void {
    const heldSeconds = this.tracker.released(ownerToken);
    if (heldSeconds !== undefined) this.sink.leaseHeld(heldSeconds);
  }

  async close(): Promise<void> {
    this.tracker.clear();
    await this.inner.close();
  }

  private timed<T>(op: StoreOperation, run: () => Promise<T>, waiting = false): Promise<T> {
    return measure<T, StoreCallResult>(
      run,
      'ok',
      (err) => this.failure(err),
      (result, seconds) => this.sink.storeCall(op, result, seconds, waiting),
    );
  }

  /** How a failed call counts: any domain answer but "unavailable" (a full wait queue, say) is the store working as it should. */
  private failure(err: unknown): StoreCallResult {
    if (err instanceof OverloadedError && err.budget === 'store_queue') this.sink.storeQueueShed();
    return isDomainError(err) ? (err.code === 'store_unavailable' ? 'unavailable' : 'ok') : 'error';
  }
}
