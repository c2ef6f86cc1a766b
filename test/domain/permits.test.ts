import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi, onTestFinished } from 'vitest';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { ownLag } from '../../src/domain/own-lag.js';
import {
  InvalidRequestError,
  LimitMismatchError,
  NotOwnerError,
  QuotaExceededError,
  RwLockHeldError,
  SemaphoreFullError,
  ShuttingDownError,
  StoreUnavailableError,
  WaitAbortedError,
} from '../../src/domain/errors.js';
import type { LeaseLimits } from '../../src/domain/limits.js';
import { LockService } from '../../src/domain/lock-service.js';
import type { Store } from '../../src/domain/lease-store.js';
import { withLeases } from '../helpers/with-leases.js';
import type { PermitObserver } from '../../src/domain/permits.js';
import { createPermitCores, type PermitCores } from '../../src/domain/primitives.js';
import { MAX_READERS, RwLockService } from '../../src/domain/rwlocks.js';
import { SemaphoreService } from '../../src/domain/semaphores.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import { FakeClock } from '../helpers/fake-clock.js';
// The embedded store's own clock, which parts from Date.now() while the system clock is slewed.
import { monotonicWallClock } from '../../src/store/shared/clock.js';

/**
 * Semaphores and read/write locks as their services promise them, over the embedded store in this
 * process: at most `limit` permits, one limit per live semaphore, many readers or one writer with
 * writers not starved, waiting callers granted in turn, each lease its own (renew, release, not_owner),
 * the namespace quota counting every lease, blocking queries, and a late grant never handed out.
 */
const LIMITS: LeaseLimits = { ...DEFAULT_LIMITS, minTtlMs: 1 };
const uniqueNamespace = () => `ns-${randomUUID().slice(0, 8)}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Rig {
  readonly store: MemoryStore;
  readonly locks: LockService;
  readonly cores: PermitCores;
  readonly semaphores: SemaphoreService;
  readonly rwlocks: RwLockService;
  readonly events: string[];
}

function rig(limits: LeaseLimits = LIMITS, wrap: (store: MemoryStore) => Store = (s) => s, clock?: FakeClock): Rig {
  const store = new MemoryStore({ fenceGraceMs: 600_000, sweepIntervalMs: 0, clock: clock?.now });
  const wrapped = wrap(store);
  const locks = new LockService(wrapped, limits);
  const events: string[] = [];
  const observer: PermitObserver = {
    operation: (kind, op, result, seconds) => {
      expect(seconds).toBeGreaterThanOrEqual(0);
      events.push(`${kind} ${op} ${result}`);
    },
    lostLease: (op) => events.push(`lost ${op}`),
    waited: (seconds, granted) => {
      expect(seconds).toBeGreaterThanOrEqual(0);
      events.push(`waited ${granted}`);
    },
  };
  const cores = createPermitCores(wrapped, limits, locks.waitGate, observer);
  return { store, locks, cores, semaphores: new SemaphoreService(cores.semaphores), rwlocks: new RwLockService(cores.rwlocks), events };
}

describe('semaphores', () => {
  let r: Rig;
  beforeAll(() => {
    r = rig();
  });
  afterAll(async () => {
    await r.store.close();
  });

  it('grants up to limit permits, each its own lease with a higher token; then semaphore_full with the time left', async () => {
    const ns = uniqueNamespace();
    const before = monotonicWallClock();
    const first = await r.semaphores.acquire(ns, 'pool', { limit: 2, ttlMs: 30_000, holder: 'w1' });
    expect(first).toMatchObject({ key: 'pool', ttlMs: 30_000, holder: 'w1' });
    expect(first.ownerToken).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(first.expiresAtMs).toBeGreaterThanOrEqual(before + 30_000 - 1);
    expect(first.expiresAtMs).toBeLessThanOrEqual(monotonicWallClock() + 30_000 + 1);
    expect(first.decidedAt).toBeLessThanOrEqual(performance.now());
    const second = await r.semaphores.acquire(ns, 'pool', { limit: 2, ttlMs: 10_000 });
    expect(second.holder).toBeNull();
    expect(second.ownerToken).not.toBe(first.ownerToken);
    expect(second.fencingToken).toBeGreaterThan(first.fencingToken);
    const full = await r.semaphores.acquire(ns, 'pool', { limit: 2, ttlMs: 30_000 }).catch((e: unknown) => e);
    expect(full).toBeInstanceOf(SemaphoreFullError);
    expect((full as SemaphoreFullError).key).toBe('pool');
    // The earliest permit ends in about 10 s.
    expect((full as SemaphoreFullError).retryAfterMs).toBeGreaterThan(5_000);
    expect((full as SemaphoreFullError).retryAfterMs).toBeLessThanOrEqual(10_000);

    const view = await r.semaphores.inspect(ns, 'pool');
    expect(view).toEqual({
      limit: 2,
      permitsHeld: 2,
      holders: [
        { holder: 'w1', fencingToken: first.fencingToken, expiresAtMs: first.expiresAtMs, ttlRemainingMs: expect.any(Number) },
        { holder: null, fencingToken: second.fencingToken, expiresAtMs: second.expiresAtMs, ttlRemainingMs: expect.any(Number) },
      ],
      waiters: 0,
    });
    expect(view?.holders[0]?.ttlRemainingMs).toBeGreaterThan(20_000);
    // Another namespace's semaphore of the same name is another semaphore.
    expect(await r.semaphores.inspect(uniqueNamespace(), 'pool')).toBeNull();

    await r.semaphores.release(ns, 'pool', first.ownerToken);
    await r.semaphores.release(ns, 'pool', second.ownerToken);
    expect(await r.semaphores.inspect(ns, 'pool')).toBeNull();
  });

  it('one limit per live semaphore: another limit is limit_mismatch until every permit has ended', async () => {
    const ns = uniqueNamespace();
    const held = await r.semaphores.acquire(ns, 'lim', { limit: 2, ttlMs: 30_000 });
    const err = await r.semaphores.acquire(ns, 'lim', { limit: 3, ttlMs: 30_000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LimitMismatchError);
    expect(err).toMatchObject({ key: 'lim', requestedLimit: 3, liveLimit: 2 });
    expect((err as LimitMismatchError).retryAfterMs).toBeGreaterThan(20_000);
    await r.semaphores.release(ns, 'lim', held.ownerToken);
    const renamed = await r.semaphores.acquire(ns, 'lim', { limit: 3, ttlMs: 30_000 });
    expect((await r.semaphores.inspect(ns, 'lim'))?.limit).toBe(3);
    await r.semaphores.release(ns, 'lim', renamed.ownerToken);
  });

  it('renew keeps the token and moves the expiry; a released or unknown token is not_owner', async () => {
    const ns = uniqueNamespace();
    const grant = await r.semaphores.acquire(ns, 'rn', { limit: 1, ttlMs: 1_000 });
    const renewed = await r.semaphores.renew(ns, 'rn', grant.ownerToken, 60_000);
    expect(renewed).toMatchObject({ key: 'rn', fencingToken: grant.fencingToken, ttlMs: 60_000 });
    expect(renewed.expiresAtMs).toBeGreaterThan(grant.expiresAtMs + 50_000);
    expect((await r.semaphores.inspect(ns, 'rn'))?.holders[0]?.expiresAtMs).toBe(renewed.expiresAtMs);
    await expect(r.semaphores.renew(ns, 'rn', grant.ownerToken, 0)).rejects.toBeInstanceOf(InvalidRequestError);
    await r.semaphores.release(ns, 'rn', grant.ownerToken);
    const again = await r.semaphores.release(ns, 'rn', grant.ownerToken).catch((e: unknown) => e);
    expect(again).toBeInstanceOf(NotOwnerError);
    expect((again as NotOwnerError).key).toBe('rn');
    await expect(r.semaphores.renew(ns, 'rn', grant.ownerToken, 1_000)).rejects.toBeInstanceOf(NotOwnerError);
  });

  it('TTL and waitMs outside the bounds are invalid and take nothing', async () => {
    const ns = uniqueNamespace();
    const invalid = async (request: { limit: number; ttlMs: number; waitMs?: number }, field: string) => {
      const err = await r.semaphores.acquire(ns, 'bad', request).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InvalidRequestError);
      expect((err as InvalidRequestError).field).toBe(field);
    };
    await invalid({ limit: 1, ttlMs: 0 }, 'ttlMs');
    await invalid({ limit: 1, ttlMs: LIMITS.maxTtlMs + 1 }, 'ttlMs');
    await invalid({ limit: 1, ttlMs: 1.5 }, 'ttlMs');
    await invalid({ limit: 1, ttlMs: 1_000, waitMs: -1 }, 'waitMs');
    await invalid({ limit: 1, ttlMs: 1_000, waitMs: LIMITS.maxWaitMs + 1 }, 'waitMs');
    expect(await r.semaphores.inspect(ns, 'bad')).toBeNull();
    // The bounds themselves are allowed.
    const low = await r.semaphores.acquire(ns, 'bad', { limit: 2, ttlMs: LIMITS.minTtlMs + 999 });
    const high = await r.semaphores.acquire(ns, 'bad', { limit: 2, ttlMs: LIMITS.maxTtlMs, waitMs: LIMITS.maxWaitMs });
    await r.semaphores.release(ns, 'bad', low.ownerToken);
    await r.semaphores.release(ns, 'bad', high.ownerToken);
  });

  it('a waiting caller is granted the permit another releases, in arrival order', async () => {
    const ns = uniqueNamespace();
    const held = await r.semaphores.acquire(ns, 'q', { limit: 1, ttlMs: 60_000 });
    const first = r.semaphores.acquire(ns, 'q', { limit: 1, ttlMs: 60_000, waitMs: 20_000, holder: 'first' });
    await vi.waitFor(async () => expect((await r.semaphores.inspect(ns, 'q'))?.waiters).toBe(1));
    const second = r.semaphores.acquire(ns, 'q', { limit: 1, ttlMs: 60_000, waitMs: 20_000, holder: 'second' });
    await vi.waitFor(async () => expect((await r.semaphores.inspect(ns, 'q'))?.waiters).toBe(2));
    expect(r.locks.waitingCallers).toBe(2);
    await r.semaphores.release(ns, 'q', held.ownerToken);
    const one = await first;
    expect(one.holder).toBe('first');
    expect(one.fencingToken).toBeGreaterThan(held.fencingToken);
    await r.semaphores.release(ns, 'q', one.ownerToken);
    const two = await second;
    expect(two.holder).toBe('second');
    expect(r.locks.waitingCallers).toBe(0);
    await r.semaphores.release(ns, 'q', two.ownerToken);
  });

  it('a waiting caller that leaves gets nothing and holds nothing; one whose wait runs out is refused', async () => {
    const ns = uniqueNamespace();
    const held = await r.semaphores.acquire(ns, 'l', { limit: 1, ttlMs: 60_000 });
    const caller = new AbortController();
    const leaving = r.semaphores
      .acquire(ns, 'l', { limit: 1, ttlMs: 60_000, waitMs: 20_000, signal: caller.signal })
      .catch((e: unknown) => e);
    await vi.waitFor(async () => expect((await r.semaphores.inspect(ns, 'l'))?.waiters).toBe(1));
    caller.abort(new WaitAbortedError());
    expect(await leaving).toBeInstanceOf(WaitAbortedError);
    expect((await r.semaphores.inspect(ns, 'l'))?.waiters).toBe(0);
    const started = performance.now();
    await expect(r.semaphores.acquire(ns, 'l', { limit: 1, ttlMs: 60_000, waitMs: 200 })).rejects.toBeInstanceOf(SemaphoreFullError);
    expect(performance.now() - started).toBeGreaterThanOrEqual(195);
    await r.semaphores.release(ns, 'l', held.ownerToken);
    expect(await r.semaphores.inspect(ns, 'l')).toBeNull();
  });

  it('a waiter that leaves as the permit is handed to it gives it back at once', async () => {
    const ns = uniqueNamespace();
    const held = await r.semaphores.acquire(ns, 'h', { limit: 1, ttlMs: 60_000 });
    const caller = new AbortController();
    const leaving = r.semaphores
      .acquire(ns, 'h', { limit: 1, ttlMs: 60_000, waitMs: 20_000, signal: caller.signal })
      .catch((e: unknown) => e);
    await vi.waitFor(async () => expect((await r.semaphores.inspect(ns, 'h'))?.waiters).toBe(1));
    const released = r.semaphores.release(ns, 'h', held.ownerToken);
    caller.abort(new WaitAbortedError());
    await released;
    expect(await leaving).toBeInstanceOf(WaitAbortedError);
    await vi.waitFor(async () => expect(await r.semaphores.inspect(ns, 'h')).toBeNull());
  });

  it('an administrator evicts every permit and is told whose; listings show the live ones by namespace', async () => {
    const ns = uniqueNamespace();
    const a = await r.semaphores.acquire(ns, 'ev', { limit: 3, ttlMs: 60_000, holder: 'a' });
    const b = await r.semaphores.acquire(ns, 'ev', { limit: 3, ttlMs: 60_000, holder: 'b' });
    await r.semaphores.acquire(ns, 'other', { limit: 3, ttlMs: 60_000 });
    const page = await r.cores.semaphores.listHeld({ namespace: ns, prefix: 'e', limit: 100 });
    expect(page.entries.map((e) => [e.namespace, e.key, e.state.holders.length])).toEqual([[ns, 'ev', 2]]);
    expect(page.nextCursor).toBeNull();
    const all = await r.cores.semaphores.listHeld({ prefix: '', limit: 1_000 });
    expect(
      all.entries
        .filter((e) => e.namespace === ns)
        .map((e) => e.key)
        .sort(),
    ).toEqual(['ev', 'other']);
    await expect(r.cores.semaphores.listHeld({ prefix: 'e', limit: 10 })).rejects.toBeInstanceOf(InvalidRequestError);
    // The read/write locks are another kind: none listed here.
    expect((await r.cores.rwlocks.listHeld({ namespace: ns, prefix: '', limit: 100 })).entries).toEqual([]);

    expect(await r.cores.semaphores.forceRelease(ns, 'ev')).toEqual([
      { holder: 'a', fencingToken: a.fencingToken },
      { holder: 'b', fencingToken: b.fencingToken },
    ]);
    expect(await r.semaphores.inspect(ns, 'ev')).toBeNull();
    await expect(r.semaphores.release(ns, 'ev', a.ownerToken)).rejects.toBeInstanceOf(NotOwnerError);
    expect(await r.cores.semaphores.forceRelease(ns, 'ev')).toEqual([]);
  });

  it('reports each operation with its kind and result, a lost lease, and each wait', async () => {
    const own = rig();
    const ns = uniqueNamespace();
    const grant = await own.semaphores.acquire(ns, 'o', { limit: 1, ttlMs: 60_000 });
    await own.semaphores.acquire(ns, 'o', { limit: 1, ttlMs: 60_000 }).catch(() => undefined);
    await own.semaphores.acquire(ns, 'o', { limit: 1, ttlMs: 60_000, waitMs: 20 }).catch(() => undefined);
    await own.semaphores.inspect(ns, 'o');
    await own.semaphores.renew(ns, 'o', grant.ownerToken, 60_000);
    await own.semaphores.release(ns, 'o', grant.ownerToken);
    await own.semaphores.release(ns, 'o', grant.ownerToken).catch(() => undefined);
    await own.semaphores.renew(ns, 'o', grant.ownerToken, 60_000).catch(() => undefined);
    const rw = await own.rwlocks.acquire(ns, 'o', { mode: 'read', ttlMs: 60_000 });
    await own.rwlocks.release(ns, 'o', rw.ownerToken);
    expect(own.events).toEqual([
      'semaphore acquire ok',
      'semaphore acquire semaphore_full',
      'waited false',
      'semaphore acquire semaphore_full',
      'semaphore inspect ok',
      'semaphore renew ok',
      'semaphore release ok',
      'lost release',
      'semaphore release not_owner',
      'lost renew',
      'semaphore renew not_owner',
      'rwlock acquire ok',
      'rwlock release ok',
    ]);
    await own.store.close();
  });
});

describe('read/write locks', () => {
  let r: Rig;
  beforeAll(() => {
    r = rig();
  });
  afterAll(async () => {
    await r.store.close();
  });

  it('many readers at once; a writer is refused while they hold it, with the time left', async () => {
    const ns = uniqueNamespace();
    const r1 = await r.rwlocks.acquire(ns, 'cfg', { mode: 'read', ttlMs: 30_000, holder: 'reader-1' });
    const r2 = await r.rwlocks.acquire(ns, 'cfg', { mode: 'read', ttlMs: 20_000 });
    expect(r2.fencingToken).toBeGreaterThan(r1.fencingToken);
    const refused = await r.rwlocks.acquire(ns, 'cfg', { mode: 'write', ttlMs: 30_000 }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(RwLockHeldError);
    expect(refused).toMatchObject({ key: 'cfg', mode: 'write' });
    expect((refused as RwLockHeldError).retryAfterMs).toBeGreaterThan(10_000);
    expect(await r.rwlocks.inspect(ns, 'cfg')).toEqual({
      mode: 'read',
      holders: [
        {
          mode: 'read',
          holder: 'reader-1',
          fencingToken: r1.fencingToken,
          expiresAtMs: r1.expiresAtMs,
          ttlRemainingMs: expect.any(Number),
        },
        { mode: 'read', holder: null, fencingToken: r2.fencingToken, expiresAtMs: r2.expiresAtMs, ttlRemainingMs: expect.any(Number) },
      ],
      holderCount: 2,
      waiters: 0,
    });
    await r.rwlocks.release(ns, 'cfg', r1.ownerToken);
    await r.rwlocks.release(ns, 'cfg', r2.ownerToken);
    expect(await r.rwlocks.inspect(ns, 'cfg')).toBeNull();
  });

  it('one writer excludes everyone: readers are refused in read mode, and inspect says write', async () => {
    const ns = uniqueNamespace();
    const w = await r.rwlocks.acquire(ns, 'doc', { mode: 'write', ttlMs: 30_000, holder: 'editor' });
    const reader = await r.rwlocks.acquire(ns, 'doc', { mode: 'read', ttlMs: 30_000 }).catch((e: unknown) => e);
    expect(reader).toBeInstanceOf(RwLockHeldError);
    expect(reader).toMatchObject({ key: 'doc', mode: 'read' });
    await expect(r.rwlocks.acquire(ns, 'doc', { mode: 'write', ttlMs: 30_000 })).rejects.toMatchObject({ mode: 'write' });
    expect(await r.rwlocks.inspect(ns, 'doc')).toEqual({
      mode: 'write',
      holders: [
        { mode: 'write', holder: 'editor', fencingToken: w.fencingToken, expiresAtMs: w.expiresAtMs, ttlRemainingMs: expect.any(Number) },
      ],
      holderCount: 1,
      waiters: 0,
    });
    await r.rwlocks.release(ns, 'doc', w.ownerToken);
  });

  it('writers are not starved: a waiting writer holds back later readers, then every reader behind it gets in at once', async () => {
    const ns = uniqueNamespace();
    const r1 = await r.rwlocks.acquire(ns, 'fair', { mode: 'read', ttlMs: 60_000 });
    const writer = r.rwlocks.acquire(ns, 'fair', { mode: 'write', ttlMs: 60_000, waitMs: 20_000 });
    await vi.waitFor(async () => expect((await r.rwlocks.inspect(ns, 'fair'))?.waiters).toBe(1));
    // Read-held, but a writer waits: a new reader that will not wait is refused...
    await expect(r.rwlocks.acquire(ns, 'fair', { mode: 'read', ttlMs: 60_000 })).rejects.toBeInstanceOf(RwLockHeldError);
    // ...and readers that wait queue behind the writer.
    const readers = [1, 2].map(() => r.rwlocks.acquire(ns, 'fair', { mode: 'read', ttlMs: 60_000, waitMs: 20_000 }));
    await vi.waitFor(async () => expect((await r.rwlocks.inspect(ns, 'fair'))?.waiters).toBe(3));
    await r.rwlocks.release(ns, 'fair', r1.ownerToken);
    const w = await writer;
    expect(w.fencingToken).toBeGreaterThan(r1.fencingToken);
    expect(await r.rwlocks.inspect(ns, 'fair')).toMatchObject({ mode: 'write', waiters: 2 });
    await r.rwlocks.release(ns, 'fair', w.ownerToken);
    const both = await Promise.all(readers);
    for (const g of both) expect(g.fencingToken).toBeGreaterThan(w.fencingToken);
    expect(await r.rwlocks.inspect(ns, 'fair')).toMatchObject({ mode: 'read', waiters: 0 });
    for (const g of both) await r.rwlocks.release(ns, 'fair', g.ownerToken);
  });

  it(`at most ${MAX_READERS} readers at once`, async () => {
    expect(RwLockService.refusals.full('k', 5, MAX_READERS).mode).toBe('write');
    expect(RwLockService.refusals.full('k', 5, MAX_READERS - 1).mode).toBe('read');
    expect(RwLockService.refusals.mismatch('k', 1, 2, 5)).toMatchObject({ key: 'k', mode: 'read', retryAfterMs: 5 });
  });
});

describe('the namespace quota counts every lease', () => {
  // Each test builds its own services (not in a hook): the cap is read when they are built.
  let r: Rig;
  /** The store's clock: slots and leases end on it. */
  let clock: FakeClock;
  beforeEach(() => {
    clock = new FakeClock();
    r = rig({ ...LIMITS, maxHeldLocksPerNamespace: 2 }, undefined, clock);
  });
  afterEach(async () => {
    await r.store.close();
  });

  it('a permit or a read lease is refused with quota_exceeded once the namespace holds its cap; release and eviction free slots', async () => {
    const ns = uniqueNamespace();
    const lock = await r.locks.acquire(ns, 'one', 60_000);
    const permit = await r.semaphores.acquire(ns, 'two', { limit: 5, ttlMs: 60_000 });
    const refused = await r.rwlocks.acquire(ns, 'three', { mode: 'read', ttlMs: 60_000 }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(QuotaExceededError);
    expect((refused as QuotaExceededError).maxHeldLocks).toBe(2);
    await expect(r.semaphores.acquire(ns, 'two', { limit: 5, ttlMs: 60_000, waitMs: 1_000 })).rejects.toBeInstanceOf(QuotaExceededError);
    // Nothing was taken by the refused calls.
    expect(await r.rwlocks.inspect(ns, 'three')).toBeNull();
    expect((await r.semaphores.inspect(ns, 'two'))?.permitsHeld).toBe(1);
    // Another namespace has its own cap.
    const other = await r.rwlocks.acquire(uniqueNamespace(), 'three', { mode: 'read', ttlMs: 60_000 });
    expect(other.fencingToken).toBeGreaterThan(0);

    await r.semaphores.release(ns, 'two', permit.ownerToken);
    const read = await r.rwlocks.acquire(ns, 'three', { mode: 'read', ttlMs: 60_000 });
    await expect(r.semaphores.acquire(ns, 'two', { limit: 5, ttlMs: 60_000 })).rejects.toBeInstanceOf(QuotaExceededError);
    expect(await r.cores.rwlocks.forceRelease(ns, 'three')).toHaveLength(1);
    const waited = await r.semaphores.acquire(ns, 'two', { limit: 5, ttlMs: 60_000, waitMs: 1_000 });
    await expect(r.rwlocks.acquire(ns, 'three', { mode: 'read', ttlMs: 60_000 })).rejects.toBeInstanceOf(QuotaExceededError);
    await r.semaphores.release(ns, 'two', waited.ownerToken);
    await r.locks.release(ns, 'one', lock.ownerToken);
    expect(read.fencingToken).toBeGreaterThan(0);
  });

  it('a renewed permit still counts after the end of the slot its grant reserved', async () => {
    const ns = uniqueNamespace();
    const grant = await r.semaphores.acquire(ns, 'long', { limit: 5, ttlMs: 200 });
    await r.semaphores.renew(ns, 'long', grant.ownerToken, 60_000);
    const heldTwo = await r.semaphores.acquire(ns, 'long', { limit: 5, ttlMs: 60_000 });
    // Past the first grant's slot (200 ms + the 1 s margin), within the renewed lease.
    clock.advance(5_000);
    await expect(r.semaphores.acquire(ns, 'long', { limit: 5, ttlMs: 60_000 })).rejects.toBeInstanceOf(QuotaExceededError);
    await r.semaphores.release(ns, 'long', grant.ownerToken);
    await r.semaphores.release(ns, 'long', heldTwo.ownerToken);
  });
});

describe('blocking queries on a semaphore or read/write lock', () => {
  let r: Rig;
  beforeAll(() => {
    r = rig();
  });
  afterAll(async () => {
    await r.store.close();
  });

  it('answers at once without an index or with waitMs 0; otherwise when the key changes, or after waitMs unchanged', async () => {
    const ns = uniqueNamespace();
    const core = r.cores.semaphores;
    const free = await core.watch(ns, 'w', undefined, 10_000);
    expect(free.state).toBeNull();
    expect(await core.watch(ns, 'w', free.index, 0)).toEqual(free);
    expect(await core.watch(ns, 'w', free.index + 1, 10_000)).toEqual(free);
    const woken = core.watch(ns, 'w', free.index, 10_000);
    await sleep(20);
    const grant = await r.semaphores.acquire(ns, 'w', { limit: 1, ttlMs: 60_000 });
    const view = await woken;
    expect(view.index).toBeGreaterThan(free.index);
    expect(view.state?.holders.map((h) => h.fencingToken)).toEqual([grant.fencingToken]);
    const started = performance.now();
    const unchanged = await core.watch(ns, 'w', view.index, 150);
    expect(performance.now() - started).toBeGreaterThanOrEqual(145);
    expect(unchanged.index).toBe(view.index);
    // The other kind's key of the same name is another key.
    expect((await r.cores.rwlocks.watch(ns, 'w', undefined, 0)).state).toBeNull();
    await expect(core.watch(ns, 'w', 1, LIMITS.maxWaitMs + 1)).rejects.toBeInstanceOf(InvalidRequestError);
    await r.semaphores.release(ns, 'w', grant.ownerToken);
  });

  it('only answers given at once are timed as inspects: without an index, or with waitMs 0; a real wait is not', async () => {
    const own = rig();
    const ns = uniqueNamespace();
    const free = await own.cores.semaphores.watch(ns, 'w', undefined, 10_000);
    expect(own.events).toEqual(['semaphore inspect ok']);
    await own.cores.semaphores.watch(ns, 'w', free.index, 0);
    expect(own.events).toEqual(['semaphore inspect ok', 'semaphore inspect ok']);
    expect((await own.cores.semaphores.watch(ns, 'w', free.index, 30)).index).toBe(free.index);
    expect(own.events).toEqual(['semaphore inspect ok', 'semaphore inspect ok']);
    await own.store.close();
  });

  it('a caller leaving or a shutdown ends the wait', async () => {
    const own = rig();
    const ns = uniqueNamespace();
    const free = await own.cores.rwlocks.watch(ns, 'w', undefined, 0);
    const caller = new AbortController();
    const leaving = own.cores.rwlocks.watch(ns, 'w', free.index, 10_000, caller.signal);
    await sleep(20);
    caller.abort(new WaitAbortedError());
    await expect(leaving).rejects.toBeInstanceOf(WaitAbortedError);
    const closing = own.cores.rwlocks.watch(ns, 'w', free.index, 10_000);
    await sleep(20);
    own.locks.shutdown();
    await expect(closing).rejects.toBeInstanceOf(ShuttingDownError);
    // Shut down: a caller asking to wait is refused at once.
    await expect(own.semaphores.acquire(ns, 's', { limit: 1, ttlMs: 1_000, waitMs: 1_000 })).rejects.toBeInstanceOf(ShuttingDownError);
    await own.store.close();
  });
});

describe('late grants and stores without permits', () => {
  it('a grant that arrives too late to trust is given back, a late renewal kept; both reported as store_unavailable', async () => {
    // The store is what is slow here; this process's own hold-ups are pinned at none (a busy test host
    // would otherwise have some, and a late grant is then its own overload: freshness.test.ts covers that split).
    const lag = vi.spyOn(ownLag, 'heldUpBetween').mockReturnValue(0);
    onTestFinished(() => lag.mockRestore());
    const delay = { ms: 0 };
    // Only the permits' steps are slow (a lock's are the store's own).
    const own = rig(LIMITS, (memory) =>
      withLeases(memory, (leases) => ({
        acquire: async (request) => {
          const outcome = await leases.acquire(request);
          if (request.kind !== 'lock') await sleep(delay.ms);
          return outcome;
        },
        renew: async (kind, ...args) => {
          const outcome = await leases.renew(kind, ...args);
          if (kind !== 'lock') await sleep(delay.ms);
          return outcome;
        },
      })),
    );
    const ns = uniqueNamespace();
    delay.ms = 60;
    // 60 ms late on a 100 ms lease: more than half of it may be gone.
    await expect(own.semaphores.acquire(ns, 'late', { limit: 2, ttlMs: 100 })).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(await own.semaphores.inspect(ns, 'late')).toBeNull();
    await expect(own.rwlocks.acquire(ns, 'late', { mode: 'write', ttlMs: 100, waitMs: 1_000 })).rejects.toBeInstanceOf(
      StoreUnavailableError,
    );
    expect(await own.rwlocks.inspect(ns, 'late')).toBeNull();
    // The same delay on a long lease is fine; a late renewal (600 ms of a 1 s lease) is not reported, and
    // its permit is kept: it was the holder's already, and stays until the end the renewal gave it.
    const grant = await own.semaphores.acquire(ns, 'late', { limit: 2, ttlMs: 30_000 });
    delay.ms = 600;
    await expect(own.semaphores.renew(ns, 'late', grant.ownerToken, 1_000)).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(await own.semaphores.inspect(ns, 'late')).not.toBeNull();
    delay.ms = 0;
    await own.semaphores.release(ns, 'late', grant.ownerToken);
    // The last check as the answer leaves: a grant decided long ago is given back.
    delay.ms = 0;
    const fresh = await own.semaphores.acquire(ns, 'late', { limit: 2, ttlMs: 200 });
    await own.cores.semaphores.confirmFresh(ns, { key: 'late', ownerToken: fresh.ownerToken, ttlMs: 200, decidedAt: performance.now() });
    await expect(
      own.cores.semaphores.confirmFresh(ns, { key: 'late', ownerToken: fresh.ownerToken, ttlMs: 200, decidedAt: performance.now() - 150 }),
    ).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(await own.semaphores.inspect(ns, 'late')).toBeNull();
    await own.store.close();
  });

  it('the services work without an observer', async () => {
    const store = new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0 });
    const locks = new LockService(store, LIMITS);
    const cores = createPermitCores(store, LIMITS, locks.waitGate);
    const semaphores = new SemaphoreService(cores.semaphores);
    const ns = uniqueNamespace();
    const grant = await semaphores.acquire(ns, 'k', { limit: 1, ttlMs: 1_000 });
    await expect(semaphores.acquire(ns, 'k', { limit: 1, ttlMs: 1_000 })).rejects.toBeInstanceOf(SemaphoreFullError);
    expect((await cores.semaphores.watch(ns, 'k', undefined, 0)).state?.holders).toHaveLength(1);
    await semaphores.release(ns, 'k', grant.ownerToken);
    await expect(semaphores.release(ns, 'k', grant.ownerToken)).rejects.toBeInstanceOf(NotOwnerError);
    await store.close();
  });
});
