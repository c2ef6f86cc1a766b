import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LockStore } from '../helpers/store-words.js';
import type { PermitKind } from '../../src/domain/permit-values.js';
import { ChangeWatch, permitWatchSource } from '../../src/domain/watch.js';
import type { StoreHarness } from './lock-store.contract.js';
import { granted, permitsOf, takePermit, uniqueKey } from './permit-harness.js';

/**
 * The watch index of semaphores and read/write locks, and blocking queries on them through the one
 * ChangeWatch: the index rises on every grant, release, expiry, force release and hand-over, not on a
 * renewal, and a watcher on another instance is woken by each of those changes. Part of the store
 * contract, run on every store that has permits.
 */
export function describePermitWatchContract(name: string, harness: StoreHarness): void {
  describe(`permit watch contract: ${name}`, () => {
    let a: LockStore;
    let b: LockStore;

    beforeAll(async () => {
      a = await harness.open({ fenceGraceMs: 60_000 });
      b = await harness.peer(a);
    });
    afterAll(async () => {
      for (const store of new Set([a, b])) await store.close();
    });

    const indexOf = async (kind: PermitKind, key: string) => (await permitsOf(a).inspectPermitsIndexed(kind, key)).index;

    for (const kind of ['semaphore', 'rwlock'] as const) {
      // A semaphore permit weighs 1 of 2; a read lease 1 of the reader cap (a write would be all of it).
      const call = { weight: 1, capacity: 2 };

      it(`${kind}: index 0 for an unknown key; it rises on grant, release, force release and hand-over, not on renew`, async () => {
        const key = uniqueKey(`${kind}-index`);
        const permits = permitsOf(a);
        expect(await indexOf(kind, key)).toBe(0);
        const first = granted(await takePermit(a, kind, key, call));
        const i1 = await indexOf(kind, key);
        expect(i1).toBeGreaterThan(0);
        expect((await permits.inspectPermitsIndexed(kind, key)).state?.holders.map((h) => h.fencingToken)).toEqual([first.fencingToken]);
        expect((await permits.renewPermit(kind, key, first.ownerToken, 5_000)).renewed).toBe(true);
        expect(await indexOf(kind, key)).toBe(i1);
        const second = granted(await takePermit(a, kind, key, call));
        const i2 = await indexOf(kind, key);
        expect(i2).toBeGreaterThan(i1);
        expect(await permits.releasePermit(kind, key, second.ownerToken)).toBe(true);
        const i3 = await indexOf(kind, key);
        expect(i3).toBeGreaterThan(i2);
        expect(await permits.forceReleasePermits(kind, key)).toHaveLength(1);
        const i4 = await indexOf(kind, key);
        expect(i4).toBeGreaterThan(i3);
        expect((await permits.inspectPermitsIndexed(kind, key)).state).toBeNull();
        // A hand-over: the queued caller is granted by the release, and the index rises again.
        const holder = granted(await takePermit(a, kind, key, { weight: 2, capacity: 2 }));
        const queued = takePermit(b, kind, key, { ...call, waitMs: 10_000 });
        await expect
          .poll(async () => (await permits.inspectPermitsIndexed(kind, key)).state?.waiters, { timeout: 10_000, interval: 10 })
          .toBe(1);
        const i5 = await indexOf(kind, key);
        expect(await permits.releasePermit(kind, key, holder.ownerToken)).toBe(true);
        granted(await queued);
        expect(await indexOf(kind, key)).toBeGreaterThan(i5);
      });

      it(`${kind}: an expiry raises the index with nothing written, and a watcher on another instance is woken by it`, async () => {
        const key = uniqueKey(`${kind}-expiry`);
        granted(await takePermit(a, kind, key, { ...call, ttlMs: 300 }));
        const held = await indexOf(kind, key);
        const watch = new ChangeWatch(permitWatchSource(b.leases, kind));
        const woken = await watch.wait(key, held, 10_000);
        expect(woken.state).toBeNull();
        expect(woken.index).toBeGreaterThan(held);
        expect(await indexOf(kind, key)).toBe(woken.index);
      });

      it(`${kind}: a blocking query answers at once when the index differs, and on another instance as soon as a grant or release happens`, async () => {
        const key = uniqueKey(`${kind}-wait`);
        const watch = new ChangeWatch(permitWatchSource(b.leases, kind));
        const free = await indexOf(kind, key);
        expect((await watch.wait(key, free + 1, 10_000)).index).toBe(free);
        const onGrant = watch.wait(key, free, 10_000);
        await expect.poll(() => watch.size, { timeout: 10_000, interval: 5 }).toBe(1);
        const lease = granted(await takePermit(a, kind, key, call));
        const afterGrant = await onGrant;
        expect(afterGrant.index).not.toBe(free);
        expect(afterGrant.state?.holders.map((h) => h.fencingToken)).toEqual([lease.fencingToken]);
        const onRelease = watch.wait(key, afterGrant.index, 10_000);
        await expect.poll(() => watch.size, { timeout: 10_000, interval: 5 }).toBe(1);
        expect(await permitsOf(a).releasePermit(kind, key, lease.ownerToken)).toBe(true);
        const afterRelease = await onRelease;
        expect(afterRelease.state).toBeNull();
        expect(afterRelease.index).toBeGreaterThan(afterGrant.index);
        // Nothing changes: the wait ends after waitMs with the same index.
        expect((await watch.wait(key, afterRelease.index, 50)).index).toBe(afterRelease.index);
      });
    }
  });
}
