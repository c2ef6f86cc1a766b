import { clockOf, sleep } from './contract-kit.js';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newOwnerToken } from '../../src/domain/lock-service.js';
import type { LockSetStore, LockStore } from '../helpers/store-words.js';
import { ChangeWatch, lockIndex, lockWatchSource } from '../../src/domain/watch.js';
import { KeySpace } from '../../src/store/redis/keys.js';
import type { StoreHarness } from './lock-store.contract.js';

/** Ids of a namespace of their own (`ns/...`), as the service makes them. */
const uniqueId = (name: string) => `ns-${randomUUID().slice(0, 8)}/${name}`;

const redisKeys = new KeySpace('');

/**
 * `count` names `stem0`, `stem1`, ... that share one shard of the Redis key layout with `like` (keys.ts),
 * so a lock set of them is one Cluster slot and runs on a Redis Cluster too; any names would do elsewhere.
 */
function oneShard(count: number, stem: string, like = `${stem}0`): string[] {
  const names: string[] = [];
  for (let i = 0; names.length < count; i++) if (redisKeys.shardOf(`${stem}${i}`) === redisKeys.shardOf(like)) names.push(`${stem}${i}`);
  return names;
}

/** Watch index, lock-delay and lock sets: part of the one store contract on every store. */
export function describeWatchAndSetsContract(name: string, harness: StoreHarness): void {
  describe(`lock store contract, watch, lock-delay, lock sets: ${name}`, () => {
    const now = clockOf(harness);
    let a: LockStore;
    let b: LockStore;
    let watchB: ChangeWatch;

    beforeAll(async () => {
      a = await harness.open({ fenceGraceMs: 60_000 });
      b = await harness.peer(a);
      watchB = new ChangeWatch(lockWatchSource(b));
    });
    afterAll(async () => {
      for (const store of new Set([a, b])) await store.close();
    });

    const grant = async (store: LockStore, key: string, ttlMs = 5_000, lockDelayMs = 0) => {
      const ownerToken = newOwnerToken();
      const outcome = await store.acquire({ id: key, ownerToken, ttlMs, holder: null, lockDelayMs });
      if (!outcome.acquired) throw new Error(`not granted: ${key}`);
      return { ...outcome, ownerToken };
    };
    const index = async (store: LockStore, key: string) => lockIndex(await store.inspectIndexed(key));

    it('index: 1 for an unknown key, 2 x token while held, 2 x token + 1 once released; renew keeps it', async () => {
      const key = uniqueId('index');
      expect(await index(a, key)).toBe(1);
      const g = await grant(a, key);
      expect(await index(b, key)).toBe(2 * g.fencingToken);
      await a.renew(key, g.ownerToken, 5_000);
      expect(await index(b, key)).toBe(2 * g.fencingToken);
      await a.release(key, g.ownerToken);
      expect(await index(b, key)).toBe(2 * g.fencingToken + 1);
      const g2 = await grant(a, key);
      expect(2 * g2.fencingToken).toBeGreaterThan(2 * g.fencingToken + 1);
    });

    it('a blocking query on another instance wakes on a grant, a release and a force release', async () => {
      const key = uniqueId('wake');
      const start = await watchB.current(key);
      const woken = watchB.wait(key, start.index, 10_000);
      const g = await grant(a, key);
      expect((await woken).index).toBe(2 * g.fencingToken);
      const released = watchB.wait(key, 2 * g.fencingToken, 10_000);
      await a.release(key, g.ownerToken);
      expect((await released).state).toBeNull();
      const g2 = await grant(a, key);
      const forced = watchB.wait(key, 2 * g2.fencingToken, 10_000);
      await a.forceRelease(key);
      expect((await forced).index).toBe(2 * g2.fencingToken + 1);
    });

    it('a blocking query wakes when the lease expires (nothing writes then: the watcher times it)', async () => {
      const key = uniqueId('expiry');
      const g = await grant(a, key, 300);
      const began = performance.now();
      const view = await watchB.wait(key, 2 * g.fencingToken, 10_000);
      expect(view.index).toBe(2 * g.fencingToken + 1);
      expect(performance.now() - began).toBeLessThan(5_000);
    });

    it('an unchanged key answers after waitMs with the same index; a different index answers at once', async () => {
      const key = uniqueId('timeout');
      const g = await grant(a, key);
      const began = performance.now();
      const view = await watchB.wait(key, 2 * g.fencingToken, 300);
      expect(view.index).toBe(2 * g.fencingToken);
      expect(performance.now() - began).toBeGreaterThanOrEqual(290);
      const atOnce = performance.now();
      expect((await watchB.wait(key, 12345, 10_000)).index).toBe(2 * g.fencingToken);
      expect(performance.now() - atOnce).toBeLessThan(2_000);
      expect(watchB.size).toBe(0);
    });

    describe('lock-delay', () => {
      it('an EXPIRED lease keeps the lock unavailable for its delay, then it is free', async () => {
        const key = uniqueId('delay');
        await grant(a, key, 200, 1_000);
        await sleep(300);
        const refused = await b.acquire({ id: key, ownerToken: newOwnerToken(), ttlMs: 1_000, holder: null });
        expect(refused.acquired).toBe(false);
        if (!refused.acquired) expect(refused.retryAfterMs).toBeGreaterThan(300);
        const view = await b.inspectIndexed(key);
        expect(view.state).toBeNull();
        expect(view.lockDelayUntilMs).toBeGreaterThan(now());
        await expect
          .poll(async () => (await b.acquire({ id: key, ownerToken: newOwnerToken(), ttlMs: 1_000, holder: null })).acquired, {
            timeout: 5_000,
          })
          .toBe(true);
      });

      it('the delay shows only once the lease has run out; an idempotent retry during it is refused like anyone; a lock set touching it is refused', async () => {
        const key = uniqueId('delay-view');
        const idempotencyKey = `idem-${randomUUID()}`;
        const g = await a.acquire({ id: key, ownerToken: newOwnerToken(), ttlMs: 300, holder: null, lockDelayMs: 3_000, idempotencyKey });
        if (!g.acquired) throw new Error('not granted');
        const whileHeld = await b.inspectIndexed(key);
        expect(whileHeld.state).not.toBeNull();
        expect(whileHeld).not.toHaveProperty('lockDelayUntilMs');
        expect(await b.inspectIndexed(uniqueId('no-delay'))).not.toHaveProperty('lockDelayUntilMs');
        await expect.poll(async () => (await b.inspectIndexed(key)).state, { timeout: 5_000, interval: 20 }).toBeNull();
        const retry = await b.acquire({ id: key, ownerToken: newOwnerToken(), ttlMs: 1_000, holder: null, idempotencyKey });
        expect(retry.acquired).toBe(false);
        const other = `${key.split('/')[0] as string}/${oneShard(1, 'other', 'delay-view')[0] as string}`;
        const set = await a.lockSets.acquireSet({ ids: [other, key], ownerToken: newOwnerToken(), ttlMs: 1_000, holder: null });
        expect(set?.acquired).toBe(false);
        if (set === undefined || set.acquired) return;
        expect(set.busyId).toBe(key);
        expect(set.retryAfterMs).toBeGreaterThan(1);
        expect(set.retryAfterMs).toBeLessThanOrEqual(3_300);
        expect(await a.inspect(other)).toBeNull();
      });

      it('a waiter that asked for a delay is handed the lock with it: once its own lease runs out, the delay holds', async () => {
        const key = uniqueId('delay-waiter');
        await grant(a, key, 200);
        const waited = await b.acquire({
          id: key,
          ownerToken: newOwnerToken(),
          ttlMs: 300,
          holder: null,
          waitMs: 8_000,
          lockDelayMs: 5_000,
        });
        expect(waited.acquired).toBe(true);
        await expect.poll(async () => (await a.inspectIndexed(key)).state, { timeout: 5_000, interval: 20 }).toBeNull();
        expect((await a.inspectIndexed(key)).lockDelayUntilMs).toBeGreaterThan(now());
        expect((await a.acquire({ id: key, ownerToken: newOwnerToken(), ttlMs: 1_000, holder: null })).acquired).toBe(false);
      });

      it('a release ends it at once; a waiter is handed the lock only once the delay is over', async () => {
        const key = uniqueId('delay-release');
        const g = await grant(a, key, 5_000, 5_000);
        await a.release(key, g.ownerToken);
        await grant(b, key, 200, 800);
        const waited = b.acquire({ id: key, ownerToken: newOwnerToken(), ttlMs: 1_000, holder: null, waitMs: 8_000 });
        const began = performance.now();
        expect((await waited).acquired).toBe(true);
        // Lease (200) + delay (800), less what passed before the wait began.
        expect(performance.now() - began).toBeGreaterThan(700);
      });
    });

    describe('lock sets', () => {
      const sets = (): LockSetStore => a.lockSets;

      it("all or none: a set is refused with nothing taken when one key is held; a held set's keys are held for everyone", async () => {
        // One namespace for the whole set, as the service composes it and one shard (one Cluster slot).
        const ns = uniqueId('set').split('/')[0] as string;
        const [k1, k2, k3] = oneShard(3, 'x').map((n) => `${ns}/${n}`) as [string, string, string];
        const single = await grant(b, k2);
        const refused = await sets().acquireSet({ ids: [k1, k2, k3], ownerToken: newOwnerToken(), ttlMs: 5_000, holder: null });
        expect(refused.acquired).toBe(false);
        if (!refused.acquired) {
          expect(refused.busyId).toBe(k2);
          // Until the held key's lease ends.
          expect(refused.retryAfterMs).toBeGreaterThan(1);
          expect(refused.retryAfterMs).toBeLessThanOrEqual(single.expiresAtMs - now() + 50);
        }
        expect(await a.inspect(k1)).toBeNull();
        expect(await a.inspect(k3)).toBeNull();
        await b.release(k2, single.ownerToken);
        const ownerToken = newOwnerToken();
        const before = now();
        const set = await sets().acquireSet({ ids: [k1, k2, k3], ownerToken, ttlMs: 5_000, holder: 'mover' });
        expect(set.acquired).toBe(true);
        if (!set.acquired) return;
        expect(set.fencingTokens[1]).toBeGreaterThan(single.fencingToken);
        expect(set.expiresAtMs).toBeGreaterThanOrEqual(before + 5_000 - 50);
        expect(set.expiresAtMs).toBeLessThanOrEqual(now() + 5_000 + 50);
        expect((await b.acquire({ id: k3, ownerToken: newOwnerToken(), ttlMs: 1_000, holder: null })).acquired).toBe(false);
        expect((await b.inspect(k1))?.holder).toBe('mover');
        // Renew all or none; a renewal moves every key's lease and keeps its token.
        const renewed = await b.lockSets.renewSet([k1, k2, k3], ownerToken, 8_000);
        expect(renewed).toMatchObject({ renewed: true, fencingTokens: set.fencingTokens });
        if (!renewed?.renewed) return;
        expect(renewed.expiresAtMs).toBeGreaterThan(set.expiresAtMs);
        for (const k of [k1, k2, k3]) expect((await a.inspect(k))?.expiresAtMs).toBe(renewed.expiresAtMs);
        await b.forceRelease(k3);
        expect((await b.lockSets.renewSet([k1, k2, k3], ownerToken, 8_000))?.renewed).toBe(false);
        expect(await b.lockSets.releaseSet([k1, k2, k3], ownerToken)).toBe(true);
        expect(await b.inspect(k1)).toBeNull();
        expect(await b.lockSets.releaseSet([k1, k2, k3], ownerToken)).toBe(false);
      });

      it('overlapping sets asked for at once from two instances: one wins whole, the other gets nothing', async () => {
        for (let round = 0; round < 20; round++) {
          const ns = uniqueId('race').split('/')[0] as string;
          const [p, q, r] = oneShard(3, 'p').map((n) => `${ns}/${n}`) as [string, string, string];
          const first = { ids: [p, q], ownerToken: newOwnerToken() };
          const second = { ids: [q, r], ownerToken: newOwnerToken() };
          const [one, two] = await Promise.all([
            a.lockSets.acquireSet({ ...first, ttlMs: 5_000, holder: 'one' }),
            b.lockSets.acquireSet({ ...second, ttlMs: 5_000, holder: 'two' }),
          ]);
          expect([one?.acquired, two?.acquired].filter(Boolean)).toHaveLength(1);
          const winner = one?.acquired ? 'one' : 'two';
          const lonely = winner === 'one' ? r : p;
          expect(await a.inspect(lonely)).toBeNull();
          expect((await a.inspect(q))?.holder).toBe(winner);
        }
      });
    });
  });
}
