import pino from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { TooManyWaitersError } from '../../src/domain/errors.js';
import { newOwnerToken } from '../../src/domain/lock-service.js';
import { type AcquireOutcome, lockWords, withWords, type Worded } from '../helpers/store-words.js';
import { createStore } from '../../src/store/create-store.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { RedisServer } from '../helpers/redis-server.js';

/**
 * The embedded store's bookkeeping that the shared contract does not pin down: what the sweep forgets
 * and keeps, listing pages, the per-key queue cap, quota slots that only move later, and a caller that
 * does not wait never being queued. On a clock the test moves, so nothing here sleeps.
 */
const GRACE_MS = 60_000;

describe('embedded store: bookkeeping', () => {
  const stores: Worded<MemoryStore>[] = [];
  afterEach(async () => {
    for (const store of stores.splice(0)) await store.close();
  });
  const open = (clock: FakeClock, options: { sweepIntervalMs?: number; maxWaitersPerKey?: number } = {}) => {
    const store = withWords(new MemoryStore({ fenceGraceMs: GRACE_MS, sweepIntervalMs: 0, clock: clock.now, ...options }));
    stores.push(store);
    return store;
  };
  const grant = async (store: Worded<MemoryStore>, key: string, ttlMs = 10_000) => {
    const ownerToken = newOwnerToken();
    const outcome: AcquireOutcome = await store.acquire({ id: key, ownerToken, ttlMs, holder: null });
    if (!outcome.acquired) throw new Error('not granted');
    return { ...outcome, ownerToken };
  };

  it('the sweep forgets a key exactly when its lease and grace period are over, never a live lease', async () => {
    const clock = new FakeClock();
    const store = open(clock);
    const released = await grant(store, 'released');
    const renewed = await grant(store, 'renewed', 1_000);
    const live = await grant(store, 'live', 10 * GRACE_MS);
    await store.release('released', released.ownerToken);
    const releasedAt = Math.floor(clock.nowMs);
    await store.renew('renewed', renewed.ownerToken, 2_000);
    const renewedEnd = Math.floor(clock.nowMs) + 2_000;
    store.sweep();
    expect([store.has('released'), store.has('renewed'), store.has('live'), store.size]).toEqual([true, true, true, 3]);
    clock.set(releasedAt + GRACE_MS - 1);
    store.sweep();
    expect(store.has('released')).toBe(true);
    clock.set(releasedAt + GRACE_MS);
    store.sweep();
    expect(store.has('released')).toBe(false);
    clock.set(renewedEnd + GRACE_MS - 1);
    store.sweep();
    expect(store.has('renewed')).toBe(true);
    clock.set(renewedEnd + GRACE_MS);
    store.sweep();
    expect(store.has('renewed')).toBe(false);
    expect((await store.inspect('live'))?.fencingToken).toBe(live.fencingToken);
  });

  it('the sweep keeps a lease that ran out (unreleased) for the grace period after its end, and a live one however short', async () => {
    const clock = new FakeClock();
    const store = open(clock);
    const short = await grant(store, 'short', 1_000);
    await grant(store, 'live', 2 * GRACE_MS);
    clock.advance(500);
    store.sweep();
    expect(store.has('short')).toBe(true);
    clock.set(short.expiresAtMs + GRACE_MS - 1);
    store.sweep();
    expect(store.has('short')).toBe(true);
    clock.set(short.expiresAtMs + GRACE_MS);
    store.sweep();
    expect([store.has('short'), store.has('live')]).toEqual([false, true]);
  });

  it('a renewed lock set is kept for the grace period after its new end; renew moves every key and keeps the tokens', async () => {
    const clock = new FakeClock();
    const store = open(clock);
    const ownerToken = newOwnerToken();
    const set = await store.acquireSet({ ids: ['s/a', 's/b'], ownerToken, ttlMs: 1_000, holder: '' });
    if (!set.acquired) throw new Error('not granted');
    // An empty holder label is no label.
    expect((await store.inspect('s/a'))?.holder).toBeNull();
    expect(set.expiresAtMs).toBe(Math.floor(clock.nowMs) + 1_000);
    clock.advance(500);
    const renewed = await store.renewSet(['s/a', 's/b'], ownerToken, 3_000);
    const end = Math.floor(clock.nowMs) + 3_000;
    expect(renewed).toEqual({ renewed: true, fencingTokens: set.fencingTokens, expiresAtMs: end });
    for (const key of ['s/a', 's/b']) expect((await store.inspect(key))?.expiresAtMs).toBe(end);
    clock.set(end + GRACE_MS - 1);
    store.sweep();
    expect([store.has('s/a'), store.has('s/b')]).toEqual([true, true]);
    clock.set(end + GRACE_MS);
    store.sweep();
    expect([store.has('s/a'), store.has('s/b')]).toEqual([false, false]);
  });

  it("tells a key's watchers after each change, once per change, until they stop watching; a stopped watch is forgotten", async () => {
    const clock = new FakeClock();
    const store = open(clock);
    const byKey = (store as unknown as { changeListeners: { byKey: Map<string, Set<unknown>> } }).changeListeners.byKey;
    const seen: string[] = [];
    const flush = () => new Promise((resolve) => setImmediate(resolve));
    const stopA = await store.watchChanges('k', () => seen.push('a'));
    const stopB = await store.watchChanges('k', () => seen.push('b'));
    const lease = await grant(store, 'k');
    await flush();
    expect(seen.sort()).toEqual(['a', 'b']);
    stopA();
    await store.release('k', lease.ownerToken);
    await flush();
    expect(seen.sort()).toEqual(['a', 'b', 'b']);
    stopB();
    expect(byKey.has('k')).toBe(false);
    // A stop called again after someone else started watching the key leaves that watch alone.
    const stopC = await store.watchChanges('k', () => seen.push('c'));
    stopB();
    await grant(store, 'k');
    await flush();
    expect(seen.filter((w) => w === 'c')).toEqual(['c']);
    stopC();
    expect(byKey.size).toBe(0);
  });

  it('sweeps on its own timer when one is set, and not at all with 0', async () => {
    const clock = new FakeClock();
    const manual = open(clock);
    const timed = open(clock, { sweepIntervalMs: 5 });
    for (const store of [manual, timed]) {
      const lease = await grant(store, 'k', 100);
      await store.release('k', lease.ownerToken);
    }
    clock.advance(GRACE_MS + 1);
    await vi.waitFor(() => expect(timed.has('k')).toBe(false), { timeout: 5_000 });
    expect(manual.has('k')).toBe(true);
  });

  it('a caller that does not wait is never queued, not even for an instant', async () => {
    const clock = new FakeClock();
    const store = open(clock);
    const holder = await grant(store, 'k');
    // Not awaited: the release below runs while this acquire's promise is still pending.
    const notWaiting = store.acquire({ id: 'k', ownerToken: newOwnerToken(), ttlMs: 1_000, holder: null, waitMs: 0 });
    await store.release('k', holder.ownerToken);
    expect(await notWaiting).toMatchObject({ acquired: false });
    expect(await store.inspect('k')).toBeNull();
  });

  it('caps the callers queued on one key; 1000 unless configured', async () => {
    const clock = new FakeClock();
    for (const [store, cap] of [
      [open(clock, { maxWaitersPerKey: 2 }), 2],
      [open(clock), 1000],
    ] as const) {
      await grant(store, 'k');
      const waits = Array.from({ length: cap }, () =>
        store.acquire({ id: 'k', ownerToken: newOwnerToken(), ttlMs: 1_000, holder: null, waitMs: 60_000 }).catch((err: unknown) => err),
      );
      await expect(
        store.acquire({ id: 'k', ownerToken: newOwnerToken(), ttlMs: 1_000, holder: null, waitMs: 60_000 }),
      ).rejects.toBeInstanceOf(TooManyWaitersError);
      expect((await store.inspect('k'))?.waiters).toBe(cap);
      await store.close();
      await Promise.all(waits);
    }
  });

  it('a waiter that gives up leaves the queue, wherever it stood; an emptied queue is forgotten with its key', async () => {
    const clock = new FakeClock();
    const store = open(clock);
    const holder = await grant(store, 'k', 1_000);
    const first = new AbortController();
    const second = new AbortController();
    const wait = (signal: AbortSignal) =>
      store
        .acquire({ id: 'k', ownerToken: newOwnerToken(), ttlMs: 1_000, holder: null, waitMs: 60_000, signal })
        .catch((err: unknown) => err);
    const waits = [wait(first.signal), wait(second.signal)];
    expect((await store.inspect('k'))?.waiters).toBe(2);
    second.abort();
    expect((await store.inspect('k'))?.waiters).toBe(1);
    first.abort();
    expect((await store.inspect('k'))?.waiters).toBe(0);
    await Promise.all(waits);
    await store.release('k', holder.ownerToken);
    clock.advance(GRACE_MS);
    store.sweep();
    expect(store.has('k')).toBe(false);
  });

  it("the port (store.leases) hands the queue and release requests to the engine, and says the store's kind", async () => {
    const clock = new FakeClock();
    const store = open(clock);
    expect(store.leases.kind).toBe('memory');
    const holder = await grant(store, 'q', 1_000);
    const leave = new AbortController();
    const waiting = store
      .acquire({ id: 'q', ownerToken: newOwnerToken(), ttlMs: 1_000, holder: 'next', waitMs: 60_000, signal: leave.signal })
      .catch((err: unknown) => err);
    expect(await store.leases.queue('lock', 'q', 10)).toEqual([{ position: 1, holder: 'next', waitingSinceMs: Math.floor(clock.now()) }]);
    const asked = await store.leases.requestRelease('lock', 'q', holder.fencingToken, { by: 'ops', reason: 'maintenance' });
    expect(asked).toEqual({ atMs: Math.floor(clock.now()), by: 'ops', reason: 'maintenance' });
    expect((await store.inspect('q'))?.releaseRequested).toEqual(asked);
    leave.abort();
    await waiting;
  });

  it('lists held locks in id order, a page at a time, with their time left and waiters; never expired or released ones', async () => {
    const clock = new FakeClock();
    const store = open(clock);
    await grant(store, 'p/c', 5_000);
    await grant(store, 'p/b', 5_000);
    const a = await grant(store, 'p/a', 5_000);
    await grant(store, 'p/expired', 1_000);
    const released = await grant(store, 'p/released', 5_000);
    await store.release('p/released', released.ownerToken);
    await grant(store, 'q/other', 5_000);
    const waiting = store
      .acquire({ id: 'p/a', ownerToken: newOwnerToken(), ttlMs: 1_000, holder: null, waitMs: 60_000 })
      .catch(() => undefined);
    clock.advance(1_000); // p/expired ends exactly now
    const all = await store.list({ prefix: 'p/', limit: 10 });
    expect(all.leases.map((l) => l.id)).toEqual(['p/a', 'p/b', 'p/c']);
    expect(all.nextCursor).toBeNull();
    expect(all.leases[0]).toMatchObject({ fencingToken: a.fencingToken, ttlRemainingMs: 4_000, waiters: 1, expiresAtMs: a.expiresAtMs });
    expect(all.leases[1]?.waiters).toBe(0);
    const exact = await store.list({ prefix: 'p/', limit: 3 });
    expect(exact.nextCursor).toBeNull();
    const first = await store.list({ prefix: 'p/', limit: 2 });
    expect(first.leases.map((l) => l.id)).toEqual(['p/a', 'p/b']);
    expect(first.nextCursor).toBe('p/b');
    const rest = await store.list({ prefix: 'p/', limit: 2, cursor: 'p/b' });
    expect(rest).toEqual({ leases: [expect.objectContaining({ id: 'p/c' })], nextCursor: null });
    await store.close();
    await waiting;
  });

  it('quota slots: an extend only moves a slot later and counts an unknown one; a free of an unknown slot does nothing; freeing one keeps the others', async () => {
    const clock = new FakeClock();
    const store = open(clock);
    await store.freeQuotaSlot('unknown-ns', 'x');
    expect(await store.reserveQuotaSlot('ns', 'a', 10_000, 1)).toEqual({ reserved: true });
    // Earlier than the slot's end: ignored.
    await store.extendQuotaSlot('ns', 'a', Math.floor(clock.nowMs) + 1_000);
    clock.advance(2_000);
    expect(await store.reserveQuotaSlot('ns', 'b', 1_000, 1)).toEqual({ reserved: false, retryAfterMs: 8_000 });
    // An unknown slot is counted by an extend (its lease was just renewed), over the cap if need be.
    await store.extendQuotaSlot('ns', 'ghost', Math.floor(clock.nowMs) + 50_000);
    expect(await store.reserveQuotaSlot('ns', 'b', 1_000, 2)).toMatchObject({ reserved: false });
    await store.freeQuotaSlot('ns', 'ghost');
    expect(await store.reserveQuotaSlot('ns', 'b', 1_000, 2)).toEqual({ reserved: true });
    // Freeing one slot keeps the rest: a and b still count against a cap of 2 after c is freed.
    expect(await store.reserveQuotaSlot('ns', 'c', 1_000, 3)).toEqual({ reserved: true });
    await store.freeQuotaSlot('ns', 'c');
    expect(await store.reserveQuotaSlot('ns', 'd', 1_000, 2)).toMatchObject({ reserved: false });
  });

  it('the sweep forgets quota slots that ended, and a namespace whose slots all ended', async () => {
    const clock = new FakeClock();
    const store = open(clock);
    const slots = (store as unknown as { quotaSlots: Map<string, Map<string, number>> }).quotaSlots;
    await store.reserveQuotaSlot('ns', 'a', 1_000, 5);
    await store.reserveQuotaSlot('ns', 'b', 5_000, 5);
    await store.reserveQuotaSlot('gone', 'a', 1_000, 5);
    clock.advance(1_000);
    store.sweep();
    expect([...slots.keys()]).toEqual(['ns']);
    expect([...(slots.get('ns')?.keys() ?? [])]).toEqual(['b']);
    await store.freeQuotaSlot('ns', 'b');
    expect(slots.size).toBe(0);
  });
});

describe('createStore', () => {
  it('builds the store the configuration names', async () => {
    const warned: string[] = [];
    const log = pino({ level: 'silent' });
    const warn = vi.spyOn(log, 'warn').mockImplementation((...args: unknown[]) => void warned.push(String(args[1])));
    const base = { fenceGraceMs: 1_000, limits: { maxWaitersPerKey: 5 } };
    const memory = createStore({ ...base, store: { kind: 'memory' } }, log);
    expect(memory.kind).toBe('memory');
    expect(warned.join()).toMatch(/NOT shared/);
    expect(warn).toHaveBeenCalledWith({ store: 'memory' }, expect.any(String));
    // The configured limits reach it: the sixth caller queued on one key is refused.
    const take = () =>
      lockWords(memory.leases).acquire({ id: 'k', ownerToken: newOwnerToken(), ttlMs: 60_000, holder: null, waitMs: 60_000 });
    expect((await take()).acquired).toBe(true);
    const queued = Array.from({ length: 5 }, () => take().catch((err: unknown) => err));
    await expect(take()).rejects.toBeInstanceOf(TooManyWaitersError);
    await memory.close();
    await Promise.all(queued);
    warn.mockClear();
    const redis = await RedisServer.start();
    try {
      const store = createStore(
        {
          ...base,
          store: {
            kind: 'redis',
            connection: { mode: 'standalone', url: redis.url },
            keyPrefix: 'cs:',
            commandTimeoutMs: 1_000,
            replicaAcks: null,
          },
        },
        log,
      );
      expect(store.kind).toBe('redis');
      await vi.waitFor(() => store.ping(), { timeout: 10_000 });
      await store.close();
    } finally {
      await redis.stop();
    }
    const etcd = createStore(
      { ...base, store: { kind: 'etcd', endpoints: ['127.0.0.1:1'], keyPrefix: 'cs/', commandTimeoutMs: 1_000 } },
      log,
    );
    expect(etcd.kind).toBe('etcd');
    await etcd.close();
    expect(warn).not.toHaveBeenCalled();
  });
});
