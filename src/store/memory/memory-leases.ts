import { withReleaseRequest } from '../../domain/permit-values.js';
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
import type { EvictedLease, LeaseAcquire, LeaseAcquireOutcome, LeaseKind, LeaseRenewOutcome } from '../../domain/lease-store.js';
import type { LockListRow, IndexedLockState, ListPage, ListQuery, LockState } from '../../domain/lock-values.js';
import {
  MAX_HOLDERS_SHOWN,
  type IndexedPermitState,
  type PermitKind,
  type ReleaseRequest,
  type ReleaseRequestInput,
} from '../../domain/permit-values.js';
import type { PermitListPage, PermitListQuery, PermitState, QueuedCaller } from '../../domain/permit-values.js';
import type { ChangeListeners } from './change-listeners.js';
import type { Clock } from '../shared/clock.js';
import type { LeaseEngine } from '../shared/lease-port.js';

interface Lease {
  readonly ownerToken: string;
  readonly holder: string | null;
  readonly weight: number;
  readonly fencingToken: number;
  expiresAtMs: number;
  /** The idempotency key the lease was acquired with (locks; null for none). */
  readonly idempotencyKey: string | null;
  /** Lock-delay: how long the key stays unavailable after this lease EXPIRES (0: none). */
  readonly lockDelayMs: number;
  /** Someone asked the holder to let go; it goes with the lease (a new lease is a new object). */
  releaseRequest?: ReleaseRequest;
}

interface Waiter {
  readonly ownerToken: string;
  readonly ttlMs: number;
  readonly holder: string | null;
  readonly weight: number;
  readonly lockDelayMs: number;
  /** When it joined the queue (store clock, ms). */
  readonly since: number;
  grant(fencingToken: number, expiresAtMs: number): void;
  fail(err: Error): void;
}

/** One key's state: its capacity, live leases, FIFO queue and last fencing token. */
interface Pool {
  /** Its key in the pools map (poolId): where its changes are announced. */
  readonly id: string;
  readonly kind: LeaseKind;
  capacity: number;
  lastToken: number;
  readonly leases: Map<string, Lease>;
  readonly queue: Waiter[];
  /** When the pool may be forgotten (its last lease's end plus the fencing grace period). */
  retainUntilMs: number;
  /** Changes so far, for the watch index (permitIndex); ended leases count once dropped. */
  changes: number;
  /** The end of the lock-delay of a lease that expired (0: none). */
  delayUntilMs: number;
  timer?: NodeJS.Timeout;
}

export interface MemoryLeasesOptions {
  readonly fenceGraceMs: number;
  /** Where the pools' changes are announced (keys: poolId). */
  readonly listeners: ChangeListeners;
  readonly clock: Clock;
  readonly maxWaitersPerKey: number;
}

const PRINTABLE_ID = /^[\x21-\x7e]+$/;

/**
 * The embedded store's lease engine: every key a pool of some capacity whose leases each take a weight,
 * FIFO waiting with hand-off, the same rules as the Redis scripts in TypeScript. A lock is a pool of
 * capacity 1 (with its options: lock-delay, idempotency, several keys at once for a lock set); a
 * semaphore or read/write lock a pool of its capacity (see permit-values.ts). Atomic because every method
 * runs synchronously on the one event loop; a lease that runs out with callers queued is handed on by a
 * timer set for its end (or its lock-delay's).
 */
export class MemoryLeases implements LeaseEngine {
  private readonly pools = new Map<string, Pool>();
  private closed = false;

  constructor(private readonly options: MemoryLeasesOptions) {}

  /** The one acquire: one key of any kind, or several lock keys at once (all or none). */
  async acquire(request: LeaseAcquire): Promise<LeaseAcquireOutcome> {
    this.assertOpen();
    const { kind, ids, ownerToken, ttlMs, weight, capacity, waitMs = 0, signal, idempotencyKey, lockDelayMs = 0 } = request;
    // "" is no label, as in Redis (which stores none for it).
    const holder = request.holder === '' ? null : request.holder;
    // A caller that has already left takes nothing, not even a free key (nobody would release it).
    signal?.throwIfAborted();
    const decidedAt = performance.now();
    const now = this.options.clock();
    if (ids.length > 1) return this.acquireAll(kind, ids, { ownerToken, ttlMs, holder, lockDelayMs }, decidedAt, now);
    const id = ids[0] as string;
    const poolName = poolId(kind, id);
    const pool = this.pools.get(poolName) ?? this.newPool(poolName, kind, capacity);
    this.settle(pool, now);
    if (pool.leases.size > 0 && pool.capacity !== capacity) {
      return { acquired: false, reason: 'mismatch', capacity: pool.capacity, retryAfterMs: untilLast(pool, now) };
    }
    // A key no lease holds is the caller's capacity (as on Redis and etcd): the pool outlives its last lease
    // (its fencing counter, the grace), but not the capacity that lease was taken under, which would refuse
    // a weight above it as full, on a free key.
    pool.capacity = capacity;
    if (fits(pool, weight, now)) {
      const lease = this.grant(pool, { ownerToken, ttlMs, holder, weight, lockDelayMs }, now, idempotencyKey ?? null);
      return { acquired: true, fencingTokens: [lease.fencingToken], expiresAtMs: lease.expiresAtMs, decidedAt };
    }
    if (idempotencyKey !== undefined) {
      for (const live of pool.leases.values()) {
        const match = compareIdempotencyKeys(live.idempotencyKey, idempotencyKey);
        if (match === 'replay') {
          // A retry of the acquire that made this lease (its answer was lost): the same grant, nothing changed.
          const { fencingToken, expiresAtMs } = live;
          return {
            acquired: true,
            fencingTokens: [fencingToken],
            expiresAtMs,
            decidedAt,
            replayed: { ownerToken: live.ownerToken, holder: live.holder },
          };
        }
        if (match === 'reused') throw new IdempotencyKeyReusedError();
      }
    }
    const retryAfterMs = untilFirst(pool, now);
    if (waitMs <= 0) return { acquired: false, reason: 'full', retryAfterMs, busyId: id };
    if (pool.queue.length >= this.options.maxWaitersPerKey) throw new TooManyWaitersError('key', retryAfterMs);

    return new Promise<LeaseAcquireOutcome>((resolve, reject) => {
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
        lockDelayMs,
        since: now,
        grant: (fencingToken, expiresAtMs) => {
          leave(false);
          resolve({ acquired: true, fencingTokens: [fencingToken], expiresAtMs, decidedAt: performance.now(), queued: true });
        },
        fail: (err) => {
          leave(false);
          reject(err);
        },
      };
      const timer = setTimeout(() => {
        leave(true);
        resolve({ acquired: false, reason: 'full', retryAfterMs: untilFirst(pool, this.options.clock()), busyId: id });
      }, waitMs);
      const onAbort = () => {
        leave(true);
        // Stryker disable next-line OptionalChaining: onAbort only ever runs as a listener on signal, so signal is set here
        const reason: unknown = signal?.reason;
        reject(reason instanceof Error ? reason : new WaitAbortedError());
      };
      // Stryker disable next-line ObjectLiteral,BooleanLiteral: a signal aborts once, and leave() removes the listener then anyway
      signal?.addEventListener('abort', onAbort, { once: true });
      pool.queue.push(waiter);
      this.scheduleHandOver(pool);
    });
  }

  /**
   * Several keys of capacity 1 (a lock set) under one owner token: granted only if every key is free (no
   * live lease, no lock-delay, nobody queued); otherwise nothing is taken and the first busy key is named.
   */
  private acquireAll(
    kind: LeaseKind,
    ids: readonly string[],
    asked: { ownerToken: string; ttlMs: number; holder: string | null; lockDelayMs: number },
    decidedAt: number,
    now: number,
  ): LeaseAcquireOutcome {
    let busyId: string | undefined;
    let freeAt = 0;
    for (const id of ids) {
      const pool = this.pools.get(poolId(kind, id));
      if (pool === undefined) continue;
      this.settle(pool, now);
      const until = busyUntil(pool, now);
      if (until > freeAt) {
        freeAt = until;
        busyId ??= id;
      }
    }
    if (busyId !== undefined) return { acquired: false, reason: 'full', retryAfterMs: Math.max(1, Math.ceil(freeAt - now)), busyId };
    const fencingTokens = ids.map((id) => {
      const poolName = poolId(kind, id);
      const pool = this.pools.get(poolName) ?? this.newPool(poolName, kind, 1);
      return this.grant(pool, { ...asked, weight: 1 }, now, null).fencingToken;
    });
    return { acquired: true, fencingTokens, expiresAtMs: Math.floor(now) + asked.ttlMs, decidedAt };
  }

  /** Extends the lease of `ownerToken` on every key, only if it holds a live one on each. */
  async renew(kind: LeaseKind, ids: readonly string[], ownerToken: string, ttlMs: number): Promise<LeaseRenewOutcome> {
    this.assertOpen();
    const now = this.options.clock();
    const held: Array<[Pool, Lease]> = [];
    for (const id of ids) {
      const pool = this.pools.get(poolId(kind, id));
      const lease = pool?.leases.get(ownerToken);
      if (pool === undefined || lease === undefined || lease.expiresAtMs <= now) return { renewed: false };
      held.push([pool, lease]);
    }
    const expiresAtMs = Math.floor(now) + ttlMs;
    let releaseRequested: ReleaseRequest | undefined;
    for (const [pool, lease] of held) {
      lease.expiresAtMs = expiresAtMs;
      releaseRequested ??= lease.releaseRequest;
      this.retain(pool, expiresAtMs);
      this.scheduleHandOver(pool);
    }
    const fencingTokens = held.map(([, lease]) => lease.fencingToken);
    return withReleaseRequest({ renewed: true as const, fencingTokens, expiresAtMs }, releaseRequested);
  }

  /** Stores the request on the live lease with `fencingToken` (replacing an earlier one); null when none has it. */
  async requestRelease(kind: LeaseKind, id: string, fencingToken: number, request: ReleaseRequestInput): Promise<ReleaseRequest | null> {
    this.assertOpen();
    const now = this.options.clock();
    const pool = this.pools.get(poolId(kind, id));
    const lease = pool === undefined ? undefined : liveLeases(pool, now).find((l) => l.fencingToken === fencingToken);
    if (pool === undefined || lease === undefined) return null;
    lease.releaseRequest = { atMs: Math.floor(now), by: request.by, reason: request.reason };
    // Watchers re-read, so their next answer shows it; not `changed`: the index stays (same holders).
    this.options.listeners.changed(pool.id);
    return lease.releaseRequest;
  }

  /** Ends the lease of `ownerToken` on every key where it holds a live one; false when it held none. */
  async release(kind: LeaseKind, ids: readonly string[], ownerToken: string): Promise<boolean> {
    this.assertOpen();
    const now = this.options.clock();
    let released = false;
    for (const id of ids) {
      const pool = this.pools.get(poolId(kind, id));
      const lease = pool?.leases.get(ownerToken);
      if (pool === undefined || lease === undefined || lease.expiresAtMs <= now) continue;
      this.end(pool, [lease], now);
      released = true;
    }
    return released;
  }

  /** Ends every live lease on `id`, or the one with `fencingToken`: an administrator's override. */
  async forceRelease(kind: LeaseKind, id: string, fencingToken?: number): Promise<EvictedLease[]> {
    this.assertOpen();
    const now = this.options.clock();
    const pool = this.pools.get(poolId(kind, id));
    if (pool === undefined) return [];
    this.prune(pool, now);
    const evicted = liveLeases(pool, now).filter((lease) => fencingToken === undefined || lease.fencingToken === fencingToken);
    if (evicted.length > 0) this.end(pool, evicted, now);
    else this.settle(pool, now);
    return evicted.map(({ holder, fencingToken: token, ownerToken, expiresAtMs }) => ({
      holder,
      fencingToken: token,
      ownerToken,
      expiresAtMs,
    }));
  }

  /** The first `limit` live callers queued for `id`, head first (a lock's without a weight). */
  async queue(kind: LeaseKind, id: string, limit: number): Promise<QueuedCaller[]> {
    this.assertOpen();
    const pool = this.pools.get(poolId(kind, id));
    return (pool?.queue ?? [])
      .slice(0, limit)
      .map((w, i) =>
        kind === 'lock'
          ? { position: i + 1, holder: w.holder, waitingSinceMs: w.since }
          : { position: i + 1, holder: w.holder, waitingSinceMs: w.since, weight: w.weight },
      );
  }

  async watchChanges(kind: LeaseKind, id: string, onChange: () => void): Promise<() => void> {
    this.assertOpen();
    return this.options.listeners.watch(poolId(kind, id), onChange);
  }

  /** A lock's live lease, as the port's inspect answers it. */
  async lockState(id: string): Promise<LockState | null> {
    this.assertOpen();
    const pool = this.pools.get(poolId('lock', id));
    return pool === undefined ? null : lockStateOf(pool, this.options.clock());
  }

  /** A lock's state with what its watch index needs (the port's inspectIndexed). */
  async lockIndexed(id: string): Promise<IndexedLockState> {
    const state = await this.lockState(id);
    const pool = this.pools.get(poolId('lock', id));
    const delayedUntil = pool === undefined ? 0 : delayEnd(pool, this.options.clock());
    return { state, lastFencingToken: pool?.lastToken ?? 0, ...(delayedUntil > 0 ? { lockDelayUntilMs: delayedUntil } : {}) };
  }

  /**
   * Held locks in id order from the cursor (the last id of the previous page). Sorting on every page
   * costs O(n log n), acceptable for the embedded store's sizes, and makes pages exact: no lock is shown
   * twice and a page never holds more than `limit` locks.
   */
  async listLocks({ prefix, limit, cursor }: ListQuery): Promise<ListPage> {
    this.assertOpen();
    // A cursor is the last id of a page listed with the same prefix: printable and starting with it.
    // Anything else did not come from here, and answers the same 400 as on Redis.
    if (cursor !== undefined && !(PRINTABLE_ID.test(cursor) && cursor.startsWith(prefix))) {
      throw new InvalidRequestError('cursor', 'must be a nextCursor returned by this route');
    }
    const now = this.options.clock();
    const found: LockListRow[] = [];
    for (const pool of this.pools.values()) {
      const id = idOf(pool, 'lock', prefix);
      if (id === undefined || (cursor !== undefined && id <= cursor)) continue;
      const state = lockStateOf(pool, now);
      if (state !== null) found.push({ id, ...state });
    }
    found.sort((a, b) => (a.id < b.id ? -1 : 1));
    const leases = found.slice(0, limit);
    const last = leases[leases.length - 1];
    return { leases, nextCursor: found.length > limit && last !== undefined ? last.id : null };
  }

  async inspectPermits(kind: PermitKind, id: string): Promise<PermitState | null> {
    this.assertOpen();
    const pool = this.pools.get(poolId(kind, id));
    return pool === undefined ? null : stateOf(pool, this.options.clock());
  }

  async inspectPermitsIndexed(kind: PermitKind, id: string): Promise<IndexedPermitState> {
    this.assertOpen();
    const pool = this.pools.get(poolId(kind, id));
    if (pool === undefined) return { state: null, index: 0 };
    const now = this.options.clock();
    return { state: stateOf(pool, now), index: permitIndex(pool, now) };
  }

  async listPermits(kind: PermitKind, { prefix, limit, cursor }: PermitListQuery): Promise<PermitListPage> {
    this.assertOpen();
    if (cursor !== undefined && !(PRINTABLE_ID.test(cursor) && cursor.startsWith(prefix))) {
      throw new InvalidRequestError('cursor', 'must be a nextCursor returned by this route');
    }
    const now = this.options.clock();
    const found: Array<{ id: string; state: PermitState }> = [];
    for (const pool of this.pools.values()) {
      const id = idOf(pool, kind, prefix);
      if (id === undefined || (cursor !== undefined && id <= cursor)) continue;
      const state = stateOf(pool, now);
      if (state !== null) found.push({ id, state });
    }
    found.sort((a, b) => (a.id < b.id ? -1 : 1));
    const entries = found.slice(0, limit);
    const last = entries[entries.length - 1];
    return { entries, nextCursor: found.length > limit && last !== undefined ? last.id : null };
  }

  /** Forgets pools with no live lease, nobody queued, and their grace period over. */
  sweep(): void {
    const now = this.options.clock();
    for (const [id, pool] of this.pools) {
      if (pool.retainUntilMs <= now && pool.queue.length === 0 && liveLeases(pool, now).length === 0) this.pools.delete(id);
    }
  }

  /** Whether any state is kept for this key (for tests: idle keys leave nothing behind). */
  has(kind: LeaseKind, id: string): boolean {
    return this.pools.has(poolId(kind, id));
  }

  /** Keys of `kind` with state (held or within their grace period). */
  count(kind: LeaseKind): number {
    let n = 0;
    for (const pool of this.pools.values()) if (pool.kind === kind) n++;
    return n;
  }

  close(): void {
    this.closed = true;
    for (const pool of this.pools.values()) {
      clearTimeout(pool.timer);
      for (const waiter of [...pool.queue]) waiter.fail(new StoreUnavailableError('the embedded store is closing'));
    }
  }

  private newPool(id: string, kind: LeaseKind, capacity: number): Pool {
    const pool: Pool = { id, kind, capacity, lastToken: 0, leases: new Map(), queue: [], retainUntilMs: 0, changes: 0, delayUntilMs: 0 };
    this.pools.set(id, pool);
    return pool;
  }

  private grant(
    pool: Pool,
    asked: { ownerToken: string; ttlMs: number; holder: string | null; weight: number; lockDelayMs: number },
    now: number,
    idempotencyKey: string | null,
  ): Lease {
    const { ownerToken, ttlMs, holder, weight, lockDelayMs } = asked;
    const fencingToken = nextFencingToken(pool.lastToken, now);
    pool.lastToken = fencingToken;
    const lease: Lease = { ownerToken, holder, weight, fencingToken, expiresAtMs: Math.floor(now) + ttlMs, idempotencyKey, lockDelayMs };
    pool.leases.set(ownerToken, lease);
    this.retain(pool, lease.expiresAtMs);
    this.changed(pool, now);
    return lease;
  }

  /**
   * Keeps the pool for the fencing grace period after `endMs`. A lock's one lease decides alone (a
   * release or a renewal moves its end either way); a multi-holder key keeps the longest end so far.
   */
  private retain(pool: Pool, endMs: number): void {
    const until = endMs + this.options.fenceGraceMs;
    pool.retainUntilMs = pool.kind === 'lock' ? until : Math.max(pool.retainUntilMs, until);
  }

  /** Ends live leases now (a release, an eviction): the fencing sequence is kept, the room handed on. */
  private end(pool: Pool, leases: readonly Lease[], now: number): void {
    for (const lease of leases) pool.leases.delete(lease.ownerToken);
    if (pool.kind === 'lock') this.retain(pool, Math.floor(now));
    this.changed(pool, now);
    this.settle(pool, now);
  }

  /** Drops ended leases; each counts as a change it already was (permitIndex counted it while it lay there). */
  private prune(pool: Pool, now: number): void {
    for (const [owner, lease] of pool.leases) {
      if (lease.expiresAtMs <= now) {
        pool.leases.delete(owner);
        pool.changes++;
        if (lease.lockDelayMs > 0) pool.delayUntilMs = Math.max(pool.delayUntilMs, lease.expiresAtMs + lease.lockDelayMs);
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
    if (delayEnd(pool, now) === 0) {
      for (let head = pool.queue[0]; head !== undefined && used(pool) + head.weight <= pool.capacity; head = pool.queue[0]) {
        const lease = this.grant(pool, head, now, null);
        head.grant(lease.fencingToken, lease.expiresAtMs);
      }
    }
    this.scheduleHandOver(pool);
  }

  /** While callers are queued, wakes up when the earliest lease (or the lock-delay after it) ends to hand its room on. */
  private scheduleHandOver(pool: Pool): void {
    clearTimeout(pool.timer);
    pool.timer = undefined;
    if (pool.queue.length === 0 || this.closed) return;
    const now = this.options.clock();
    let wakeAtMs = Math.min(...[...pool.leases.values()].map((l) => l.expiresAtMs));
    if (!Number.isFinite(wakeAtMs)) wakeAtMs = delayEnd(pool, now);
    // Nothing live and no delay (the lease ended between two reads of the clock): hand on at once.
    pool.timer = setTimeout(() => this.settle(pool, this.options.clock()), Math.max(0, wakeAtMs - now) + 1);
  }

  private assertOpen(): void {
    if (this.closed) throw new StoreUnavailableError('the embedded store is closed');
  }
}

/**
 * Kinds are told apart in the one map: a lock's pool under its id (as its change notices go out), the
 * others' under `<kind> <id>` (ids contain no space, so no lock's id is ever one of those).
 */
function poolId(kind: LeaseKind, id: string): string {
  return kind === 'lock' ? id : `${kind} ${id}`;
}

/** The key of `pool` if it is of `kind` and its key starts with `prefix`. */
function idOf(pool: Pool, kind: LeaseKind, prefix: string): string | undefined {
  if (pool.kind !== kind) return undefined;
  const id = kind === 'lock' ? pool.id : pool.id.slice(kind.length + 1);
  return id.startsWith(prefix) ? id : undefined;
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

/** Time left on the earliest-ending live lease (when room may free up), else on a lock-delay; at least 1. */
function untilFirst(pool: Pool, now: number): number {
  const ends = liveLeases(pool, now).map((l) => l.expiresAtMs);
  const end = ends.length === 0 ? delayEnd(pool, now) : Math.min(...ends);
  return end === 0 ? 1 : Math.max(1, Math.ceil(end - now));
}

/** When the lock-delay after an expired lease ends, or 0 when none runs now. */
function delayEnd(pool: Pool, now: number): number {
  let until = pool.delayUntilMs;
  for (const lease of pool.leases.values()) {
    if (lease.expiresAtMs <= now && lease.lockDelayMs > 0) until = Math.max(until, lease.expiresAtMs + lease.lockDelayMs);
  }
  return until > now ? until : 0;
}

/** Whether a lease of `weight` can be granted now: it fits beside the live ones, no delay, nobody queued. */
function fits(pool: Pool, weight: number, now: number): boolean {
  return pool.queue.length === 0 && used(pool) + weight <= pool.capacity && delayEnd(pool, now) === 0;
}

/** Until when `pool` is busy for a lock set (a live lease, a lock-delay, callers queued), or 0 when free. */
function busyUntil(pool: Pool, now: number): number {
  const ends = liveLeases(pool, now).map((l) => l.expiresAtMs);
  if (ends.length > 0) return Math.max(...ends);
  const delayed = delayEnd(pool, now);
  if (delayed > 0) return delayed;
  // Callers queued for a free key are about to get it: a set does not jump their queue.
  // Stryker disable next-line ArithmeticOperator: now - 1 still marks the key busy (a Unix clock is far above 1), and max(1, ceil(-1)) is 1
  return pool.queue.length > 0 ? now + 1 : 0;
}

/** A lock's one live lease, or null. */
function lockStateOf(pool: Pool, now: number): LockState | null {
  const [lease] = liveLeases(pool, now);
  if (lease === undefined) return null;
  const state = {
    holder: lease.holder,
    fencingToken: lease.fencingToken,
    expiresAtMs: lease.expiresAtMs,
    ttlRemainingMs: Math.max(0, Math.ceil(lease.expiresAtMs - now)),
    waiters: pool.queue.length,
  };
  return withReleaseRequest(state, lease.releaseRequest);
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
    // Stryker disable next-line ArithmeticOperator: no last, no skip: the lease goes in after the last and is popped at once (a fast path)
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
    holders: leases.map(({ holder, weight, fencingToken, expiresAtMs, releaseRequest }) =>
      withReleaseRequest(
        { holder, weight, fencingToken, expiresAtMs, ttlRemainingMs: Math.max(0, Math.ceil(expiresAtMs - now)) },
        releaseRequest,
      ),
    ),
    waiters: pool.queue.length,
  };
}
