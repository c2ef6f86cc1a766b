import { performance } from 'node:perf_hooks';
import {
  IdempotencyKeyReusedError,
  InvalidRequestError,
  StoreUnavailableError,
  TooManyWaitersError,
  WaitAbortedError,
} from '../../domain/errors.js';
import { nextFencingToken } from '../../domain/fencing.js';
import { compareIdempotencyKeys } from '../../domain/idempotency.js';
import { type Clock, monotonicWallClock } from '../shared/clock.js';
import { ChangeListeners } from './change-listeners.js';
import { MemoryPermits } from './memory-permits.js';
import { lockSetsOf } from '../../domain/lock-store.js';
import type { AcquireInput, AcquireOutcome, IndexedLockState, LockState, LockStore, RenewOutcome } from '../../domain/lock-store.js';
import type { LockSetAcquireOutcome, LockSetInput, LockSetRenewOutcome, LockSetStore } from '../../domain/lock-store.js';
import type { ForceReleaseOutcome, HeldLock, ListPage, ListQuery, QueuedCaller, SlotOutcome } from '../../domain/lock-store.js';

interface Entry {
  /** null once released: the entry then only keeps the key's last fencing token until `retainUntilMs`. */
  ownerToken: string | null;
  holder: string | null;
  /** The idempotency key the lease was acquired with (null for none, and once released). */
  idempotencyKey: string | null;
  fencingToken: number;
  expiresAtMs: number;
  /** When this entry may be forgotten: lease end plus the fencing grace period. */
  retainUntilMs: number;
  /** Lock-delay of the live lease: how long the key stays unavailable after it EXPIRES (0: none). */
  lockDelayMs: number;
}

interface Waiter {
  readonly ownerToken: string;
  readonly ttlMs: number;
  readonly holder: string | null;
  readonly lockDelayMs: number;
  /** When it joined the queue (store clock, ms). */
  readonly since: number;
  /** Hands the lock to this waiter (called at most once, by settle). */
  grant(fencingToken: number, expiresAtMs: number): void;
  /** Ends the wait with an error (the store is closing). */
  fail(err: Error): void;
}

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
 * The embedded store: locks held in this process's memory. Zero setup, and every operation is atomic
 * because it runs synchronously on the one event loop. Locks are NOT shared between processes.
 * Fencing tokens stay increasing across restarts because they are floored at the wall clock.
 *
 * Every method is `async`, so a failure (a closed store) is a rejected promise, as it is for the Redis
 * store, never a synchronous throw that a caller's `.catch()` would miss.
 *
 * Waiting: each key has a FIFO queue. A release hands the lock straight to the queue's head (only that
 * waiter wakes); a lease that runs out is handed over by a timer set for its end.
 */
const PRINTABLE_ID = /^[\x21-\x7e]+$/;

export class MemoryStore implements LockStore {
  readonly kind = 'memory';
  readonly lockSets: LockSetStore = lockSetsOf(this);
  /** Change listeners by key (watch): called after each grant, release, force release and hand-over. */
  private readonly changeListeners = new ChangeListeners();
  private readonly entries = new Map<string, Entry>();
  private readonly queues = new Map<string, Waiter[]>();
  private readonly expiryTimers = new Map<string, NodeJS.Timeout>();
  /** Quota slots: namespace -> slot id -> slot end (Unix ms). */
  private readonly slots = new Map<string, Map<string, number>>();
  private readonly clock: Clock;
  private readonly sweepTimer: NodeJS.Timeout | undefined;
  private readonly maxWaitersPerKey: number;
  private closed = false;
  /** Semaphores and read/write locks, on the same clock and bounds. */
  readonly permits: MemoryPermits;

  constructor(private readonly options: MemoryStoreOptions) {
    this.clock = options.clock ?? monotonicWallClock;
    this.maxWaitersPerKey = options.maxWaitersPerKey ?? 1000;
    this.permits = new MemoryPermits({
      fenceGraceMs: options.fenceGraceMs,
      listeners: this.changeListeners,
      clock: this.clock,
      maxWaitersPerKey: this.maxWaitersPerKey,
    });
    const interval = options.sweepIntervalMs ?? 10_000;
    if (interval > 0) {
      this.sweepTimer = setInterval(() => this.sweep(), interval);
      // The sweep must never keep a process alive that is otherwise done.
      this.sweepTimer.unref();
    }
  }

  /** Number of keys with state (held or within their grace period); for tests and capacity checks. */
  get size(): number {
    return this.entries.size;
  }

  /** Whether any state (a lease, or a remembered fencing token) is kept for `key`. */
  has(key: string): boolean {
    return this.entries.has(key);
  }

  async acquire({
    key,
    ownerToken,
    ttlMs,
    holder: label,
    waitMs = 0,
    signal,
    idempotencyKey,
    lockDelayMs = 0,
  }: AcquireInput): Promise<AcquireOutcome> {
    this.assertOpen();
    // "" is no label, as in Redis (which stores none for it).
    const holder = label === '' ? null : label;
    // A caller that has already left takes nothing, not even a free lock (nobody would release it).
    signal?.throwIfAborted();
    const decidedAt = performance.now();
    const now = this.clock();
    this.settle(key, now);
    const live = this.liveEntry(key, now);
    const delayedUntil = this.delayedUntil(key, now);
    if (live === undefined && delayedUntil === 0) {
      const { fencingToken, expiresAtMs } = this.grant(key, ownerToken, ttlMs, holder, now, idempotencyKey ?? null, lockDelayMs);
      return { acquired: true, fencingToken, expiresAtMs, decidedAt };
    }
    if (live !== undefined && idempotencyKey !== undefined && live.ownerToken !== null) {
      const match = compareIdempotencyKeys(live.idempotencyKey, idempotencyKey);
      if (match === 'replay') {
        // A retry of the acquire that made this lease (its answer was lost): the same grant, nothing changed.
        const { fencingToken, expiresAtMs } = live;
        return { acquired: true, fencingToken, expiresAtMs, decidedAt, replayed: { ownerToken: live.ownerToken, holder: live.holder } };
      }
      if (match === 'reused') throw new IdempotencyKeyReusedError();
    }
    const retryAfterMs = Math.max(1, Math.ceil((live?.expiresAtMs ?? delayedUntil) - now));
    if (waitMs <= 0) return { acquired: false, retryAfterMs };
    const queue = this.queues.get(key) ?? [];
    if (queue.length >= this.maxWaitersPerKey) throw new TooManyWaitersError('key', retryAfterMs);

    return new Promise<AcquireOutcome>((resolve, reject) => {
      const leave = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        const q = this.queues.get(key);
        const at = q?.indexOf(waiter) ?? -1;
        if (q && at >= 0) q.splice(at, 1);
        if (q?.length === 0) this.queues.delete(key);
      };
      const waiter: Waiter = {
        ownerToken,
        ttlMs,
        holder,
        lockDelayMs,
        since: now,
        grant: (fencingToken, expiresAtMs) => {
          leave();
          resolve({ acquired: true, fencingToken, expiresAtMs, decidedAt: performance.now() });
        },
        fail: (err) => {
          leave();
          reject(err);
        },
      };
      const timer = setTimeout(() => {
        leave();
        const current = this.liveEntry(key, this.clock());
        resolve({ acquired: false, retryAfterMs: current ? Math.max(1, Math.ceil(current.expiresAtMs - this.clock())) : 1 });
      }, waitMs);
      const onAbort = () => {
        leave();
        const reason: unknown = signal?.reason;
        reject(reason instanceof Error ? reason : new WaitAbortedError());
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      queue.push(waiter);
      this.queues.set(key, queue);
      this.scheduleHandOver(key);
    });
  }

  async renew(key: string, ownerToken: string, ttlMs: number): Promise<RenewOutcome> {
    this.assertOpen();
    const now = this.clock();
    const entry = this.liveEntry(key, now);
    if (entry?.ownerToken !== ownerToken) return { renewed: false };
    entry.expiresAtMs = Math.floor(now) + ttlMs;
    entry.retainUntilMs = entry.expiresAtMs + this.options.fenceGraceMs;
    this.scheduleHandOver(key);
    return { renewed: true, fencingToken: entry.fencingToken, expiresAtMs: entry.expiresAtMs };
  }

  async release(key: string, ownerToken: string): Promise<boolean> {
    this.assertOpen();
    const now = this.clock();
    const entry = this.liveEntry(key, now);
    if (entry?.ownerToken !== ownerToken) return false;
    this.endLease(key, entry, now);
    return true;
  }

  /**
   * Ends a live lease now, for its owner's release and an administrator's force release alike: no
   * owner, and the last fencing token kept for the grace period so the next grant is numbered above it.
   */
  private endLease(key: string, entry: Entry, now: number): void {
    entry.ownerToken = null;
    entry.holder = null;
    entry.idempotencyKey = null;
    entry.expiresAtMs = Math.floor(now);
    entry.retainUntilMs = entry.expiresAtMs + this.options.fenceGraceMs;
    this.changed(key);
    this.settle(key, now);
  }

  async inspect(key: string): Promise<LockState | null> {
    this.assertOpen();
    const now = this.clock();
    const entry = this.liveEntry(key, now);
    if (entry === undefined) return null;
    return {
      holder: entry.holder,
      fencingToken: entry.fencingToken,
      expiresAtMs: entry.expiresAtMs,
      ttlRemainingMs: Math.max(0, Math.ceil(entry.expiresAtMs - now)),
      waiters: this.queues.get(key)?.length ?? 0,
    };
  }

  async inspectIndexed(key: string): Promise<IndexedLockState> {
    const state = await this.inspect(key);
    const now = this.clock();
    const delayedUntil = this.delayedUntil(key, now);
    return {
      state,
      lastFencingToken: this.entries.get(key)?.fencingToken ?? 0,
      ...(delayedUntil > 0 ? { lockDelayUntilMs: delayedUntil } : {}),
    };
  }

  async watchChanges(key: string, onChange: () => void): Promise<() => void> {
    this.assertOpen();
    return this.changeListeners.watch(key, onChange);
  }

  /** Tells the watchers of `key` that it changed (after the current step, never inside it). */
  private changed(key: string): void {
    this.changeListeners.changed(key);
  }

  /** When an expired lease's lock-delay on `key` ends, or 0 when none runs now. */
  private delayedUntil(key: string, now: number): number {
    const entry = this.entries.get(key);
    if (entry?.ownerToken == null || entry.lockDelayMs <= 0 || entry.expiresAtMs > now) return 0;
    const end = entry.expiresAtMs + entry.lockDelayMs;
    return end > now ? end : 0;
  }

  /** Whether `key` can be granted now: no live lease, no lock-delay, nobody queued. */
  private busyUntil(key: string, now: number): number {
    const live = this.liveEntry(key, now);
    if (live !== undefined) return live.expiresAtMs;
    const delayed = this.delayedUntil(key, now);
    if (delayed > 0) return delayed;
    // Callers queued for a free key are about to get it: a set does not jump their queue.
    return this.queues.has(key) ? now + 1 : 0;
  }

  async acquireSet({ keys, ownerToken, ttlMs, holder: label, lockDelayMs = 0 }: LockSetInput): Promise<LockSetAcquireOutcome> {
    this.assertOpen();
    const holder = label === '' ? null : label;
    const decidedAt = performance.now();
    const now = this.clock();
    for (const key of keys) this.settle(key, now);
    let busyKey: string | undefined;
    let freeAt = 0;
    for (const key of keys) {
      const until = this.busyUntil(key, now);
      if (until > freeAt) {
        freeAt = until;
        busyKey ??= key;
      }
    }
    if (busyKey !== undefined) return { acquired: false, retryAfterMs: Math.max(1, Math.ceil(freeAt - now)), busyKey };
    const fencingTokens = keys.map((key) => this.grant(key, ownerToken, ttlMs, holder, now, null, lockDelayMs).fencingToken);
    return { acquired: true, fencingTokens, expiresAtMs: Math.floor(now) + ttlMs, decidedAt };
  }

  async renewSet(keys: readonly string[], ownerToken: string, ttlMs: number): Promise<LockSetRenewOutcome> {
    this.assertOpen();
    const now = this.clock();
    const entries = keys.map((key) => this.liveEntry(key, now));
    if (!entries.every((entry) => entry?.ownerToken === ownerToken)) return { renewed: false };
    const expiresAtMs = Math.floor(now) + ttlMs;
    for (const entry of entries as Entry[]) {
      entry.expiresAtMs = expiresAtMs;
      entry.retainUntilMs = expiresAtMs + this.options.fenceGraceMs;
    }
    for (const key of keys) this.scheduleHandOver(key);
    return { renewed: true, fencingTokens: (entries as Entry[]).map((e) => e.fencingToken), expiresAtMs };
  }

  async releaseSet(keys: readonly string[], ownerToken: string): Promise<boolean> {
    this.assertOpen();
    const now = this.clock();
    let released = false;
    for (const key of keys) {
      const entry = this.liveEntry(key, now);
      if (entry?.ownerToken !== ownerToken) continue;
      this.endLease(key, entry, now);
      released = true;
    }
    return released;
  }

  async queue(key: string, limit: number): Promise<QueuedCaller[]> {
    this.assertOpen();
    return (this.queues.get(key) ?? []).slice(0, limit).map((w, i) => ({ position: i + 1, holder: w.holder, waitingSinceMs: w.since }));
  }

  async forceRelease(key: string, fencingToken?: number): Promise<ForceReleaseOutcome> {
    this.assertOpen();
    const now = this.clock();
    const entry = this.liveEntry(key, now);
    if (entry?.ownerToken == null) return { released: false };
    if (fencingToken !== undefined && entry.fencingToken !== fencingToken) return { released: false };
    const evicted = { holder: entry.holder, fencingToken: entry.fencingToken, evictedOwnerToken: entry.ownerToken };
    this.endLease(key, entry, now);
    return { released: true, ...evicted };
  }

  /**
   * Walks the map in id order from the cursor (the last id of the previous page). Sorting on every page
   * costs O(n log n), acceptable for the embedded store's sizes, and makes pages exact: no lock is shown
   * twice and a page never holds more than `limit` locks.
   */
  async list({ prefix, limit, cursor }: ListQuery): Promise<ListPage> {
    this.assertOpen();
    // A cursor is the last id of a page listed with the same prefix: printable and starting with it.
    // Anything else did not come from here, and answers the same 400 as on Redis.
    if (cursor !== undefined && !(PRINTABLE_ID.test(cursor) && cursor.startsWith(prefix))) {
      return Promise.reject(new InvalidRequestError('cursor', 'must be a nextCursor returned by this route'));
    }
    const now = this.clock();
    const ids: string[] = [];
    for (const [id, entry] of this.entries) {
      if (!id.startsWith(prefix) || (cursor !== undefined && id <= cursor)) continue;
      if (entry.ownerToken != null && entry.expiresAtMs > now) ids.push(id);
    }
    ids.sort();
    const page = ids.slice(0, limit);
    const locks: HeldLock[] = page.map((id) => {
      const entry = this.entries.get(id) as Entry;
      return {
        key: id,
        holder: entry.holder,
        fencingToken: entry.fencingToken,
        expiresAtMs: entry.expiresAtMs,
        ttlRemainingMs: Math.max(0, Math.ceil(entry.expiresAtMs - now)),
        waiters: this.queues.get(id)?.length ?? 0,
      };
    });
    const last = page[page.length - 1];
    return { locks, nextCursor: ids.length > limit && last !== undefined ? last : null };
  }

  async reserveSlot(namespace: string, slotId: string, ttlMs: number, maxSlots: number): Promise<SlotOutcome> {
    this.assertOpen();
    const now = this.clock();
    const slots = this.slots.get(namespace) ?? new Map<string, number>();
    let earliestEndMs = Infinity;
    for (const [id, endMs] of slots) {
      if (endMs <= now) slots.delete(id);
      else earliestEndMs = Math.min(earliestEndMs, endMs);
    }
    if (slots.size >= maxSlots && !slots.has(slotId)) {
      return { reserved: false, retryAfterMs: Math.max(1, Math.ceil(earliestEndMs - now)) };
    }
    slots.set(slotId, Math.max(slots.get(slotId) ?? 0, Math.floor(now) + ttlMs));
    this.slots.set(namespace, slots);
    return { reserved: true };
  }

  async extendSlot(namespace: string, slotId: string, expiresAtMs: number): Promise<void> {
    this.assertOpen();
    const slots = this.slots.get(namespace);
    const endMs = slots?.get(slotId);
    if (slots && endMs !== undefined && expiresAtMs > endMs) slots.set(slotId, expiresAtMs);
  }

  async freeSlot(namespace: string, slotId: string): Promise<void> {
    this.assertOpen();
    const slots = this.slots.get(namespace);
    slots?.delete(slotId);
    if (slots?.size === 0) this.slots.delete(namespace);
  }

  async ping(): Promise<void> {
    this.assertOpen();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.permits.close();
    // Waiting callers get their answer now, as the Redis store gives it, not when their wait runs out.
    for (const queue of [...this.queues.values()]) {
      for (const waiter of [...queue]) waiter.fail(new StoreUnavailableError('the embedded store is closing'));
    }
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    for (const timer of this.expiryTimers.values()) clearTimeout(timer);
    this.expiryTimers.clear();
  }

  /** Forgets keys whose lease and grace period are both over. */
  sweep(): void {
    this.permits.sweep();
    const now = this.clock();
    for (const [key, entry] of this.entries) {
      if (entry.retainUntilMs <= now && !this.queues.has(key)) this.entries.delete(key);
    }
    for (const [namespace, slots] of this.slots) {
      for (const [id, endMs] of slots) if (endMs <= now) slots.delete(id);
      if (slots.size === 0) this.slots.delete(namespace);
    }
  }

  private grant(
    key: string,
    ownerToken: string,
    ttlMs: number,
    holder: string | null,
    now: number,
    idempotencyKey: string | null,
    lockDelayMs: number,
  ): Entry {
    const previous = this.entries.get(key);
    const expiresAtMs = Math.floor(now) + ttlMs;
    const entry: Entry = {
      ownerToken,
      holder,
      idempotencyKey,
      fencingToken: nextFencingToken(previous?.fencingToken ?? 0, now),
      expiresAtMs,
      retainUntilMs: expiresAtMs + this.options.fenceGraceMs,
      lockDelayMs,
    };
    this.entries.set(key, entry);
    this.changed(key);
    return entry;
  }

  /** If the lock is free and someone is queued, hands it to the head of the queue (and only to it). */
  private settle(key: string, now: number): void {
    if (this.liveEntry(key, now) !== undefined || this.delayedUntil(key, now) > 0) return;
    const head = this.queues.get(key)?.[0];
    if (head === undefined) return;
    const entry = this.grant(key, head.ownerToken, head.ttlMs, head.holder, now, null, head.lockDelayMs);
    head.grant(entry.fencingToken, entry.expiresAtMs);
    this.scheduleHandOver(key);
  }

  /** While callers are queued, wakes up when the current lease ends to hand the lock on. */
  private scheduleHandOver(key: string): void {
    clearTimeout(this.expiryTimers.get(key));
    this.expiryTimers.delete(key);
    if (!this.queues.has(key) || this.closed) return;
    const now = this.clock();
    // Wake at the lease's end, or at the end of the lock-delay that followed it.
    const wakeAtMs = this.liveEntry(key, now)?.expiresAtMs ?? this.delayedUntil(key, now);
    if (wakeAtMs === 0) {
      // Free already: the lease ended after the caller found it live (a busy process can take that
      // long between two reads of the clock). Hand it on now; no timer would.
      this.settle(key, now);
      return;
    }
    const timer = setTimeout(
      () => {
        this.expiryTimers.delete(key);
        this.settle(key, this.clock());
        this.scheduleHandOver(key);
      },
      Math.max(0, wakeAtMs - now) + 1,
    );
    this.expiryTimers.set(key, timer);
  }

  private liveEntry(key: string, now: number): Entry | undefined {
    const entry = this.entries.get(key);
    return entry?.ownerToken != null && entry.expiresAtMs > now ? entry : undefined;
  }

  private assertOpen(): void {
    if (this.closed) throw new StoreUnavailableError('the embedded store is closed');
  }
}
