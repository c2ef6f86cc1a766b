import { describe, expect, it } from 'vitest';
import { MAX_READERS } from '../../src/domain/rwlocks.js';
import type { StoreHarness } from './lock-store.contract.js';
import { useInstances } from './contract-kit.js';
import { granted, permitsOf, takePermit, uniqueKey, type PermitCall } from './permit-harness.js';

/**
 * Read/write locks (a reader weighs 1, a writer the whole capacity): many readers or one writer, one
 * FIFO queue so a waiting writer holds back later readers, fencing tokens in grant order. Part of the
 * store contract, run on every store that has permits.
 */
export function describeRwLockContract(name: string, harness: StoreHarness): void {
  describe(`read/write lock contract: ${name}`, () => {
    const store = useInstances(harness);

    const WEIGHT = { read: 1, write: MAX_READERS } as const;
    const take = (key: string, mode: 'read' | 'write', call: Partial<PermitCall> = {}, i = 0) =>
      takePermit(store(i), 'rwlock', key, { weight: WEIGHT[mode], capacity: MAX_READERS, ...call });
    const release = (key: string, ownerToken: string, i = 0) => permitsOf(store(i)).releasePermit('rwlock', key, ownerToken);
    /** Waits (on conditions, not sleeps) until `n` callers are queued on `key`: arrival order is then settled. */
    const waitersAre = (key: string, n: number) =>
      expect.poll(async () => (await permitsOf(store()).inspectPermits('rwlock', key))?.waiters, { timeout: 10_000, interval: 10 }).toBe(n);

    it('many readers at once; a writer is refused while any reader holds it', async () => {
      const key = uniqueKey('rw-readers');
      const readers = [];
      for (let i = 0; i < 3; i++) readers.push(granted(await take(key, 'read', { ttlMs: 3_000 }, i)));
      const writer = await take(key, 'write', {}, 1);
      expect(writer).toMatchObject({ acquired: false, reason: 'full' });
      for (const r of readers) expect(await release(key, r.ownerToken)).toBe(true);
      const w = granted(await take(key, 'write', {}, 2));
      expect(w.fencingToken).toBeGreaterThan(Math.max(...readers.map((r) => r.fencingToken)));
    });

    it('force release naming a fencing token ends only that lease: a writer evicted by token, a later writer kept', async () => {
      const key = uniqueKey('rw-force-one');
      const w = granted(await take(key, 'write', { ttlMs: 30_000 }));
      const next = take(key, 'write', { waitMs: 10_000 }, 1);
      await waitersAre(key, 1);
      expect((await permitsOf(store()).forceReleasePermits('rwlock', key, w.fencingToken)).map((e) => e.fencingToken)).toEqual([
        w.fencingToken,
      ]);
      const w2 = granted(await next);
      expect(await permitsOf(store()).forceReleasePermits('rwlock', key, w.fencingToken)).toEqual([]);
      expect((await permitsOf(store()).inspectPermits('rwlock', key))?.holders.map((h) => h.fencingToken)).toEqual([w2.fencingToken]);
      expect(await release(key, w2.ownerToken, 1)).toBe(true);
    });

    it('permitQueue tells a queued writer from a queued reader by its weight', async () => {
      const key = uniqueKey('rw-queue');
      const w = granted(await take(key, 'write', { ttlMs: 30_000 }));
      const reader = take(key, 'read', { holder: 'reader', waitMs: 20_000 }, 1);
      await waitersAre(key, 1);
      const writer = take(key, 'write', { holder: 'writer', waitMs: 20_000 }, 2);
      await waitersAre(key, 2);
      expect(
        (await permitsOf(store()).permitQueue('rwlock', key, 100)).map(({ position, holder, weight }) => [position, holder, weight]),
      ).toEqual([
        [1, 'reader', WEIGHT.read],
        [2, 'writer', WEIGHT.write],
      ]);
      expect(await release(key, w.ownerToken)).toBe(true);
      const r = granted(await reader);
      expect(await release(key, r.ownerToken, 1)).toBe(true);
      const w2 = granted(await writer);
      expect(await release(key, w2.ownerToken, 2)).toBe(true);
    });

    it('a writer excludes readers and other writers', async () => {
      const key = uniqueKey('rw-writer');
      const w = granted(await take(key, 'write', { ttlMs: 3_000 }));
      expect((await take(key, 'read', {}, 1)).acquired).toBe(false);
      expect((await take(key, 'write', {}, 2)).acquired).toBe(false);
      const state = await permitsOf(store()).inspectPermits('rwlock', key);
      expect(state?.holders).toHaveLength(1);
      expect(state?.holders[0]?.weight).toBe(MAX_READERS);
      expect(await release(key, w.ownerToken)).toBe(true);
      granted(await take(key, 'read', {}, 1));
    });

    it('writers are not starved: once a writer waits, new readers queue behind it', async () => {
      const key = uniqueKey('rw-no-starve');
      const reader = granted(await take(key, 'read'));
      const writer = take(key, 'write', { waitMs: 10_000 }, 1);
      await waitersAre(key, 1);
      // The lock is only read-held, but a writer is queued: a new reader is refused (or queued).
      expect((await take(key, 'read', {}, 2)).acquired).toBe(false);
      const lateReader = take(key, 'read', { waitMs: 10_000 }, 2);
      await waitersAre(key, 2);
      expect(await release(key, reader.ownerToken)).toBe(true);
      const w = granted(await writer);
      expect(w.fencingToken).toBeGreaterThan(reader.fencingToken);
      await waitersAre(key, 1);
      expect((await permitsOf(store()).inspectPermits('rwlock', key))?.holders).toHaveLength(1);
      expect(await release(key, w.ownerToken, 1)).toBe(true);
      const r = granted(await lateReader);
      expect(r.fencingToken).toBeGreaterThan(w.fencingToken);
    });

    it('a released writer lets in every reader at the head of the queue at once, and stops at the next writer', async () => {
      const key = uniqueKey('rw-batch');
      const w = granted(await take(key, 'write'));
      const r1 = take(key, 'read', { waitMs: 10_000 }, 1);
      await waitersAre(key, 1);
      const r2 = take(key, 'read', { waitMs: 10_000 }, 2);
      await waitersAre(key, 2);
      const w2 = take(key, 'write', { waitMs: 10_000 }, 0);
      await waitersAre(key, 3);
      expect(await release(key, w.ownerToken)).toBe(true);
      const [a, b] = [granted(await r1), granted(await r2)];
      expect(b.fencingToken).toBeGreaterThan(a.fencingToken);
      const state = await permitsOf(store()).inspectPermits('rwlock', key);
      expect(state?.holders).toHaveLength(2);
      expect(state?.waiters).toBe(1);
      await release(key, a.ownerToken, 1);
      await release(key, b.ownerToken, 2);
      const second = granted(await w2);
      expect(second.fencingToken).toBeGreaterThan(b.fencingToken);
    });

    it('a writer that gives up at the head lets the readers behind it in', async () => {
      const key = uniqueKey('rw-giveup');
      const reader = granted(await take(key, 'read', { ttlMs: 5_000 }));
      const writer = take(key, 'write', { waitMs: 1_000 }, 1);
      await waitersAre(key, 1);
      const lateReader = take(key, 'read', { waitMs: 10_000 }, 2);
      expect(await writer).toMatchObject({ acquired: false, reason: 'full' });
      const r = granted(await lateReader);
      expect(r.fencingToken).toBeGreaterThan(reader.fencingToken);
    });

    it('a lease that runs out is handed on; renew keeps the token', async () => {
      const key = uniqueKey('rw-expiry');
      const w = granted(await take(key, 'write', { ttlMs: 10_000 }));
      // Renewed to a short lease (a holder that crashed after its last renewal): it runs out soon.
      expect(await permitsOf(store(1)).renewPermit('rwlock', key, w.ownerToken, 300)).toMatchObject({
        renewed: true,
        fencingToken: w.fencingToken,
      });
      const reader = granted(await take(key, 'read', { waitMs: 10_000 }, 2));
      expect(reader.fencingToken).toBeGreaterThan(w.fencingToken);
      expect(await permitsOf(store()).renewPermit('rwlock', key, w.ownerToken, 300)).toEqual({ renewed: false });
    });

    it('never a writer together with anyone among many concurrent callers', async () => {
      const key = uniqueKey('rw-race');
      const results = await Promise.all(Array.from({ length: 40 }, (_, i) => take(key, i % 4 === 0 ? 'write' : 'read', {}, i)));
      const won = results.filter((r) => r.acquired);
      const state = await permitsOf(store()).inspectPermits('rwlock', key);
      const writers = state?.holders.filter((h) => h.weight === MAX_READERS) ?? [];
      expect(writers.length === 0 || state?.holders.length === 1).toBe(true);
      expect(state?.holders).toHaveLength(won.length);
    });
  });
}
