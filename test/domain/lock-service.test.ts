import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { DEFAULT_LIMITS } from '../../src/config.js';
import {
  InvalidRequestError,
  LockHeldError,
  NotOwnerError,
  OverloadedError,
  QuotaExceededError,
  StoreUnavailableError,
  WaitAbortedError,
} from '../../src/domain/errors.js';
import { ownLag } from '../../src/domain/own-lag.js';
import { LockService, type LockGrant } from '../../src/domain/lock-service.js';
import { LockSetService } from '../../src/domain/lock-sets.js';
import { QUOTA_SLOT_MARGIN_MS } from '../../src/domain/quota.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import type { Store } from '../../src/domain/lease-store.js';
import { withLeases } from '../helpers/with-leases.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { RedisServer } from '../helpers/redis-server.js';
import { openRedisStore } from '../helpers/redis-store.js';

/**
 * The lock service's own promises, on every store: a namespace quota that a waiting caller or a renew
 * cannot slip past, and a lease handed to a caller that has just left is given straight back.
 */
let redis: RedisServer;

beforeAll(async () => {
  redis = await RedisServer.startShared();
});
afterAll(async () => {
  await redis.stop();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const uniqueNamespace = () => `ns-${randomUUID().slice(0, 8)}`;

const STORES: ReadonlyArray<{ name: string; open: () => Promise<Store> }> = [
  { name: 'embedded (memory)', open: async () => new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0 }) },
  { name: 'redis', open: () => openRedisStore(redis, { keyPrefix: 'service:' }) },
];

describe.each(STORES)('lock service over $name', ({ open }) => {
  let store: Store;
  let locks: LockService;
  /** A cap of 2 (lock sets' tests). */
  let locks2: LockService;

  beforeAll(async () => {
    store = await open();
    locks = new LockService(store, { ...DEFAULT_LIMITS, maxHeldLocksPerNamespace: 1 });
    locks2 = new LockService(store, { ...DEFAULT_LIMITS, maxHeldLocksPerNamespace: 2 });
  });
  afterAll(async () => {
    await store.close();
  });

  it('quota: a release of a key its token does not hold (409) frees no slot of the lease that token holds', async () => {
    const ns = uniqueNamespace();
    const held = await locks.acquire(ns, 'a', 60_000);
    for (let i = 0; i < 3; i++) await expect(locks.release(ns, `not-mine-${i}`, held.ownerToken)).rejects.toBeInstanceOf(NotOwnerError);
    // 'a' is still held and still counted: the cap of one is reached.
    await expect(locks.acquire(ns, 'b', 60_000)).rejects.toBeInstanceOf(QuotaExceededError);
    await locks.release(ns, 'a', held.ownerToken);
    await locks.release(ns, 'b', (await locks.acquire(ns, 'b', 60_000)).ownerToken);
  });

  it('quota: a lease whose release failed after its slot was freed (the lease lives on) counts again from its next renew', async () => {
    const ns = uniqueNamespace();
    // The release and the slot's give-back go out together (NamespaceQuota.releaseWith): here the
    // release fails (store_unavailable) and the give-back does not, so the lease lives on without its slot.
    let failRelease = false;
    const leases = store.leases;
    const host = {
      leases: Object.assign(Object.create(leases) as typeof leases, {
        release: (...args: Parameters<typeof leases.release>) =>
          failRelease ? Promise.reject(new StoreUnavailableError('the release failed')) : leases.release(...args),
      }),
    };
    const capped = new LockService(host, { ...DEFAULT_LIMITS, maxHeldLocksPerNamespace: 1 });
    const held = await capped.acquire(ns, 'a', 60_000);
    failRelease = true;
    await expect(capped.release(ns, 'a', held.ownerToken)).rejects.toBeInstanceOf(StoreUnavailableError);
    failRelease = false;
    expect((await capped.inspect(ns, 'a'))?.fencingToken).toBe(held.fencingToken);
    // Its renewal counts it again: the cap of one is reached.
    await capped.renew(ns, 'a', held.ownerToken, 60_000);
    await expect(capped.acquire(ns, 'b', 60_000)).rejects.toBeInstanceOf(QuotaExceededError);
    await capped.release(ns, 'a', held.ownerToken);
    await capped.release(ns, 'b', (await capped.acquire(ns, 'b', 60_000)).ownerToken);
  });

  it('quota: a lock set counts one slot per key it holds; a release or renew naming other keys moves no slot of the set', async () => {
    const ns = uniqueNamespace();
    const sets = new LockSetService(store, { ...DEFAULT_LIMITS, maxHeldLocksPerNamespace: 2 }, locks2);
    const set = await sets.acquire(ns, ['a', 'b'], 60_000);
    // Releasing 'a' and a key the set never held frees a's slot only: b still counts, so one more fits, not two.
    await sets.release(ns, ['a', 'zzz'], set.ownerToken);
    const c = await locks2.acquire(ns, 'c', 60_000);
    await expect(locks2.acquire(ns, 'd', 60_000)).rejects.toBeInstanceOf(QuotaExceededError);
    // A renew of the set's key through the lock route extends that key's slot (the set's), so b keeps counting.
    await locks2.renew(ns, 'b', set.ownerToken, 60_000);
    await expect(locks2.acquire(ns, 'd', 60_000)).rejects.toBeInstanceOf(QuotaExceededError);
    await locks2.release(ns, 'c', c.ownerToken);
    await sets.release(ns, ['b'], set.ownerToken);
  });

  it('quota: a caller that waits takes a slot, so nobody else in its namespace gets past the cap', async () => {
    const ns = uniqueNamespace();
    // Granted at once (the key is free), but asked with waitMs: it must still count against the cap.
    const waited = await locks.acquire(ns, 'a', 5_000, { waitMs: 1_000 });
    await expect(locks.acquire(ns, 'b', 5_000)).rejects.toBeInstanceOf(QuotaExceededError);
    await expect(locks.acquire(ns, 'c', 5_000, { waitMs: 1_000 })).rejects.toBeInstanceOf(QuotaExceededError);
    // Its release gives the slot back at once.
    await locks.release(ns, 'a', waited.ownerToken);
    const next = await locks.acquire(ns, 'b', 5_000, { waitMs: 1_000 });
    await locks.release(ns, 'b', next.ownerToken);
  });

  it('quota: an idempotent retry at the cap gets its lease back; a new acquire there is refused', async () => {
    const ns = uniqueNamespace();
    const idempotency = { callerId: 'caller-1', key: 'retry-1' };
    const first = await locks.acquire(ns, 'a', 5_000, { idempotency });
    // The namespace is at its cap of one, held by the first answer (which the caller never saw).
    for (const waitMs of [0, 1_000]) {
      const again = await locks.acquire(ns, 'a', 5_000, { idempotency, waitMs });
      expect(again).toMatchObject({ ownerToken: first.ownerToken, fencingToken: first.fencingToken });
    }
    await expect(locks.acquire(ns, 'b', 5_000, { idempotency: { callerId: 'caller-1', key: 'retry-2' } })).rejects.toBeInstanceOf(
      QuotaExceededError,
    );
    // Another caller's same key is not a replay: refused (the lock is held, and the namespace full).
    const other = await locks.acquire(ns, 'a', 5_000, { idempotency: { callerId: 'caller-2', key: 'retry-1' } }).catch((e: unknown) => e);
    expect(other instanceof QuotaExceededError || other instanceof LockHeldError).toBe(true);
    await locks.release(ns, 'a', first.ownerToken);
    // Nothing was left behind by the refused calls: the cap's one lease is free again.
    const next = await locks.acquire(ns, 'b', 5_000);
    await locks.release(ns, 'b', next.ownerToken);
  });

  it('quota: a caller queued behind a held lock holds a slot while it waits', async () => {
    const ns = uniqueNamespace();
    const capTwo = new LockService(store, { ...DEFAULT_LIMITS, maxHeldLocksPerNamespace: 2 });
    const holder = await capTwo.acquire(ns, 'a', 60_000);
    const caller = new AbortController();
    const waiting = capTwo.acquire(ns, 'a', 5_000, { waitMs: 10_000, signal: caller.signal }).catch((err: unknown) => err);
    await vi.waitFor(async () => expect((await capTwo.inspect(ns, 'a'))?.waiters).toBe(1), { timeout: 10_000 });
    // The holder and the queued caller fill the cap of two.
    await expect(capTwo.acquire(ns, 'b', 5_000)).rejects.toBeInstanceOf(QuotaExceededError);
    caller.abort();
    await waiting;
    await capTwo.release(ns, 'a', holder.ownerToken);
  });

  it('quota: a renewed lease still counts after the end of the slot its grant reserved', async () => {
    const ns = uniqueNamespace();
    const ttlMs = 1_000;
    const grant = await locks.acquire(ns, 'a', ttlMs);
    // The grant's slot was reserved before this moment, so it ends by now + ttl + margin at the latest.
    const originalQuotaSlotEndsBy = Date.now() + ttlMs + QUOTA_SLOT_MARGIN_MS;
    const renewed = await locks.renew(ns, 'a', grant.ownerToken, 60_000);
    await sleep(originalQuotaSlotEndsBy + 100 - Date.now());
    // The renewed lease is still held, and its slot with it.
    expect((await locks.inspect(ns, 'a'))?.fencingToken).toBe(renewed.fencingToken);
    await expect(locks.acquire(ns, 'b', 5_000)).rejects.toBeInstanceOf(QuotaExceededError);
    await locks.release(ns, 'a', grant.ownerToken);
    const next = await locks.acquire(ns, 'b', 5_000);
    await locks.release(ns, 'b', next.ownerToken);
  });

  it('a waiter that leaves as the lock is handed to it gives the lease back at once; the next waiter gets it', async () => {
    const ns = uniqueNamespace();
    const unlimited = new LockService(store, DEFAULT_LIMITS);
    const queued = async (n: number) =>
      vi.waitFor(async () => expect((await unlimited.inspect(ns, 'w'))?.waiters).toBe(n), { timeout: 10_000 });
    const holder = await unlimited.acquire(ns, 'w', 60_000);
    const caller = new AbortController();
    const leaving = unlimited.acquire(ns, 'w', 60_000, { waitMs: 10_000, signal: caller.signal }).catch((err: unknown) => err);
    await queued(1);
    // A wait that would run out long before the TTL: if the lease handed to the caller that left were
    // kept, this waiter would time out instead of being granted.
    const next = unlimited.acquire(ns, 'w', 60_000, { waitMs: 5_000 });
    await queued(2);
    // The release hands the lock to the first waiter; its caller leaves in the same tick.
    const released = unlimited.release(ns, 'w', holder.ownerToken);
    caller.abort(new WaitAbortedError());
    await released;
    expect(await leaving).toBeInstanceOf(WaitAbortedError);
    const granted: LockGrant = await next;
    expect(granted.fencingToken).toBeGreaterThan(holder.fencingToken);
    const state = await unlimited.inspect(ns, 'w');
    expect(state?.fencingToken).toBe(granted.fencingToken);
    expect(state?.waiters).toBe(0);
    await unlimited.release(ns, 'w', granted.ownerToken);
  });
});

describe('lock service rules over the embedded store', () => {
  const LIMITS = { ...DEFAULT_LIMITS, minTtlMs: 1, maxLockDelayMs: 5_000 };
  let store: MemoryStore;
  beforeAll(() => {
    store = new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0 });
  });
  afterAll(async () => {
    await store.close();
  });

  it('lock-delay: an integer from 0 to the configured bound; a store without it refuses any but 0', async () => {
    const locks = new LockService(store, LIMITS);
    const ns = uniqueNamespace();
    for (const lockDelayMs of [-1, 1.5, LIMITS.maxLockDelayMs + 1]) {
      const err = await locks.acquire(ns, 'd', 1_000, { lockDelayMs }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InvalidRequestError);
      expect((err as InvalidRequestError).field).toBe('lockDelayMs');
    }
    expect(await locks.inspect(ns, 'd')).toBeNull();
    const atBound = await locks.acquire(ns, 'd', 1_000, { lockDelayMs: LIMITS.maxLockDelayMs });
    await locks.release(ns, 'd', atBound.ownerToken);
  });

  it('a blocking query answers at once without an index or with waitMs 0, timed as an inspect; a real wait is not timed', async () => {
    const ops: string[] = [];
    const locks = new LockService(store, LIMITS, { operation: (op, result) => ops.push(`${op} ${result}`) });
    const ns = uniqueNamespace();
    const free = await locks.watch(ns, 'w', undefined, 10_000);
    expect(free).toMatchObject({ state: null, index: 1 });
    expect(ops).toEqual(['inspect ok']);
    expect(await locks.watch(ns, 'w', 1, 0)).toMatchObject({ index: 1 });
    expect(ops).toEqual(['inspect ok', 'inspect ok']);
    expect(await locks.watch(ns, 'w', 1, 50)).toMatchObject({ index: 1 });
    expect(ops).toEqual(['inspect ok', 'inspect ok']);
    await expect(locks.watch(ns, 'w', 1, LIMITS.maxWaitMs + 1)).rejects.toBeInstanceOf(InvalidRequestError);
  });

  it('a grant that comes back too late to trust is given back: the lock is free, and store_unavailable is answered', async () => {
    const slow = withLeases(store, (own) => ({
      acquire: async (request) => {
        const outcome = await own.acquire(request);
        await sleep(60);
        return outcome;
      },
    }));
    const locks = new LockService(slow, LIMITS);
    const ns = uniqueNamespace();
    // On a busy machine the 60 ms sleep's timer itself can fire late, which this process would rightly
    // count as its own lag (answered overloaded, the next test's case). Here the store is to blame.
    const lag = vi.spyOn(ownLag, 'heldUpBetween').mockReturnValue(0);
    try {
      // 60 ms late on a 100 ms lease.
      await expect(locks.acquire(ns, 'late', 100)).rejects.toBeInstanceOf(StoreUnavailableError);
    } finally {
      lag.mockRestore();
    }
    expect(await locks.inspect(ns, 'late')).toBeNull();
  });

  /** An embedded store whose clock stands still: no lease or slot ends during the test, however slow the machine. */
  const frozenStore = () => new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0, clock: new FakeClock().now });
  /** A give-back (release) that fails as a lost answer does: the store may or may not have run it. */
  const giveBackFailed = () => Promise.reject(new StoreUnavailableError('the give-back failed', 1000, { outcomeUnknown: true }));

  it('a late grant whose give-back fails keeps its quota slot: the lease lives on in the store, still counted', async () => {
    // The store's clock stands still: the lease and its slot cannot end during the test, however slow
    // the machine; only the reply is late (on the real clock the freshness check reads).
    const frozen = frozenStore();
    const giveBack = { fails: true };
    const slow = withLeases(frozen, (own) => ({
      acquire: async (request) => {
        const outcome = await own.acquire(request);
        await sleep(60);
        return outcome;
      },
      release: (kind, ids, ownerToken) => (giveBack.fails ? giveBackFailed() : own.release(kind, ids, ownerToken)),
    }));
    const capped = new LockService(slow, { ...LIMITS, maxHeldLocksPerNamespace: 1 });
    const ns = uniqueNamespace();
    const lag = vi.spyOn(ownLag, 'heldUpBetween').mockReturnValue(0);
    let refused: unknown;
    try {
      refused = await capped.acquire(ns, 'late', 100).catch((e: unknown) => e);
    } finally {
      lag.mockRestore();
    }
    expect(refused).toBeInstanceOf(StoreUnavailableError);
    expect((refused as StoreUnavailableError).outcomeUnknown).toBe(true);
    // The lease lives on, and so does its slot: the cap of one is reached.
    expect(await capped.inspect(ns, 'late')).not.toBeNull();
    await expect(capped.acquire(ns, 'other', 100)).rejects.toBeInstanceOf(QuotaExceededError);
    giveBack.fails = false;
    await frozen.close();
  });

  it('a waiting grant whose caller left, given back in vain, keeps its quota slot', async () => {
    const frozen = frozenStore();
    const caller = new AbortController();
    const giveBack = { fails: true };
    const leaving = withLeases(frozen, (own) => ({
      // The caller leaves while its grant is on its way back.
      acquire: async (request) => {
        const outcome = await own.acquire(request);
        caller.abort();
        return outcome;
      },
      release: (kind, ids, ownerToken) => (giveBack.fails ? giveBackFailed() : own.release(kind, ids, ownerToken)),
    }));
    const capped = new LockService(leaving, { ...LIMITS, maxHeldLocksPerNamespace: 1 });
    const ns = uniqueNamespace();
    const refused = await capped.acquire(ns, 'left', 60_000, { waitMs: 1_000, signal: caller.signal }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(StoreUnavailableError);
    expect(await capped.inspect(ns, 'left')).not.toBeNull();
    await expect(capped.acquire(ns, 'other', 60_000)).rejects.toBeInstanceOf(QuotaExceededError);
    giveBack.fails = false;
    await frozen.close();
  });

  it('a lease granted over the cap that cannot be given back is counted: the namespace is not left over its cap', async () => {
    const frozen = frozenStore();
    const giveBack = { fails: false };
    const failing = withLeases(frozen, (own) => ({
      release: (kind, ids, ownerToken) => (giveBack.fails ? giveBackFailed() : own.release(kind, ids, ownerToken)),
    }));
    const capped = new LockService(failing, { ...LIMITS, maxHeldLocksPerNamespace: 1 });
    const ns = uniqueNamespace();
    const a = await capped.acquire(ns, 'a', 60_000);
    // The slot is refused and the lease, asked for at the same time, granted: its give-back fails.
    giveBack.fails = true;
    await expect(capped.acquire(ns, 'b', 60_000)).rejects.toBeInstanceOf(QuotaExceededError);
    giveBack.fails = false;
    expect(await capped.inspect(ns, 'b')).not.toBeNull();
    // 'a' goes; 'b' still lives, counted: the cap of one is still reached.
    await capped.release(ns, 'a', a.ownerToken);
    await expect(capped.acquire(ns, 'c', 60_000)).rejects.toBeInstanceOf(QuotaExceededError);
    await frozen.close();
  });

  it("a waiting grant that comes later than its slot allowed for carries the slot to the lease's end", async () => {
    // The store's clock moves only by hand: the grant comes 5 s of store time after the slot was taken
    // (more than the wait and the slot's margin), and the slot must not end before the lease.
    const clock = new FakeClock();
    const frozen = new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0, clock: clock.now });
    const slowGrant = withLeases(frozen, (own) => ({
      acquire: async (request) => {
        // Late on this process's clock too (past wait + margin), as a late grant is.
        await sleep(QUOTA_SLOT_MARGIN_MS + 100);
        clock.advance(5_000);
        return own.acquire(request);
      },
    }));
    const capped = new LockService(slowGrant, { ...LIMITS, maxHeldLocksPerNamespace: 1 });
    const plain = new LockService(frozen, { ...LIMITS, maxHeldLocksPerNamespace: 1 });
    const ns = uniqueNamespace();
    const lag = vi.spyOn(ownLag, 'heldUpBetween').mockReturnValue(0);
    let grant: LockGrant;
    try {
      grant = await capped.acquire(ns, 'late', 60_000, { waitMs: 1 });
    } finally {
      lag.mockRestore();
    }
    // Past the slot's end as it was taken (wait + lease + margin from then), before the lease's.
    clock.advance(60_000 + QUOTA_SLOT_MARGIN_MS - 5_000 + 500);
    expect((await plain.inspect(ns, 'late'))?.fencingToken).toBe(grant.fencingToken);
    await expect(plain.acquire(ns, 'other', 1_000)).rejects.toBeInstanceOf(QuotaExceededError);
    await frozen.close();
  });

  it('without a namespace quota (the acquire that takes no quota slot), a late grant is given back too', async () => {
    const slow = withLeases(store, (own) => ({
      acquire: async (request) => {
        const outcome = await own.acquire(request);
        await sleep(60);
        return outcome;
      },
    }));
    const locks = new LockService(slow, { ...LIMITS, maxHeldLocksPerNamespace: 0 });
    const ns = uniqueNamespace();
    const lag = vi.spyOn(ownLag, 'heldUpBetween').mockReturnValue(0);
    try {
      await expect(locks.acquire(ns, 'late-unquoted', 100)).rejects.toBeInstanceOf(StoreUnavailableError);
    } finally {
      lag.mockRestore();
    }
    expect(await locks.inspect(ns, 'late-unquoted')).toBeNull();
  });

  it("a grant late because this process's own event loop was held up is given back and answered overloaded, not store_unavailable", async () => {
    const busy = withLeases(store, (own) => ({
      acquire: async (request) => {
        const outcome = await own.acquire(request);
        // The store answered at once; this process then held its own thread (as a burst of requests does).
        const until = performance.now() + 80;
        while (performance.now() < until) {
          // spin
        }
        return outcome;
      },
    }));
    const locks = new LockService(busy, LIMITS);
    const ns = uniqueNamespace();
    await expect(locks.acquire(ns, 'held-up', 100)).rejects.toBeInstanceOf(OverloadedError);
    expect(await locks.inspect(ns, 'held-up')).toBeNull();
  });

  it('a reply back after exactly half the lease is already too late', async () => {
    const locks = new LockService(store, LIMITS);
    const ns = uniqueNamespace();
    const grant = await locks.acquire(ns, 'half', 100);
    const now = vi.spyOn(performance, 'now').mockReturnValue(10_000);
    // The clock stands still, so this process was held up by nothing: the store is to blame.
    const lag = vi.spyOn(ownLag, 'heldUpBetween').mockReturnValue(0);
    try {
      const lease = { key: 'half', ownerToken: grant.ownerToken, ttlMs: 100 };
      await locks.confirmFresh(ns, { ...lease, decidedAt: 10_000 - 49 });
      await expect(locks.confirmFresh(ns, { ...lease, decidedAt: 10_000 - 50 })).rejects.toBeInstanceOf(StoreUnavailableError);
    } finally {
      now.mockRestore();
      lag.mockRestore();
    }
  });

  it('without an observer, a lost lease is still not_owner', async () => {
    const locks = new LockService(store, LIMITS);
    const ns = uniqueNamespace();
    await expect(locks.renew(ns, 'gone', 'x'.repeat(22), 1_000)).rejects.toBeInstanceOf(NotOwnerError);
    await expect(locks.release(ns, 'gone', 'x'.repeat(22))).rejects.toBeInstanceOf(NotOwnerError);
  });
});
