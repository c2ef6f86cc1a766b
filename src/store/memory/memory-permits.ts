import { performance } from 'node:perf_hooks';
import { InvalidRequestError, StoreUnavailableError, TooManyWaitersError, WaitAbortedError } from '../../domain/errors.js';
import { nextFencingToken } from '../../domain/fencing.js';
import {
  MAX_HOLDERS_SHOWN,
  type EvictedPermit,
  type IndexedPermitState,
  type PermitAcquireInput,
  type PermitAcquireOutcome,
  type PermitKind,
} from '../../domain/permit-store.js';
import type { PermitListPage, PermitListQuery, PermitState, PermitStore, QueuedCaller } from '../../domain/permit-store.js';
import type { ChangeListeners } from './change-listeners.js';
import type { Clock } from '../shared/clock.js';

interface Lease {
  readonly ownerToken: string;
  readonly holder: string | null;
  readonly weight: number;
  readonly fencingToken: number;
  expiresAtMs: number;
}

interface Waiter {
  readonly ownerToken: string;
  readonly ttlMs: number;
  readonly holder: string | null;
  readonly weight: number;
  /** When it joined the queue (store clock, ms). */
  readonly since: number;
  grant(fencingToken: number, expiresAtMs: number): void;
  fail(err: Error): void;
}

/** One key's state: its capacity, live leases, FIFO queue and last fencing token. */
interface Pool {
  /** Its key in the pools map (poolId): where its changes are announced. */
  readonly id: string;
  capacity: number;
  lastToken: number;
  readonly leases: Map<string, Lease>;
  readonly queue: Waiter[];
  /** When the pool may be forgotten (its last lease's end plus the fencing grace period). */
  retainUntilMs: number;
  /** Changes so far, for the watch index (permitIndex); ended leases count once dropped. */
  changes: number;
  timer?: NodeJS.Timeout;
}

export interface MemoryPermitsOptions {
  readonly fenceGraceMs: number;
  /** Where the pools' changes are announced (keys: poolId). */
  readonly listeners: ChangeListeners;
  readonly clock: Clock;
  readonly maxWaitersPerKey: number;
}

const PRINTABLE_ID = /^[\x21-\x7e]+$/;

/**
 * The embedded store's semaphores and read/write locks (see permit-store.ts), the same rules as the
 * Redis scripts (permit-*.lua) in TypeScript. Atomic because every method runs synchronously on the one
 * event loop; a lease that runs out with callers queued is handed on by a timer set for its end.
 */
export class MemoryPermits implements PermitStore {
  private readonly pools = new Map<string, Pool>();
  private closed = false;

  constructor(private readonly options: MemoryPermitsOptions) {}

  async acquirePermit(input: PermitAcquireInput): Promise<PermitAcquireOutcome> {
    this.assertOpen();
    const { kind, key, ownerToken, ttlMs, weight, capacity, waitMs = 0, signal } = input;
    const holder = input.holder === '' ? null : input.holder;
    signal?.throwIfAborted();
    const decidedAt = performance.now();
    const now = this.options.clock();
    const id = poolId(kind, key);
    const pool = this.pools.get(id) ?? this.newPool(id, capacity);
    this.settle(pool, now);
    if (pool.leases.size > 0 && pool.capacity !== capacity) {
      return { acquired: false, reason: 'mismatch', capacity: pool.capacity, retryAfterMs: untilLast(pool, now) };
    }
    if (pool.queue.length === 0 && used(pool) + weight <= capacity) {
      pool.capacity = capacity;
      const lease = this.grant(pool, ownerToken, ttlMs, holder, weight, now);
      return { acquired: true, fencingToken: lease.fencingToken, expiresAtMs: lease.expiresAtMs, decidedAt };
    }
    const retryAfterMs = untilFirst(pool, now);
    if (waitMs <= 0) return { acquired: false, reason: 'full', retryAfterMs };
    if (pool.queue.length >= this.options.maxWaitersPerKey) throw new TooManyWaitersError('key', retryAfterMs);

    return new Promise<PermitAcquireOutcome>((resolve, reject) => {
      /** `handOn`: a waiter leaving from the head without a grant may unblock those behind it (readers behind a writer who gave up). */
      const leave = (handOn: boolean) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        const at = pool.queue.indexOf(waiter);
        if (at >= 0) pool.queue.splice(at, 1);
        if (handOn && at === 0) this.settle(pool, this.options.clock());
      };
      const waiter: Waiter = {
        ownerToken,
        ttlMs,
        holder,
        weight,
        since: now,
        grant: (fencingToken, expiresAtMs) => {
          leave(false);
          resolve({ acquired: true, fencingToken, expiresAtMs, decidedAt: performance.now() });
        },
        fail: (err) => {
          leave(false);
          reject(err);
        },
      };
      const timer = setTimeout(() => {
        leave(true);
        resolve({ acquired: false, reason: 'full', retryAfterMs: untilFirst(pool, this.options.clock()) });
      }, waitMs);
      const onAbort = () => {
        leave(true);
        const reason: unknown = signal?.reason;
        reject(reason instanceof Error ? reason : new WaitAbortedError());
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      pool.queue.push(waiter);
      this.scheduleHandOver(pool);
    });
  }

  async renewPermit(kind: PermitKind, key: string, ownerToken: string, ttlMs: number) {
    this.assertOpen();
    const now = this.options.clock();
    const pool = this.pools.get(poolId(kind, key));
    const lease = pool?.leases.get(ownerToken);
    if (pool === undefined || lease === undefined || lease.expiresAtMs <= now) return { renewed: false as const };
    lease.expiresAtMs = Math.floor(now) + ttlMs;
    pool.retainUntilMs = Math.max(pool.retainUntilMs, lease.expiresAtMs + this.options.fenceGraceMs);
    this.scheduleHandOver(pool);
    return { renewed: true as const, fencingToken: lease.fencingToken, expiresAtMs: lease.expiresAtMs };
  }

  async releasePermit(kind: PermitKind, key: string, ownerToken: string): Promise<boolean> {
    this.assertOpen();
    const now = this.options.clock();
    const pool = this.pools.get(poolId(kind, key));
    const lease = pool?.leases.get(ownerToken);
    if (pool === undefined || lease === undefined || lease.expiresAtMs <= now) return false;
    pool.leases.delete(ownerToken);
    this.changed(pool, now);
    this.settle(pool, now);
    return true;
  }

  async inspectPermits(kind: PermitKind, key: string): Promise<PermitState | null> {
    this.assertOpen();
    const pool = this.pools.get(poolId(kind, key));
    return pool === undefined ? null : stateOf(pool, this.options.clock());
  }

  async inspectPermitsIndexed(kind: PermitKind, key: string): Promise<IndexedPermitState> {
    this.assertOpen();
    const pool = this.pools.get(poolId(kind, key));
    if (pool === undefined) return { state: null, index: 0 };
    const now = this.options.clock();
    return { state: stateOf(pool, now), index: permitIndex(pool, now) };
  }

  async watchPermitChanges(kind: PermitKind, key: string, onChange: () => void): Promise<() => void> {
    this.assertOpen();
    return this.options.listeners.watch(poolId(kind, key), onChange);
  }

  async permitQueue(kind: PermitKind, key: string, limit: number): Promise<QueuedCaller[]> {
    this.assertOpen();
    const pool = this.pools.get(poolId(kind, key));
    return (pool?.queue ?? [])
      .slice(0, limit)
      .map((w, i) => ({ position: i + 1, holder: w.holder, waitingSinceMs: w.since, weight: w.weight }));
  }

  async forceReleasePermits(kind: PermitKind, key: string, fencingToken?: number): Promise<EvictedPermit[]> {
    this.assertOpen();
    const now = this.options.clock();
    const pool = this.pools.get(poolId(kind, key));
    if (pool === undefined) return [];
    this.prune(pool, now);
    const evicted = liveLeases(pool, now)
      .filter((lease) => fencingToken === undefined || lease.fencingToken === fencingToken)
      .map(({ holder, fencingToken: token, ownerToken }) => ({ holder, fencingToken: token, ownerToken }));
    for (const { ownerToken } of evicted) pool.leases.delete(ownerToken);
    if (evicted.length > 0) this.changed(pool, now);
    this.settle(pool, now);
    return evicted;
  }

  async listPermits(kind: PermitKind, { prefix, limit, cursor }: PermitListQuery): Promise<PermitListPage> {
    this.assertOpen();
    if (cursor !== undefined && !(PRINTABLE_ID.test(cursor) && cursor.startsWith(prefix))) {
      throw new InvalidRequestError('cursor', 'must be a nextCursor returned by this route');
    }
    const now = this.options.clock();
    const found: Array<{ key: string; state: PermitState }> = [];
    const head = poolId(kind, '');
    for (const [id, pool] of this.pools) {
      if (!id.startsWith(head)) continue;
      const key = id.slice(head.length);
      if (!key.startsWith(prefix) || (cursor !== undefined && key <= cursor)) continue;
      const state = stateOf(pool, now);
      if (state !== null) found.push({ key, state });
    }
    found.sort((a, b) => (a.key < b.key ? -1 : 1));
    const entries = found.slice(0, limit);
    const last = entries[entries.length - 1];
    return { entries, nextCursor: found.length > limit && last !== undefined ? last.key : null };
  }

  /** Forgets pools with no live lease, nobody queued, and their grace period over. */
  sweep(): void {
    const now = this.options.clock();
    for (const [id, pool] of this.pools) {
      if (pool.retainUntilMs <= now && pool.queue.length === 0 && liveLeases(pool, now).length === 0) this.pools.delete(id);
    }
  }

  /** Whether any state is kept for this key (for tests: idle keys leave nothing behind). */
  has(kind: PermitKind, key: string): boolean {
    return this.pools.has(poolId(kind, key));
  }

  close(): void {
    this.closed = true;
    for (const pool of this.pools.values()) {
      clearTimeout(pool.timer);
      for (const waiter of [...pool.queue]) waiter.fail(new StoreUnavailableError('the embedded store is closing'));
    }
  }

  private newPool(id: string, capacity: number): Pool {
    const pool: Pool = { id, capacity, lastToken: 0, leases: new Map(), queue: [], retainUntilMs: 0, changes: 0 };
    this.pools.set(id, pool);
    return pool;
  }

  private grant(pool: Pool, ownerToken: string, ttlMs: number, holder: string | null, weight: number, now: number): Lease {
    const fencingToken = nextFencingToken(pool.lastToken, now);
    pool.lastToken = fencingToken;
    const lease: Lease = { ownerToken, holder, weight, fencingToken, expiresAtMs: Math.floor(now) + ttlMs };
    pool.leases.set(ownerToken, lease);
    pool.retainUntilMs = Math.max(pool.retainUntilMs, lease.expiresAtMs + this.options.fenceGraceMs);
    this.changed(pool, now);
    return lease;
  }

  /** Drops ended leases; each counts as a change it already was (permitIndex counted it while it lay there). */
  private prune(pool: Pool, now: number): void {
    for (const [owner, lease] of pool.leases) {
      if (lease.expiresAtMs <= now) {
        pool.leases.delete(owner);
        pool.changes++;
      }
    }
  }

  /** A grant, release or eviction: the index rises (floored at the clock, as the Redis scripts do) and watchers are told. */
  private changed(pool: Pool, now: number): void {
    pool.changes = nextFencingToken(pool.changes, now);
    this.options.listeners.changed(pool.id);
  }

  /** Drops ended leases, then grants the head of the queue for as long as the head fits (FIFO, no overtaking). */
  private settle(pool: Pool, now: number): void {
    this.prune(pool, now);
    for (let head = pool.queue[0]; head !== undefined && used(pool) + head.weight <= pool.capacity; head = pool.queue[0]) {
      const lease = this.grant(pool, head.ownerToken, head.ttlMs, head.holder, head.weight, now);
      head.grant(lease.fencingToken, lease.expiresAtMs);
    }
    this.scheduleHandOver(pool);
  }

  /** While callers are queued, wakes up when the earliest lease ends to hand its room on. */
  private scheduleHandOver(pool: Pool): void {
    clearTimeout(pool.timer);
    pool.timer = undefined;
    if (pool.queue.length === 0 || this.closed) return;
    const now = this.options.clock();
    const first = Math.min(...[...pool.leases.values()].map((l) => l.expiresAtMs));
    if (!Number.isFinite(first)) return;
    pool.timer = setTimeout(() => this.settle(pool, this.options.clock()), Math.max(0, first - now) + 1);
  }

  private assertOpen(): void {
    if (this.closed) throw new StoreUnavailableError('the embedded store is closed');
  }
}

/** Kinds are told apart in the one map; ids contain no space. */
function poolId(kind: PermitKind, key: string): string {
  return `${kind} ${key}`;
}

function liveLeases(pool: Pool, now: number): Lease[] {
  return [...pool.leases.values()].filter((l) => l.expiresAtMs > now).sort((a, b) => a.fencingToken - b.fencingToken);
}

/** The watch index: the changes so far plus the leases ended but not yet dropped (an expiry is a change nobody wrote). */
function permitIndex(pool: Pool, now: number): number {
  let ended = 0;
  for (const lease of pool.leases.values()) if (lease.expiresAtMs <= now) ended++;
  return pool.changes + ended;
}

function used(pool: Pool): number {
  let sum = 0;
  for (const lease of pool.leases.values()) sum += lease.weight;
  return sum;
}

/** Time left on the earliest-ending live lease (when room may free up), at least 1. */
function untilFirst(pool: Pool, now: number): number {
  const ends = liveLeases(pool, now).map((l) => l.expiresAtMs);
  return ends.length === 0 ? 1 : Math.max(1, Math.ceil(Math.min(...ends) - now));
}

/** Time left on the latest-ending live lease (when the pool is empty), at least 1. */
function untilLast(pool: Pool, now: number): number {
  const ends = liveLeases(pool, now).map((l) => l.expiresAtMs);
  return ends.length === 0 ? 1 : Math.max(1, Math.ceil(Math.max(...ends) - now));
}

/** Ends first: the earlier end, then (as a Redis sorted set orders equal scores) the lower owner token. */
function endsBefore(a: Lease, b: Lease): boolean {
  return a.expiresAtMs < b.expiresAtMs || (a.expiresAtMs === b.expiresAtMs && a.ownerToken < b.ownerToken);
}

/**
 * The `shown` live leases that end first, in grant order, and the count of all live ones: the page the
 * Redis inspect script reads. One pass keeping a small sorted list, so a pool of 10,000 leases costs
 * an inspect O(n) comparisons, no sort of them all.
 */
function firstEnding(pool: Pool, now: number, shown: number): { leases: Lease[]; count: number } {
  const best: Lease[] = [];
  let count = 0;
  for (const lease of pool.leases.values()) {
    if (lease.expiresAtMs <= now) continue;
    count++;
    const last = best[best.length - 1];
    if (best.length >= shown && last !== undefined && !endsBefore(lease, last)) continue;
    let at = best.length;
    while (at > 0 && endsBefore(lease, best[at - 1] as Lease)) at--;
    best.splice(at, 0, lease);
    if (best.length > shown) best.pop();
  }
  return { leases: best.sort((a, b) => a.fencingToken - b.fencingToken), count };
}

function stateOf(pool: Pool, now: number): PermitState | null {
  const { leases, count } = firstEnding(pool, now, MAX_HOLDERS_SHOWN);
  if (count === 0) return null;
  return {
    capacity: pool.capacity,
    holderCount: count,
    holders: leases.map(({ holder, weight, fencingToken, expiresAtMs }) => ({
      holder,
      weight,
      fencingToken,
      expiresAtMs,
      ttlRemainingMs: Math.max(0, Math.ceil(expiresAtMs - now)),
    })),
    waiters: pool.queue.length,
  };
}
