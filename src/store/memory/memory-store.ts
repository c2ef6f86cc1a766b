import { StoreUnavailableError } from '../../domain/errors.js';
import { type Clock, monotonicWallClock, nextFencingToken } from '../clock.js';
import type {
  AcquireInput,
  AcquireOutcome,
  ForceReleaseOutcome,
  HeldLock,
  ListPage,
  ListQuery,
  LockState,
  LockStore,
  RenewOutcome,
  SlotOutcome,
} from '../store.js';

interface Entry {
  /** null once released: the entry then only keeps the key's last fencing token until `retainUntilMs`. */
  ownerToken: string | null;
  holder: string | null;
  fencingToken: number;
  expiresAtMs: number;
  /** When this entry may be forgotten: lease end plus the fencing grace period. */
  retainUntilMs: number;
}

export interface MemoryStoreOptions {
  /** How long a key's last fencing token is kept after its lease ends. */
  readonly fenceGraceMs: number;
  readonly clock?: Clock;
  /** How often forgotten keys are swept out; 0 disables the timer (tests sweep by hand). */
  readonly sweepIntervalMs?: number;
}

/**
 * The embedded store: locks held in this process's memory. Zero setup, and every operation is atomic
 * because it runs synchronously on the one event loop. Locks are NOT shared between processes.
 * Fencing tokens stay increasing across restarts because they are floored at the wall clock.
 */
export class MemoryStore implements LockStore {
  readonly kind = 'memory';
  private readonly entries = new Map<string, Entry>();
  /** Quota slots: namespace -> slot id -> slot end (Unix ms). */
  private readonly slots = new Map<string, Map<string, number>>();
  private readonly clock: Clock;
  private readonly sweepTimer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly options: MemoryStoreOptions) {
    this.clock = options.clock ?? monotonicWallClock;
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

  acquire({ key, ownerToken, ttlMs, holder }: AcquireInput): Promise<AcquireOutcome> {
    this.assertOpen();
    const now = this.clock();
    const entry = this.entries.get(key);
    if (entry?.ownerToken != null && entry.expiresAtMs > now) {
      return Promise.resolve({ acquired: false, retryAfterMs: Math.ceil(entry.expiresAtMs - now) });
    }
    const fencingToken = nextFencingToken(entry?.fencingToken ?? 0, now);
    const expiresAtMs = Math.floor(now) + ttlMs;
    this.entries.set(key, {
      ownerToken,
      holder,
      fencingToken,
      expiresAtMs,
      retainUntilMs: expiresAtMs + this.options.fenceGraceMs,
    });
    return Promise.resolve({ acquired: true, fencingToken, expiresAtMs });
  }

  renew(key: string, ownerToken: string, ttlMs: number): Promise<RenewOutcome> {
    this.assertOpen();
    const now = this.clock();
    const entry = this.liveEntry(key, now);
    if (entry?.ownerToken !== ownerToken) return Promise.resolve({ renewed: false });
    entry.expiresAtMs = Math.floor(now) + ttlMs;
    entry.retainUntilMs = entry.expiresAtMs + this.options.fenceGraceMs;
    return Promise.resolve({ renewed: true, fencingToken: entry.fencingToken, expiresAtMs: entry.expiresAtMs });
  }

  release(key: string, ownerToken: string): Promise<boolean> {
    this.assertOpen();
    const now = this.clock();
    const entry = this.liveEntry(key, now);
    if (entry?.ownerToken !== ownerToken) return Promise.resolve(false);
    entry.ownerToken = null;
    entry.holder = null;
    entry.expiresAtMs = Math.floor(now);
    entry.retainUntilMs = entry.expiresAtMs + this.options.fenceGraceMs;
    return Promise.resolve(true);
  }

  inspect(key: string): Promise<LockState | null> {
    this.assertOpen();
    const now = this.clock();
    const entry = this.liveEntry(key, now);
    if (entry === undefined) return Promise.resolve(null);
    return Promise.resolve({
      holder: entry.holder,
      fencingToken: entry.fencingToken,
      expiresAtMs: entry.expiresAtMs,
      ttlRemainingMs: Math.max(0, Math.ceil(entry.expiresAtMs - now)),
    });
  }

  forceRelease(key: string): Promise<ForceReleaseOutcome> {
    this.assertOpen();
    const now = this.clock();
    const entry = this.liveEntry(key, now);
    if (entry?.ownerToken == null) return Promise.resolve({ released: false });
    const evicted = { holder: entry.holder, fencingToken: entry.fencingToken, evictedOwnerToken: entry.ownerToken };
    // Same end state as an owner's release: no owner, last fencing token kept for the grace period.
    entry.ownerToken = null;
    entry.holder = null;
    entry.expiresAtMs = Math.floor(now);
    entry.retainUntilMs = entry.expiresAtMs + this.options.fenceGraceMs;
    return Promise.resolve({ released: true, ...evicted });
  }

  /**
   * Walks the map in id order from the cursor (the last id of the previous page). Sorting on every page
   * costs O(n log n), acceptable for the embedded store's sizes, and makes pages exact: no lock is shown
   * twice and a page never holds more than `limit` locks.
   */
  list({ prefix, limit, cursor }: ListQuery): Promise<ListPage> {
    this.assertOpen();
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
      };
    });
    const last = page[page.length - 1];
    return Promise.resolve({ locks, nextCursor: ids.length > limit && last !== undefined ? last : null });
  }

  reserveSlot(namespace: string, slotId: string, ttlMs: number, maxSlots: number): Promise<SlotOutcome> {
    this.assertOpen();
    const now = this.clock();
    const slots = this.slots.get(namespace) ?? new Map<string, number>();
    let earliestEndMs = Infinity;
    for (const [id, endMs] of slots) {
      if (endMs <= now) slots.delete(id);
      else earliestEndMs = Math.min(earliestEndMs, endMs);
    }
    if (slots.size >= maxSlots && !slots.has(slotId)) {
      return Promise.resolve({ reserved: false, retryAfterMs: Math.max(1, Math.ceil(earliestEndMs - now)) });
    }
    slots.set(slotId, Math.max(slots.get(slotId) ?? 0, Math.floor(now) + ttlMs));
    this.slots.set(namespace, slots);
    return Promise.resolve({ reserved: true });
  }

  extendSlot(namespace: string, slotId: string, expiresAtMs: number): Promise<void> {
    this.assertOpen();
    const slots = this.slots.get(namespace);
    const endMs = slots?.get(slotId);
    if (slots && endMs !== undefined && expiresAtMs > endMs) slots.set(slotId, expiresAtMs);
    return Promise.resolve();
  }

  freeSlot(namespace: string, slotId: string): Promise<void> {
    this.assertOpen();
    const slots = this.slots.get(namespace);
    slots?.delete(slotId);
    if (slots?.size === 0) this.slots.delete(namespace);
    return Promise.resolve();
  }

  ping(): Promise<void> {
    this.assertOpen();
    return Promise.resolve();
  }

  close(): Promise<void> {
    this.closed = true;
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    return Promise.resolve();
  }

  /** Forgets keys whose lease and grace period are both over. */
  sweep(): void {
    const now = this.clock();
    for (const [key, entry] of this.entries) {
      if (entry.retainUntilMs <= now) this.entries.delete(key);
    }
    for (const [namespace, slots] of this.slots) {
      for (const [id, endMs] of slots) if (endMs <= now) slots.delete(id);
      if (slots.size === 0) this.slots.delete(namespace);
    }
  }

  private liveEntry(key: string, now: number): Entry | undefined {
    const entry = this.entries.get(key);
    return entry?.ownerToken != null && entry.expiresAtMs > now ? entry : undefined;
  }

  private assertOpen(): void {
    if (this.closed) throw new StoreUnavailableError('the embedded store is closed');
  }
}
