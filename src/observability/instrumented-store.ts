import { performance } from 'node:perf_hooks';
import { isDomainError, OverloadedError } from '../domain/errors.js';
import { measure } from '../domain/measure.js';
import type { LeaseAcquire, LeaseAcquireOutcome, LeaseKind, LeaseStore, Store } from '../domain/lease-store.js';
import type { LeaseTracker } from './lease-tracker.js';
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
  /** The store refused a call before sending it: its queue to Redis was full for too long (503 overloaded). */
  storeQueueShed(): void;
}

/**
 * A store decorator that times every call of its lease port and its health check, tracks the store's
 * health from the answers, and tells the lease tracker about grants, renewals and releases. It changes
 * no answer and no error.
 */
export class InstrumentedStore implements Store {
  readonly kind: Store['kind'];
  readonly clock?: () => number;
  readonly leases: LeaseStore;

  constructor(
    private readonly inner: Store,
    private readonly sink: StoreCallSink,
    private readonly tracker: LeaseTracker,
  ) {
    this.kind = inner.kind;
    if (inner.clock !== undefined) this.clock = inner.clock;
    this.leases = this.instrumentLeases(inner.leases);
  }

  /**
   * The domain's port, timed under one operation per call and kind (a lock's or lock set's `acquire`,
   * `renew`, ...; a semaphore's or read/write lock's `permit_acquire`, ...), and its leases tracked (a
   * lock set as one lease per key under its one owner token: each key can be renewed or released alone,
   * through the lock routes).
   */
  private instrumentLeases(inner: LeaseStore): LeaseStore {
    const op = (kind: LeaseKind, lock: StoreOperation, permit: StoreOperation): StoreOperation => (kind === 'lock' ? lock : permit);
    return {
      kind: inner.kind,
      quotaInside: inner.quotaInside,
      quotaInsideFrom: inner.quotaInsideFrom,
      acquire: (request) => this.acquireLease(inner, request),
      renew: async (kind, ids, ownerToken, ttlMs) => {
        const outcome = await this.timed(op(kind, 'renew', 'permit_renew'), () => inner.renew(kind, ids, ownerToken, ttlMs));
        if (outcome.renewed) this.tracker.renewed(ownerToken, ids, ttlMs);
        return outcome;
      },
      release: (kind, ids, ownerToken) => this.releaseLease(inner, kind, ids, ownerToken),
      forceRelease: async (kind, id, fencingToken) => {
        const evicted = await this.timed(op(kind, 'force_release', 'permit_force_release'), () =>
          inner.forceRelease(kind, id, fencingToken),
        );
        for (const e of evicted) this.tracker.evicted(e.ownerToken, id);
        return evicted;
      },
      requestRelease: (kind, id, fencingToken, request) =>
        this.timed(op(kind, 'release_request', 'permit_release_request'), () => inner.requestRelease(kind, id, fencingToken, request)),
      inspect: (kind, id) => this.timed(op(kind, 'inspect', 'permit_inspect'), () => inner.inspect(kind, id)),
      inspectIndexed: (kind, id) => this.timed(op(kind, 'inspect', 'permit_inspect'), () => inner.inspectIndexed(kind, id)),
      queue: (kind, id, limit) => this.timed(op(kind, 'inspect', 'permit_inspect'), () => inner.queue(kind, id, limit)),
      list: (kind, query) => this.timed(op(kind, 'list', 'permit_list'), () => inner.list(kind, query)),
      watchChanges: (kind, id, onChange) => inner.watchChanges(kind, id, onChange),
      reserveQuotaSlot: (namespace, quotaSlotId, ttlMs, maxQuotaSlots) =>
        this.timed('slot', () => inner.reserveQuotaSlot(namespace, quotaSlotId, ttlMs, maxQuotaSlots)),
      extendQuotaSlot: (namespace, quotaSlotId, expiresAtMs, maxQuotaSlots) =>
        this.timed('slot', () => inner.extendQuotaSlot(namespace, quotaSlotId, expiresAtMs, maxQuotaSlots)),
      freeQuotaSlot: (namespace, quotaSlotId, maxQuotaSlots) =>
        this.timed('slot', () => inner.freeQuotaSlot(namespace, quotaSlotId, maxQuotaSlots)),
      retireQuotaSlot: (namespace, quotaSlotId, untilMs, maxQuotaSlots) =>
        this.timed('slot', () => inner.retireQuotaSlot(namespace, quotaSlotId, untilMs, maxQuotaSlots)),
    };
  }

  /** The port's acquire, timed inline rather than through timed() (the hot path: no promise and closures more per call). */
  private async acquireLease(inner: LeaseStore, request: LeaseAcquire): Promise<LeaseAcquireOutcome> {
    const op: StoreOperation = request.kind === 'lock' ? 'acquire' : 'permit_acquire';
    // A waiting acquire's duration is mostly the wait (reported as keyholder_lock_wait_seconds), not store
    // latency: it is reported as waiting, and the latency metrics leave it out. A lock set never waits.
    const waiting = Boolean(request.waitMs) && request.ids.length === 1;
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
    if (outcome.acquired && outcome.replayed === undefined) {
      if (request.ids.length === 1) this.tracker.granted(request.ownerToken, request.ttlMs);
      else this.tracker.grantedSet(request.ownerToken, request.ids, request.ttlMs);
    }
    return outcome;
  }

  /** The port's release, timed inline as acquire is (the other half of every lock pair). */
  private async releaseLease(inner: LeaseStore, kind: LeaseKind, ids: readonly string[], ownerToken: string): Promise<boolean> {
    const op: StoreOperation = kind === 'lock' ? 'release' : 'permit_release';
    const started = performance.now();
    let released: boolean;
    try {
      released = await inner.release(kind, ids, ownerToken);
    } catch (err) {
      this.sink.storeCall(op, this.failure(err), (performance.now() - started) / 1000, false);
      throw err;
    }
    this.sink.storeCall(op, 'ok', (performance.now() - started) / 1000, false);
    // No longer tracked, and its hold time observed (the tracker's released event); for a lock set, only
    // the keys named: a key released alone through the lock route leaves the set's others held.
    if (released) this.tracker.released(ownerToken, ids);
    return released;
  }

  ping(): Promise<void> {
    return this.timed('ping', () => this.inner.ping());
  }

  async close(): Promise<void> {
    this.tracker.clear();
    await this.inner.close();
  }

  private timed<T>(op: StoreOperation, run: () => Promise<T>): Promise<T> {
    return measure<T, StoreCallResult>(
      run,
      'ok',
      (err) => this.failure(err),
      (result, seconds) => this.sink.storeCall(op, result, seconds, false),
    );
  }

  /** How a failed call counts: any domain answer but "unavailable" (a full wait queue, say) is the store working as it should. */
  private failure(err: unknown): StoreCallResult {
    if (err instanceof OverloadedError && err.budget === 'store_queue') this.sink.storeQueueShed();
    return isDomainError(err) ? (err.code === 'store_unavailable' ? 'unavailable' : 'ok') : 'error';
  }
}
