import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi, onTestFinished } from 'vitest';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { ownLag } from '../../src/domain/own-lag.js';
import {
  InvalidRequestError,
  LockHeldError,
  NotOwnerError,
  QuotaExceededError,
  ShuttingDownError,
  StoreUnavailableError,
  WaitAbortedError,
} from '../../src/domain/errors.js';
import type { LeaseLimits } from '../../src/domain/limits.js';
import { type LockGrant, LockService } from '../../src/domain/lock-service.js';
import { LockSetService, MAX_LOCK_SET_KEYS } from '../../src/domain/lock-sets.js';
import type { Store } from '../../src/domain/lease-store.js';
import { withLeases } from '../helpers/with-leases.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import { FakeClock } from '../helpers/fake-clock.js';
// The embedded store's own clock, which parts from Date.now() while the system clock is slewed.
import { monotonicWallClock } from '../../src/store/shared/clock.js';

/**
 * Lock sets as the service promises them, over the embedded store in this process: all or none, one
 * owner token for every key, each key's own fencing token in the order asked, the bounds on a set,
 * waiting that wakes when the busy key changes (no polling) and gives up at waitMs, and one quota
 * slot per key that is never left behind by a refused set.
 */
const LIMITS: LeaseLimits = { ...DEFAULT_LIMITS, minTtlMs: 1, maxLockDelayMs: 5_000 };
const uniqueNamespace = () => `ns-${randomUUID().slice(0, 8)}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The embedded store, with its lock-set steps counted (a waiting set must not poll). */
function countedStore(memory: MemoryStore, delayMs = 0, afterRefusal?: () => Promise<void>): { store: Store; attempts: () => number } {
  let attempts = 0;
  const store = withLeases(memory, (own) => ({
    acquire: async (request) => {
      // Only the sets' acquires (several keys) are counted and delayed.
      if (request.ids.length < 2) return own.acquire(request);
      attempts++;
      const outcome = await own.acquire(request);
      if (!outcome.acquired) await afterRefusal?.();
      // A store that answers late (a stalled network): the grant may be stale when it arrives.
      if (delayMs > 0) await sleep(delayMs);
      return outcome;
    },
  }));
  return { store, attempts: () => attempts };
}

describe('lock sets', () => {
  let memory: MemoryStore;
  let store: Store;
  let attempts: () => number;
  let locks: LockService;
  let sets: LockSetService;

  beforeAll(() => {
    memory = new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0 });
    ({ store, attempts } = countedStore(memory));
    locks = new LockService(store, LIMITS);
    sets = new LockSetService(store, LIMITS, locks);
  });
  afterAll(async () => {
    await memory.close();
  });

  it('grants every key under one owner token, each with its own fencing token, in the order asked', async () => {
    const ns = uniqueNamespace();
    const before = monotonicWallClock();
    const grant = await sets.acquire(ns, ['b', 'c', 'a'], 30_000, { holder: 'transfer-1' });
    expect(grant.ownerToken).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(grant.ttlMs).toBe(30_000);
    expect(grant.holder).toBe('transfer-1');
    expect(grant.expiresAtMs).toBeGreaterThanOrEqual(before + 30_000 - 1);
    expect(grant.expiresAtMs).toBeLessThanOrEqual(monotonicWallClock() + 30_000 + 1);
    expect(grant.locks.map((l) => l.key)).toEqual(['b', 'c', 'a']);
    for (const { key, fencingToken } of grant.locks) {
      const state = await locks.inspect(ns, key);
      expect(state).toMatchObject({ holder: 'transfer-1', fencingToken });
    }
    // Each key is a lock of its own: a plain acquire of one is refused, in the same namespace only.
    await expect(locks.acquire(ns, 'c', 1_000)).rejects.toBeInstanceOf(LockHeldError);
    const elsewhere = await locks.acquire(uniqueNamespace(), 'c', 1_000);
    expect(elsewhere.fencingToken).toBeGreaterThan(0);
    // The lease ends for the whole set with one release, and every key is free.
    await sets.release(ns, ['a', 'b', 'c'], grant.ownerToken);
    for (const key of ['a', 'b', 'c']) expect(await locks.inspect(ns, key)).toBeNull();
  });

  it('without a holder the set is held by nobody in particular (null)', async () => {
    const ns = uniqueNamespace();
    const grant = await sets.acquire(ns, ['x'], 30_000);
    expect(grant.holder).toBeNull();
    expect((await locks.inspect(ns, 'x'))?.holder).toBeNull();
    await sets.release(ns, ['x'], grant.ownerToken);
  });

  it('all or none: one busy key refuses the whole set, names that key, and takes nothing', async () => {
    const ns = uniqueNamespace();
    const single = await locks.acquire(ns, 'm', 30_000);
    const refused = await sets.acquire(ns, ['z', 'm', 'a'], 30_000).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(LockHeldError);
    expect((refused as LockHeldError).key).toBe('m');
    expect((refused as LockHeldError).retryAfterMs).toBeGreaterThan(25_000);
    for (const key of ['z', 'a']) expect(await locks.inspect(ns, key)).toBeNull();
    await locks.release(ns, 'm', single.ownerToken);
  });

  it('renew extends every key under the same tokens, answered in the order asked; another token is not_owner', async () => {
    const ns = uniqueNamespace();
    const grant = await sets.acquire(ns, ['q', 'p'], 1_000);
    const renewed = await sets.renew(ns, ['p', 'q'], grant.ownerToken, 60_000);
    const token = (key: string) => grant.locks.find((l) => l.key === key)?.fencingToken;
    expect(renewed.locks).toEqual([
      { key: 'p', fencingToken: token('p') },
      { key: 'q', fencingToken: token('q') },
    ]);
    expect(renewed.ttlMs).toBe(60_000);
    expect(renewed.expiresAtMs).toBeGreaterThan(grant.expiresAtMs + 50_000);
    expect((await locks.inspect(ns, 'p'))?.ttlRemainingMs).toBeGreaterThan(50_000);
    const wrong = await sets.renew(ns, ['p', 'q'], 'x'.repeat(22), 60_000).catch((e: unknown) => e);
    expect(wrong).toBeInstanceOf(NotOwnerError);
    expect((wrong as NotOwnerError).key).toBe('p,q');
    await expect(sets.renew(ns, ['p', 'q'], grant.ownerToken, 0)).rejects.toBeInstanceOf(InvalidRequestError);
    await sets.release(ns, ['q', 'p'], grant.ownerToken);
    // Released: the token holds nothing any more.
    await expect(sets.release(ns, ['q', 'p'], grant.ownerToken)).rejects.toBeInstanceOf(NotOwnerError);
    await expect(sets.renew(ns, ['q', 'p'], grant.ownerToken, 1_000)).rejects.toBeInstanceOf(NotOwnerError);
  });

  it('a set holds 1 to 16 distinct keys; outside that, or a bad TTL, wait or lock-delay, is invalid and takes nothing', async () => {
    const ns = uniqueNamespace();
    const keys = (n: number) => Array.from({ length: n }, (_v, i) => `k${i}`);
    const invalid = async (run: () => Promise<unknown>, field: string) => {
      const err = await run().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InvalidRequestError);
      expect((err as InvalidRequestError).field).toBe(field);
    };
    await invalid(() => sets.acquire(ns, [], 1_000), 'keys');
    await invalid(() => sets.acquire(ns, keys(MAX_LOCK_SET_KEYS + 1), 1_000), 'keys');
    await invalid(() => sets.acquire(ns, ['a', 'b', 'a'], 1_000), 'keys');
    await invalid(() => sets.release(ns, ['a', 'a'], 'x'.repeat(22)), 'keys');
    await invalid(() => sets.renew(ns, [], 'x'.repeat(22), 1_000), 'keys');
    await invalid(() => sets.acquire(ns, ['a'], 0), 'ttlMs');
    await invalid(() => sets.acquire(ns, ['a'], 1_000, { waitMs: -1 }), 'waitMs');
    await invalid(() => sets.acquire(ns, ['a'], 1_000, { waitMs: LIMITS.maxWaitMs + 1 }), 'waitMs');
    await invalid(() => sets.acquire(ns, ['a'], 1_000, { lockDelayMs: 5_001 }), 'lockDelayMs');
    for (const key of [...keys(MAX_LOCK_SET_KEYS + 1), 'a', 'b']) expect(await locks.inspect(ns, key)).toBeNull();
    // The bounds themselves are allowed: 16 keys, and 1.
    const full = await sets.acquire(ns, keys(MAX_LOCK_SET_KEYS), 1_000);
    expect(full.locks).toHaveLength(MAX_LOCK_SET_KEYS);
    await sets.release(ns, keys(MAX_LOCK_SET_KEYS), full.ownerToken);
    const one = await sets.acquire(ns, ['only'], 1_000);
    await sets.release(ns, ['only'], one.ownerToken);
  });

  it('a lock-delay asked for with the set keeps each key unavailable after the set expires', async () => {
    const ns = uniqueNamespace();
    await sets.acquire(ns, ['d1', 'd2'], 50, { lockDelayMs: 5_000 });
    await vi.waitFor(async () => expect(await locks.inspect(ns, 'd2')).toBeNull(), { timeout: 5_000, interval: 20 });
    await expect(locks.acquire(ns, 'd2', 1_000)).rejects.toBeInstanceOf(LockHeldError);
    await expect(sets.acquire(ns, ['d1'], 1_000)).rejects.toBeInstanceOf(LockHeldError);
  });

  describe('waiting', () => {
    it('a waiting set is granted as soon as the busy key is released, without asking again in between', async () => {
      const ns = uniqueNamespace();
      const single = await locks.acquire(ns, 'b', 60_000);
      const before = attempts();
      const waiting = sets.acquire(ns, ['a', 'b'], 30_000, { waitMs: 20_000 });
      await vi.waitFor(() => expect(locks.changes.size).toBe(1));
      // Refused once, then asleep on the busy key: no polling.
      await sleep(100);
      expect(attempts()).toBe(before + 1);
      await locks.release(ns, 'b', single.ownerToken);
      const grant = await waiting;
      expect(attempts()).toBe(before + 2);
      expect(grant.locks[1]?.fencingToken).toBeGreaterThan(single.fencingToken);
      await sets.release(ns, ['a', 'b'], grant.ownerToken);
    });

    it('a waiting set wakes when the busy lease ends by itself, and when a lock-delay ends', async () => {
      const ns = uniqueNamespace();
      await locks.acquire(ns, 'e', 300);
      const grant = await sets.acquire(ns, ['e', 'f'], 30_000, { waitMs: 20_000 });
      expect(grant.locks).toHaveLength(2);
      await sets.release(ns, ['e', 'f'], grant.ownerToken);

      await locks.acquire(ns, 'g', 50, { lockDelayMs: 400 });
      await vi.waitFor(async () => expect(await locks.inspect(ns, 'g')).toBeNull(), { timeout: 5_000, interval: 10 });
      const before = attempts();
      const delayed = await sets.acquire(ns, ['g'], 30_000, { waitMs: 20_000 });
      // Asleep through the delay, not asking again and again.
      expect(attempts() - before).toBeLessThanOrEqual(4);
      await sets.release(ns, ['g'], delayed.ownerToken);
    });

    it('a busy key freed just after the refusal is asked for again at once, not after the wait', async () => {
      const mem = new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0 });
      const ns = uniqueNamespace();
      let single: { ownerToken: string } | undefined;
      // The busy key's holder lets go between the refusal and the set's next look at the key.
      const racing = countedStore(mem, 0, async () => {
        if (single) await own.release(ns, 'r', single.ownerToken);
        single = undefined;
      });
      const own = new LockService(racing.store, LIMITS);
      const ownSets = new LockSetService(racing.store, LIMITS, own);
      single = await own.acquire(ns, 'r', 60_000);
      // Asleep until a change that never comes, it would not be granted before the test's time-out.
      const grant = await ownSets.acquire(ns, ['r', 's'], 30_000, { waitMs: 60_000 });
      expect(racing.attempts()).toBe(2);
      await ownSets.release(ns, ['r', 's'], grant.ownerToken);
      await mem.close();
    });

    it('gives up with lock_held once waitMs has passed, not before', async () => {
      const ns = uniqueNamespace();
      const single = await locks.acquire(ns, 'h', 60_000);
      const started = performance.now();
      const err = await sets.acquire(ns, ['h', 'i'], 30_000, { waitMs: 300 }).catch((e: unknown) => e);
      expect(performance.now() - started).toBeGreaterThanOrEqual(295);
      expect(err).toBeInstanceOf(LockHeldError);
      expect((err as LockHeldError).key).toBe('h');
      expect(await locks.inspect(ns, 'i')).toBeNull();
      await locks.release(ns, 'h', single.ownerToken);
    });

    it('a caller that leaves ends its wait; nothing is taken', async () => {
      const ns = uniqueNamespace();
      const single = await locks.acquire(ns, 'j', 60_000);
      const caller = new AbortController();
      const waiting = sets.acquire(ns, ['j', 'k'], 30_000, { waitMs: 20_000, signal: caller.signal }).catch((e: unknown) => e);
      await vi.waitFor(() => expect(locks.changes.size).toBe(1));
      caller.abort(new WaitAbortedError());
      expect(await waiting).toBeInstanceOf(WaitAbortedError);
      await locks.release(ns, 'j', single.ownerToken);
      expect(await locks.inspect(ns, 'k')).toBeNull();
      expect(await locks.inspect(ns, 'j')).toBeNull();
    });
  });

  it('shutdown ends a waiting set, and a set that would wait is refused at once after it', async () => {
    const mem = new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0 });
    const own = new LockService(mem, LIMITS);
    const ownSets = new LockSetService(mem, LIMITS, own);
    const ns = uniqueNamespace();
    const single = await own.acquire(ns, 's', 60_000);
    const waiting = ownSets.acquire(ns, ['s', 't'], 30_000, { waitMs: 20_000 }).catch((e: unknown) => e);
    await vi.waitFor(() => expect(own.changes.size).toBe(1));
    own.shutdown();
    expect(await waiting).toBeInstanceOf(ShuttingDownError);
    expect(await ownSets.acquire(ns, ['s'], 30_000, { waitMs: 20_000 }).catch((e: unknown) => e)).toBeInstanceOf(ShuttingDownError);
    // A set that does not wait is answered as before.
    expect(await ownSets.acquire(ns, ['s'], 30_000).catch((e: unknown) => e)).toBeInstanceOf(LockHeldError);
    await own.release(ns, 's', single.ownerToken);
    await mem.close();
  });

  it('a grant that arrives too late to trust is given back and reported as store_unavailable', async () => {
    // The store is what is slow here; this process's own hold-ups are pinned at none (a busy test host
    // would otherwise have some, and a late grant is then its own overload: freshness.test.ts covers that split).
    const lag = vi.spyOn(ownLag, 'heldUpBetween').mockReturnValue(0);
    onTestFinished(() => lag.mockRestore());
    const mem = new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0 });
    const slow = countedStore(mem, 60);
    const own = new LockService(slow.store, LIMITS);
    const ownSets = new LockSetService(slow.store, LIMITS, own);
    const ns = uniqueNamespace();
    // 60 ms late on a 100 ms lease: more than half of it may be gone.
    await expect(ownSets.acquire(ns, ['l1', 'l2'], 100)).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(await own.inspect(ns, 'l1')).toBeNull();
    expect(await own.inspect(ns, 'l2')).toBeNull();
    // The same delay on a long lease is fine.
    const grant = await ownSets.acquire(ns, ['l1', 'l2'], 30_000);
    const renewed = await ownSets.renew(ns, ['l2', 'l1'], grant.ownerToken, 60_000);
    expect(renewed.locks.map((l) => l.fencingToken)).toEqual([grant.locks[1]?.fencingToken, grant.locks[0]?.fencingToken]);
    await ownSets.release(ns, ['l1', 'l2'], grant.ownerToken);
    await mem.close();
  });
});

describe('lock sets and the namespace quota: one slot per key', () => {
  const CAP = 3;
  let clock: FakeClock;
  let memory: MemoryStore;
  let locks: LockService;
  let sets: LockSetService;

  beforeAll(() => {
    clock = new FakeClock();
    memory = new MemoryStore({ fenceGraceMs: 600_000, sweepIntervalMs: 0, clock: clock.now });
    const limits = { ...LIMITS, maxHeldLocksPerNamespace: CAP };
    locks = new LockService(memory, limits);
    sets = new LockSetService(memory, limits, locks);
  });
  afterAll(async () => {
    await memory.close();
  });

  /** How many more single locks the namespace may take now (each is released again). */
  const room = async (ns: string): Promise<number> => {
    const taken: LockGrant[] = [];
    for (;;) {
      const grant: unknown = await locks.acquire(ns, `probe-${taken.length}`, 60_000).catch((e: unknown) => e);
      if (grant instanceof QuotaExceededError) break;
      if (grant instanceof Error) throw grant;
      taken.push(grant as LockGrant);
    }
    for (const g of taken) await locks.release(ns, g.key, g.ownerToken);
    return taken.length;
  };

  it('without a cap (0 or none configured) a set takes no slot: a namespace may hold any number of keys', async () => {
    const mem = new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0 });
    for (const limits of [
      { ...LIMITS, maxHeldLocksPerNamespace: 0 },
      { ...LIMITS, maxHeldLocksPerNamespace: undefined },
    ]) {
      const own = new LockSetService(mem, limits, new LockService(mem, limits));
      const ns = uniqueNamespace();
      const keys = Array.from({ length: MAX_LOCK_SET_KEYS }, (_v, i) => `k${i}`);
      const grant = await own.acquire(ns, keys, 60_000);
      const waited = await own.acquire(ns, ['w'], 60_000, { waitMs: 1_000 });
      await own.renew(ns, keys, grant.ownerToken, 60_000);
      await own.release(ns, keys, grant.ownerToken);
      await own.release(ns, ['w'], waited.ownerToken);
    }
    await mem.close();
  });

  it('a set takes one slot per key; a set over the cap is refused whole and gives back the slots it took', async () => {
    const ns = uniqueNamespace();
    const grant = await sets.acquire(ns, ['a', 'b'], 60_000);
    expect(await room(ns)).toBe(1);
    const err = await sets.acquire(ns, ['c', 'd'], 60_000).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(QuotaExceededError);
    expect((err as QuotaExceededError).maxHeldLocks).toBe(CAP);
    expect((err as QuotaExceededError).retryAfterMs).toBeGreaterThan(0);
    expect(await locks.inspect(ns, 'c')).toBeNull();
    // The refused set's first slot was given back: one is still free.
    expect(await room(ns)).toBe(1);
    await sets.release(ns, ['a', 'b'], grant.ownerToken);
    expect(await room(ns)).toBe(CAP);
  });

  it('a set refused because a key is busy gives back every slot it took', async () => {
    const ns = uniqueNamespace();
    const single = await locks.acquire(ns, 'busy', 60_000);
    await expect(sets.acquire(ns, ['busy', 'x'], 60_000)).rejects.toBeInstanceOf(LockHeldError);
    expect(await room(ns)).toBe(CAP - 1);
    await locks.release(ns, 'busy', single.ownerToken);
  });

  it('a renewed set keeps its slots past the end of the ones its grant reserved', async () => {
    const ns = uniqueNamespace();
    const grant = await sets.acquire(ns, ['r1', 'r2'], 1_000);
    await sets.renew(ns, ['r1', 'r2'], grant.ownerToken, 600_000);
    // Well past the grant's lease and its slots' margin: the renewed lease and both its slots count.
    clock.advance(60_000);
    expect((await locks.inspect(ns, 'r1'))?.fencingToken).toBe(grant.locks[0]?.fencingToken);
    expect(await room(ns)).toBe(1);
    await sets.release(ns, ['r1', 'r2'], grant.ownerToken);
  });

  it('a set that waits holds its slots for its wait and lease together', async () => {
    const ns = uniqueNamespace();
    const single = await locks.acquire(ns, 'w1', 600_000);
    const waiting = sets.acquire(ns, ['w1', 'w2'], 1_000, { waitMs: 20_000 }).catch((e: unknown) => e);
    await vi.waitFor(() => expect(locks.changes.size).toBe(1));
    // Later than the set's lease alone (plus margin), within its wait and lease: the slots still count.
    clock.advance(5_000);
    expect(await room(ns)).toBe(0);
    await locks.release(ns, 'w1', single.ownerToken);
    const grant = await waiting;
    if (grant instanceof Error) throw grant;
    await sets.release(ns, ['w1', 'w2'], (grant as { ownerToken: string }).ownerToken);
    expect(await room(ns)).toBe(CAP);
  });
});
