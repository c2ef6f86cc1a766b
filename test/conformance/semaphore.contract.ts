import { describe, expect, it } from 'vitest';
import { TooManyWaitersError } from '../../src/domain/errors.js';
import { newOwnerToken } from '../../src/domain/lock-service.js';
import { MAX_HOLDERS_SHOWN } from '../../src/domain/permit-values.js';
import type { StoreHarness } from './lock-store.contract.js';
import { clockOf, sleep, useInstances } from './contract-kit.js';
import { granted, permitsOf, takePermit, uniqueKey, type PermitCall } from './permit-harness.js';

/**
 * Semaphores (a permit weighs 1 against the limit): at most `limit` live permits, each its own lease,
 * fencing tokens increasing per semaphore, limit mismatches refused, FIFO hand-off. Part of the store
 * contract, run on every store that has permits.
 */
export function describeSemaphoreContract(name: string, harness: StoreHarness): void {
  describe(`semaphore contract: ${name}`, () => {
    const now = clockOf(harness);
    const store = useInstances(harness);

    const take = (key: string, limit: number, call: Partial<PermitCall> = {}, i = 0) =>
      takePermit(store(i), 'semaphore', key, { weight: 1, capacity: limit, ...call });
    /** Waits (on conditions, not sleeps) until `n` callers are queued on `key`: arrival order is then settled. */
    const waitersAre = (key: string, n: number) =>
      expect
        .poll(async () => (await permitsOf(store()).inspectPermits('semaphore', key))?.waiters, { timeout: 10_000, interval: 10 })
        .toBe(n);

    it('grants up to limit permits, each with a higher fencing token, then refuses with the time left', async () => {
      const key = uniqueKey('sem-full');
      const tokens: number[] = [];
      for (let i = 0; i < 3; i++) tokens.push(granted(await take(key, 3, { ttlMs: 3_000 }, i)).fencingToken);
      expect([...tokens].sort((a, b) => a - b)).toEqual(tokens);
      expect(new Set(tokens).size).toBe(3);
      const refused = await take(key, 3, { ttlMs: 3_000 }, 1);
      expect(refused).toMatchObject({ acquired: false, reason: 'full' });
      if (refused.acquired) return;
      expect(refused.retryAfterMs).toBeGreaterThan(0);
      expect(refused.retryAfterMs).toBeLessThanOrEqual(3_000);
    });

    it('refuses a caller whose limit differs from the live one, and takes a new limit once every permit is gone', async () => {
      const key = uniqueKey('sem-mismatch');
      const a = granted(await take(key, 2, { ttlMs: 4_000 }));
      const other = await take(key, 5, {}, 1);
      expect(other).toMatchObject({ acquired: false, reason: 'mismatch', capacity: 2 });
      if (other.acquired || other.reason !== 'mismatch') return;
      expect(other.retryAfterMs).toBeGreaterThan(0);
      expect(other.retryAfterMs).toBeLessThanOrEqual(4_000);
      expect(await permitsOf(store()).releasePermit('semaphore', key, a.ownerToken)).toBe(true);
      const renamed = granted(await take(key, 5, {}, 2));
      expect(renamed.fencingToken).toBeGreaterThan(a.fencingToken);
      expect((await permitsOf(store()).inspectPermits('semaphore', key))?.capacity).toBe(5);
    });

    it('each permit is its own lease: one that is not renewed ends alone and its room is free again', async () => {
      const key = uniqueKey('sem-expire');
      const short = granted(await take(key, 2, { ttlMs: 10_000 }));
      const long = granted(await take(key, 2, { ttlMs: 10_000 }, 1));
      expect((await take(key, 2, {}, 2)).acquired).toBe(false);
      // One permit is left to run out soon (a holder that crashed after its last renewal).
      const shortened = await permitsOf(store()).renewPermit('semaphore', key, short.ownerToken, 200);
      if (!shortened.renewed) throw new Error('not renewed');
      await sleep(shortened.expiresAtMs - now() + 30);
      const next = granted(await take(key, 2, {}, 2));
      expect(next.fencingToken).toBeGreaterThan(long.fencingToken);
      expect(await permitsOf(store()).renewPermit('semaphore', key, short.ownerToken, 5_000)).toEqual({ renewed: false });
      expect(await permitsOf(store()).releasePermit('semaphore', key, short.ownerToken)).toBe(false);
      const state = await permitsOf(store(1)).inspectPermits('semaphore', key);
      expect(state?.holders.map((h) => h.fencingToken)).toEqual([long.fencingToken, next.fencingToken]);
    });

    it(`inspect shows at most ${MAX_HOLDERS_SHOWN} leases, the ones that end first, in grant order, and counts them all`, async () => {
      const key = uniqueKey('sem-page');
      const many = MAX_HOLDERS_SHOWN + 20;
      const leases = [];
      // Each later permit ends sooner: the page must hold the last MAX_HOLDERS_SHOWN granted, not the first.
      // 2 s shorter each, so that holds however slowly the grants come (at 100 ms apart, a busy Cluster
      // that took longer than that between two grants reversed their ends).
      for (let i = 0; i < many; i++) leases.push(granted(await take(key, many, { ttlMs: 300_000 - i * 2_000 }, i % 3)));
      const state = await permitsOf(store()).inspectPermits('semaphore', key);
      expect(state?.holderCount).toBe(many);
      expect(state?.holders.map((h) => h.fencingToken)).toEqual(leases.slice(many - MAX_HOLDERS_SHOWN).map((l) => l.fencingToken));
      const indexed = await permitsOf(store(1)).inspectPermitsIndexed('semaphore', key);
      expect(indexed.state?.holders).toHaveLength(MAX_HOLDERS_SHOWN);
      expect(indexed.state?.holderCount).toBe(many);
    });

    it('renew keeps the token and moves only that permit; wrong tokens change nothing', async () => {
      const key = uniqueKey('sem-renew');
      const a = granted(await take(key, 2, { ttlMs: 1_000, holder: 'a' }));
      const b = granted(await take(key, 2, { ttlMs: 1_000, holder: 'b' }, 1));
      const renewed = await permitsOf(store(2)).renewPermit('semaphore', key, a.ownerToken, 30_000);
      expect(renewed).toMatchObject({ renewed: true, fencingToken: a.fencingToken });
      expect(await permitsOf(store()).renewPermit('semaphore', key, newOwnerToken(), 30_000)).toEqual({ renewed: false });
      expect(await permitsOf(store()).releasePermit('semaphore', key, newOwnerToken())).toBe(false);
      const state = await permitsOf(store()).inspectPermits('semaphore', key);
      expect(state?.holders.map((h) => [h.holder, h.fencingToken])).toEqual([
        ['a', a.fencingToken],
        ['b', b.fencingToken],
      ]);
      expect(state?.holders[0]?.expiresAtMs).toBeGreaterThan(b.expiresAtMs);
      expect(JSON.stringify(state)).not.toContain(a.ownerToken);
    });

    it('waiters are granted in arrival order as permits free up, across instances', async () => {
      const key = uniqueKey('sem-fifo');
      const held = granted(await take(key, 1));
      const first = take(key, 1, { waitMs: 10_000 }, 1);
      await waitersAre(key, 1);
      const second = take(key, 1, { waitMs: 10_000 }, 2);
      await waitersAre(key, 2);
      // A newcomer that does not wait never jumps the queue.
      expect((await take(key, 1)).acquired).toBe(false);
      expect((await permitsOf(store()).inspectPermits('semaphore', key))?.waiters).toBe(2);
      expect(await permitsOf(store()).releasePermit('semaphore', key, held.ownerToken)).toBe(true);
      const one = granted(await first);
      expect(one.fencingToken).toBeGreaterThan(held.fencingToken);
      expect(await permitsOf(store(1)).releasePermit('semaphore', key, one.ownerToken)).toBe(true);
      const two = granted(await second);
      expect(two.fencingToken).toBeGreaterThan(one.fencingToken);
    });

    it('a permit that runs out is handed to the first waiter', async () => {
      const key = uniqueKey('sem-handoff-expiry');
      const holder = granted(await take(key, 1, { ttlMs: 10_000 }));
      const waiting = take(key, 1, { waitMs: 10_000 }, 1);
      await waitersAre(key, 1);
      const shortened = await permitsOf(store()).renewPermit('semaphore', key, holder.ownerToken, 300);
      if (!shortened.renewed) throw new Error('not renewed');
      const waiter = granted(await waiting);
      expect(now()).toBeGreaterThanOrEqual(shortened.expiresAtMs - 50);
      expect(waiter.fencingToken).toBeGreaterThan(holder.fencingToken);
    });

    it('a wait that runs out gets no permit and says when the first one ends', async () => {
      const key = uniqueKey('sem-timeout');
      granted(await take(key, 1, { ttlMs: 5_000 }));
      const outcome = await take(key, 1, { waitMs: 150 }, 1);
      expect(outcome).toMatchObject({ acquired: false, reason: 'full' });
      expect((await permitsOf(store()).inspectPermits('semaphore', key))?.waiters).toBe(0);
    });

    it('never more than limit holders among many concurrent acquirers', async () => {
      const key = uniqueKey('sem-race');
      const results = await Promise.all(Array.from({ length: 60 }, (_, i) => take(key, 4, {}, i)));
      expect(results.filter((r) => r.acquired)).toHaveLength(4);
      expect((await permitsOf(store()).inspectPermits('semaphore', key))?.holders).toHaveLength(4);
    });

    it('force release ends every permit, keeps the fencing sequence and hands the room on', async () => {
      const key = uniqueKey('sem-force');
      const a = granted(await take(key, 2, { holder: 'a' }));
      const b = granted(await take(key, 2, {}, 1));
      const waiter = take(key, 2, { waitMs: 10_000 }, 2);
      await waitersAre(key, 1);
      const evicted = await permitsOf(store()).forceReleasePermits('semaphore', key);
      expect(evicted.map((e) => [e.holder, e.fencingToken]).sort()).toEqual(
        [
          ['a', a.fencingToken],
          [null, b.fencingToken],
        ].sort(),
      );
      const handed = granted(await waiter);
      expect(handed.fencingToken).toBeGreaterThan(b.fencingToken);
      expect(await permitsOf(store()).renewPermit('semaphore', key, a.ownerToken, 5_000)).toEqual({ renewed: false });
      expect(await permitsOf(store()).forceReleasePermits('semaphore', uniqueKey('sem-none'))).toEqual([]);
    });

    it('force release naming a fencing token ends only that permit; a gone one ends nothing', async () => {
      const key = uniqueKey('sem-force-one');
      const a = granted(await take(key, 2, { holder: 'a' }));
      const b = granted(await take(key, 2, { holder: 'b' }, 1));
      const waiter = take(key, 2, { waitMs: 10_000 }, 2);
      await waitersAre(key, 1);
      const evicted = await permitsOf(store()).forceReleasePermits('semaphore', key, a.fencingToken);
      expect(evicted.map((e) => [e.holder, e.fencingToken, e.ownerToken])).toEqual([['a', a.fencingToken, a.ownerToken]]);
      // The freed room goes to the queue; the other permit is untouched.
      const handed = granted(await waiter);
      expect(await permitsOf(store()).renewPermit('semaphore', key, a.ownerToken, 5_000)).toEqual({ renewed: false });
      expect(await permitsOf(store()).renewPermit('semaphore', key, b.ownerToken, 5_000)).toMatchObject({ renewed: true });
      // The evicted lease again (the operator's view is stale): nothing changes.
      expect(await permitsOf(store()).forceReleasePermits('semaphore', key, a.fencingToken)).toEqual([]);
      const state = await permitsOf(store()).inspectPermits('semaphore', key);
      expect(state?.holders.map((h) => h.fencingToken).sort((x, y) => x - y)).toEqual([b.fencingToken, handed.fencingToken]);
      expect(state?.holderCount).toBe(2);
      // The room freed by the count is right: a third permit does not fit.
      expect((await take(key, 2, {}, 1)).acquired).toBe(false);
    });

    it('permitQueue lists the live waiters head first with holder, arrival time and weight', async () => {
      const key = uniqueKey('sem-queue');
      const held = granted(await take(key, 1, { holder: 'holding', ttlMs: 30_000 }));
      const before = now();
      const first = take(key, 1, { holder: 'w1', waitMs: 20_000 }, 1);
      await waitersAre(key, 1);
      const second = take(key, 1, { waitMs: 20_000 }, 2);
      await waitersAre(key, 2);
      const queued = await permitsOf(store()).permitQueue('semaphore', key, 100);
      expect(queued.map(({ position, holder, weight }) => [position, holder, weight])).toEqual([
        [1, 'w1', 1],
        [2, null, 1],
      ]);
      for (const q of queued) expect(q.waitingSinceMs).toBeGreaterThanOrEqual(before - 1_000);
      expect(await permitsOf(store()).permitQueue('semaphore', key, 1)).toHaveLength(1);
      expect(await permitsOf(store()).releasePermit('semaphore', key, held.ownerToken)).toBe(true);
      const w1 = granted(await first);
      expect((await permitsOf(store()).permitQueue('semaphore', key, 100)).map((q) => q.position)).toEqual([1]);
      expect(await permitsOf(store()).releasePermit('semaphore', key, w1.ownerToken)).toBe(true);
      granted(await second);
      expect(await permitsOf(store()).permitQueue('semaphore', key, 100)).toEqual([]);
    });

    it('a semaphore and a lock or read/write lock of the same name are separate', async () => {
      const key = uniqueKey('sem-kinds');
      granted(await take(key, 1));
      expect((await store().acquire({ id: key, ownerToken: newOwnerToken(), ttlMs: 5_000, holder: null })).acquired).toBe(true);
      expect((await takePermit(store(), 'rwlock', key, { weight: 10_000, capacity: 10_000 })).acquired).toBe(true);
    });

    it("a refusal says when room may free up: the earliest permit's end when full, the last one's on a limit mismatch", async () => {
      const key = uniqueKey('sem-retry');
      const long = granted(await take(key, 2, { ttlMs: 30_000 }));
      granted(await take(key, 2, { ttlMs: 2_000 }, 1));
      const full = await take(key, 2, {}, 2);
      expect(full).toMatchObject({ acquired: false, reason: 'full' });
      if (full.acquired) return;
      expect(full.retryAfterMs).toBeGreaterThan(1);
      expect(full.retryAfterMs).toBeLessThanOrEqual(2_000);
      const mismatch = await take(key, 3, {}, 2);
      expect(mismatch).toMatchObject({ acquired: false, reason: 'mismatch' });
      if (mismatch.acquired) return;
      expect(mismatch.retryAfterMs).toBeGreaterThan(2_000);
      expect(mismatch.retryAfterMs).toBeLessThanOrEqual(long.expiresAtMs - now() + 50);
      const state = await permitsOf(store()).inspectPermits('semaphore', key);
      expect(state?.holders.map((h) => h.ttlRemainingMs > 1 && h.ttlRemainingMs <= h.expiresAtMs - now() + 50)).toEqual([true, true]);
    });

    it('a waiter whose caller leaves is taken out of the queue and answered with the reason it was given; the next waiter gets the room', async () => {
      const key = uniqueKey('sem-abort');
      const held = granted(await take(key, 1));
      const leaving = new AbortController();
      const first = take(key, 1, { waitMs: 10_000, signal: leaving.signal }, 1).catch((err: unknown) => err);
      await waitersAre(key, 1);
      const second = take(key, 1, { waitMs: 10_000 }, 2);
      await waitersAre(key, 2);
      const why = new Error('the caller went away');
      leaving.abort(why);
      expect(await first).toBe(why);
      await waitersAre(key, 1);
      expect(await permitsOf(store()).releasePermit('semaphore', key, held.ownerToken)).toBe(true);
      expect(granted(await second).fencingToken).toBeGreaterThan(held.fencingToken);
    });

    it('a full queue refuses more waiters with TooManyWaitersError', async () => {
      const key = uniqueKey('sem-queue-cap');
      const held = granted(await take(key, 1));
      // The instances are opened with maxWaitersPerKey 5 (contract-kit.ts useInstances). Each waiter
      // lets go as soon as it is granted, so the queue moves on.
      const queued = Array.from({ length: 5 }, (_, i) =>
        take(key, 1, { waitMs: 10_000 }, i).then(async (r) => {
          const lease = granted(r);
          await permitsOf(store(i)).releasePermit('semaphore', key, lease.ownerToken);
          return lease;
        }),
      );
      await waitersAre(key, 5);
      await expect(take(key, 1, { waitMs: 10_000 }, 1)).rejects.toBeInstanceOf(TooManyWaitersError);
      expect(await permitsOf(store()).forceReleasePermits('semaphore', key)).toHaveLength(1);
      for (const lease of await Promise.all(queued)) expect(lease.fencingToken).toBeGreaterThan(held.fencingToken);
    });

    it('lists semaphores with live permits by id prefix', async () => {
      const prefix = uniqueKey('sem-list');
      for (const suffix of ['a', 'b', 'c']) granted(await take(`${prefix}:${suffix}`, 2));
      const found: string[] = [];
      let cursor: string | undefined;
      for (let page = 0; page < 50; page++) {
        const listed = await permitsOf(store()).listPermits('semaphore', { prefix, limit: 2, cursor });
        for (const entry of listed.entries) found.push(entry.id);
        if (listed.nextCursor === null) break;
        cursor = listed.nextCursor;
      }
      expect([...new Set(found)].sort()).toEqual(['a', 'b', 'c'].map((s) => `${prefix}:${s}`));
      // Not listed: a read/write lock of the same prefix, keys outside it, a semaphore whose permits were released.
      granted(await takePermit(store(), 'rwlock', `${prefix}:rw`, { weight: 1, capacity: 2 }));
      granted(await take(`${prefix}x:other`, 2));
      const gone = granted(await take(`${prefix}:released`, 2));
      await permitsOf(store()).releasePermit('semaphore', `${prefix}:released`, gone.ownerToken);
      const again = await permitsOf(store()).listPermits('semaphore', { prefix: `${prefix}:`, limit: 50 });
      expect(again.entries.map((e) => e.id).sort()).toEqual(['a', 'b', 'c'].map((s) => `${prefix}:${s}`));
      expect(again.entries[0]?.state).toMatchObject({ capacity: 2, waiters: 0 });
    });

    it("a list cursor that did not come from list is the caller's mistake (invalid_request), not an outage", async () => {
      const prefix = uniqueKey('sem-cursor');
      for (const cursor of ['\uFFFD\u0001garbage', 'not a cursor']) {
        await expect(permitsOf(store()).listPermits('semaphore', { prefix, limit: 3, cursor })).rejects.toMatchObject({
          code: 'invalid_request',
        });
      }
      // The store still answers (Redis may hand back a cursor to scan on from, never an entry).
      expect((await permitsOf(store()).listPermits('semaphore', { prefix, limit: 3 })).entries).toEqual([]);
    });
  });
}
