import { StoreUnavailableError } from '../../domain/errors.js';
import { type Clock, monotonicWallClock } from '../shared/clock.js';
import { ChangeListeners } from './change-listeners.js';
import { MemoryLeases } from './memory-leases.js';
import type { LeaseStore, Store } from '../../domain/lease-store.js';
import type { QuotaSlotOutcome } from '../../domain/lock-values.js';
import { leaseStoreOver } from '../shared/lease-port.js';

export interface MemoryStoreOptions {
  /** How long a key's last fencing token is kept after its lease ends. */
  readonly fenceGraceMs: number;
  readonly clock?: Clock;
  /** How often forgotten keys are swept out; 0 disables the timer (tests sweep by hand). */
  readonly sweepIntervalMs?: number;
  /** Most callers queued on one key at once. */
  readonly maxWaitersPerKey?: number;
}

/**
 * The embedded store: leases held in this process's memory. Zero setup, and every operation is atomic
 * because it runs synchronously on the one event loop. Leases are NOT shared between processes.
 * Fencing tokens stay increasing across restarts because they are floored at the wall clock.
 *
 * Every method is `async`, so a failure (a closed store) is a rejected promise, as it is for the Redis
 * store, never a synchronous throw that a caller's `.catch()` would miss.
 *
 * One engine (memory-leases.ts) serves every primitive: a lock is its capacity-1 case and a lock set
 * its several-keys case; `leases` is that engine as the domain's port. Waiting: each key has
 * a FIFO queue; a release hands the key straight to the queue's head (only that waiter wakes), a lease
 * that runs out is handed over by a timer set for its end.
 */
export class MemoryStore implements Store {
  readonly kind = 'memory';
  /** Quota slots: namespace -> slot id -> slot end (Unix ms). */
  private readonly quotaSlots = new Map<string, Map<string, number>>();
  /** Retired quota slots (retireQuotaSlot): namespace -> slot id -> until when (Unix ms). */
  private readonly retiredSlots = new Map<string, Map<string, number>>();
  /** Every lease's times (Store.clock). */
  readonly clock: Clock;
  private readonly sweepTimer: NodeJS.Timeout | undefined;
  private closed = false;
  /** Change notices by key (watch), told after each grant, release, force release and hand-over. */
  private readonly changeListeners = new ChangeListeners();
  /** Every lease: locks, lock sets, semaphores and read/write locks, on one clock and bounds. */
  readonly engine: MemoryLeases;
  /** The domain's one port: the engine, with this store's kind and quota slots. */
  readonly leases: LeaseStore;

  constructor(options: MemoryStoreOptions) {
    this.clock = options.clock ?? monotonicWallClock;
    this.engine = new MemoryLeases({
      fenceGraceMs: options.fenceGraceMs,
      listeners: this.changeListeners,
      clock: this.clock,
      maxWaitersPerKey: options.maxWaitersPerKey ?? 1000,
    });
    this.leases = leaseStoreOver(this, this.engine);
    const interval = options.sweepIntervalMs ?? 10_000;
    if (interval > 0) {
      this.sweepTimer = setInterval(() => this.sweep(), interval);
      // The sweep must never keep a process alive that is otherwise done.
      this.sweepTimer.unref();
    }
  }

  /** Number of locks with state (held or within their grace period); for tests and capacity checks. */
  get size(): number {
    return this.engine.count('lock');
  }

  /** Whether any state (a lease, or a remembered fencing token) is kept for the lock `id`. */
  has(id: string): boolean {
    return this.engine.has('lock', id);
  }

  async reserveQuotaSlot(namespace: string, quotaSlotId: string, ttlMs: number, maxQuotaSlots: number): Promise<QuotaSlotOutcome> {
    this.assertOpen();
    const now = this.clock();
    const slots = this.quotaSlots.get(namespace) ?? new Map<string, number>();
    let earliestEndMs = Infinity;
    for (const [id, endMs] of slots) {
      if (endMs <= now) slots.delete(id);
      else earliestEndMs = Math.min(earliestEndMs, endMs);
    }
    if (slots.size >= maxQuotaSlots && !slots.has(quotaSlotId)) {
      return { reserved: false, retryAfterMs: Math.max(1, Math.ceil(earliestEndMs - now)) };
    }
    slots.set(quotaSlotId, Math.max(slots.get(quotaSlotId) ?? 0, Math.floor(now) + ttlMs));
    this.quotaSlots.set(namespace, slots);
    // Taken anew under a retired id: it counts, and its lease's renewals carry it.
    this.retiredSlots.get(namespace)?.delete(quotaSlotId);
    return { reserved: true };
  }

  async extendQuotaSlot(namespace: string, quotaSlotId: string, expiresAtMs: number): Promise<void> {
    this.assertOpen();
    // Retired: its lease is gone, and this renewal was decided before it went (QuotaSlotStore.retireQuotaSlot).
    if (this.retiredSlots.get(namespace)?.has(quotaSlotId) === true) return;
    const slots = this.quotaSlots.get(namespace) ?? new Map<string, number>();
    const endMs = slots.get(quotaSlotId);
    // A missing slot is counted again (QuotaSlotStore.extendQuotaSlot says why).
    if (endMs === undefined || expiresAtMs > endMs) slots.set(quotaSlotId, expiresAtMs);
    this.quotaSlots.set(namespace, slots);
  }

  async freeQuotaSlot(namespace: string, quotaSlotId: string): Promise<void> {
    this.assertOpen();
    const slots = this.quotaSlots.get(namespace);
    slots?.delete(quotaSlotId);
    if (slots?.size === 0) this.quotaSlots.delete(namespace);
  }

  async retireQuotaSlot(namespace: string, quotaSlotId: string, untilMs: number): Promise<void> {
    await this.freeQuotaSlot(namespace, quotaSlotId);
    if (untilMs <= this.clock()) return;
    const retired = this.retiredSlots.get(namespace) ?? new Map<string, number>();
    retired.set(quotaSlotId, Math.max(retired.get(quotaSlotId) ?? 0, untilMs));
    this.retiredSlots.set(namespace, retired);
  }

  async ping(): Promise<void> {
    this.assertOpen();
  }

  async close(): Promise<void> {
    this.closed = true;
    // Waiting callers get their answer now, as the Redis store gives it, not when their wait runs out.
    this.engine.close();
    if (this.sweepTimer) clearInterval(this.sweepTimer);
  }

  /** Forgets keys whose lease and grace period are both over, and ended quota slots. */
  sweep(): void {
    this.engine.sweep();
    const now = this.clock();
    for (const slotsOf of [this.quotaSlots, this.retiredSlots]) {
      for (const [namespace, slots] of slotsOf) {
        for (const [id, endMs] of slots) if (endMs <= now) slots.delete(id);
        if (slots.size === 0) slotsOf.delete(namespace);
      }
    }
  }

  private assertOpen(): void {
    if (this.closed) throw new StoreUnavailableError('the embedded store is closed');
  }
}
