import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newOwnerToken } from '../../src/domain/lock-service.js';
import type { LockStore } from '../../src/store/store.js';
import { describeWaitingContract } from './waiting.contract.js';

/**
 * One behaviour contract for every lock store. A backend is done when this suite passes against it.
 * The harness passes a factory and the ways to hurt that backend (lose its data, look inside it).
 */
export interface StoreHarness {
  /** A store with the given fencing grace period (ms). */
  open(options: { fenceGraceMs: number; maxWaitersPerKey?: number }): Promise<LockStore>;
  /** Another handle on the same data, as a second keyholder instance would have. */
  peer(store: LockStore): Promise<LockStore>;
  /** Loses every lock's data as the backend can in real life (process restart, FLUSHALL). Returns the store to use after. */
  loseData(store: LockStore): Promise<LockStore>;
  /** Whether the backend keeps any state for `key` (for the "no state kept for ever" rule). */
  hasState(store: LockStore, key: string): Promise<boolean>;
  /** Makes the backend forget what it may forget now (a sweep), where that is not automatic. */
  collect?(store: LockStore): Promise<void>;
  teardown?(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const uniqueKey = (name: string) => `${name}:${randomUUID()}`;

export function describeStoreContract(name: string, harness: StoreHarness): void {
  describe(`lock store contract: ${name}`, () => {
    let store: LockStore;

    beforeAll(async () => {
      store = await harness.open({ fenceGraceMs: 60_000 });
    });
    afterAll(async () => {
      await store.close();
      await harness.teardown?.();
    });

    const acquire = (key: string, ttlMs = 5_000, holder: string | null = null, ownerToken = newOwnerToken()) =>
      store.acquire({ key, ownerToken, ttlMs, holder }).then((outcome) => ({ ...outcome, ownerToken }));

    it('grants a free lock with a fencing token and an expiry on the store clock', async () => {
      const before = Date.now();
      const grant = await acquire(uniqueKey('free'), 5_000, 'worker-1');
      expect(grant.acquired).toBe(true);
      if (!grant.acquired) return;
      expect(Number.isSafeInteger(grant.fencingToken)).toBe(true);
      expect(grant.fencingToken).toBeGreaterThan(0);
      // The store clock and this clock are the same machine's; allow a little slack.
      expect(grant.expiresAtMs).toBeGreaterThanOrEqual(before + 5_000 - 50);
      expect(grant.expiresAtMs).toBeLessThanOrEqual(Date.now() + 5_000 + 50);
    });

    it('refuses a held lock and says how long the lease has left', async () => {
      const key = uniqueKey('held');
      const first = await acquire(key, 3_000);
      expect(first.acquired).toBe(true);
      const second = await acquire(key, 3_000);
      expect(second.acquired).toBe(false);
      if (second.acquired) return;
      expect(second.retryAfterMs).toBeGreaterThan(0);
      expect(second.retryAfterMs).toBeLessThanOrEqual(3_000);
    });

    it('renew and release with a wrong token change nothing', async () => {
      const key = uniqueKey('wrong');
      const grant = await acquire(key, 5_000, 'owner');
      if (!grant.acquired) throw new Error('not granted');
      const before = await store.inspect(key);
      expect(await store.renew(key, newOwnerToken(), 60_000)).toEqual({ renewed: false });
      expect(await store.release(key, newOwnerToken())).toBe(false);
      const after = await store.inspect(key);
      expect(after?.fencingToken).toBe(before?.fencingToken);
      expect(after?.expiresAtMs).toBe(before?.expiresAtMs);
      expect(after?.holder).toBe('owner');
      expect(await store.release(key, grant.ownerToken)).toBe(true);
    });

    it('operations on an unknown key report not held', async () => {
      const key = uniqueKey('unknown');
      expect(await store.inspect(key)).toBeNull();
      expect(await store.renew(key, newOwnerToken(), 1_000)).toEqual({ renewed: false });
      expect(await store.release(key, newOwnerToken())).toBe(false);
    });

    it('a lease expires by itself, and its owner can then neither renew nor release it', async () => {
      const key = uniqueKey('expiry');
      const grant = await acquire(key, 150);
      if (!grant.acquired) throw new Error('not granted');
      await sleep(250);
      expect(await store.inspect(key)).toBeNull();
      expect(await store.renew(key, grant.ownerToken, 1_000)).toEqual({ renewed: false });
      expect(await store.release(key, grant.ownerToken)).toBe(false);
      const next = await acquire(key, 1_000);
      expect(next.acquired).toBe(true);
      if (next.acquired) expect(next.fencingToken).toBeGreaterThan(grant.fencingToken);
    });

    it('renew keeps the fencing token and moves the expiry', async () => {
      const key = uniqueKey('renew');
      const grant = await acquire(key, 300);
      if (!grant.acquired) throw new Error('not granted');
      await sleep(50);
      const renewed = await store.renew(key, grant.ownerToken, 5_000);
      expect(renewed.renewed).toBe(true);
      if (!renewed.renewed) return;
      expect(renewed.fencingToken).toBe(grant.fencingToken);
      expect(renewed.expiresAtMs).toBeGreaterThan(grant.expiresAtMs);
      // Past the original lease, the renewed one still holds.
      await sleep(400);
      expect((await store.inspect(key))?.fencingToken).toBe(grant.fencingToken);
      expect((await acquire(key)).acquired).toBe(false);
    });

    it('release frees the lock; the next grant has a higher token; a second release fails', async () => {
      const key = uniqueKey('release');
      const grant = await acquire(key);
      if (!grant.acquired) throw new Error('not granted');
      expect(await store.release(key, grant.ownerToken)).toBe(true);
      expect(await store.release(key, grant.ownerToken)).toBe(false);
      expect(await store.inspect(key)).toBeNull();
      const next = await acquire(key);
      expect(next.acquired).toBe(true);
      if (next.acquired) expect(next.fencingToken).toBeGreaterThan(grant.fencingToken);
    });

    it('inspect shows holder, token and expiry, never the owner token', async () => {
      const key = uniqueKey('inspect');
      const grant = await acquire(key, 5_000, 'consumer-7');
      if (!grant.acquired) throw new Error('not granted');
      const state = await store.inspect(key);
      expect(state).toMatchObject({ holder: 'consumer-7', fencingToken: grant.fencingToken, expiresAtMs: grant.expiresAtMs });
      expect(state?.ttlRemainingMs).toBeGreaterThan(4_000);
      expect(state?.ttlRemainingMs).toBeLessThanOrEqual(5_000);
      expect(JSON.stringify(state)).not.toContain(grant.ownerToken);
      const anonymous = uniqueKey('anon');
      await acquire(anonymous);
      expect((await store.inspect(anonymous))?.holder).toBeNull();
    });

    it('200 concurrent acquirers of one key: exactly one winner', async () => {
      const key = uniqueKey('race');
      const outcomes = await Promise.all(Array.from({ length: 200 }, () => acquire(key, 5_000)));
      expect(outcomes.filter((o) => o.acquired)).toHaveLength(1);
    });

    it('tokens strictly increase over many grants of one key, in grant order', async () => {
      const key = uniqueKey('sequence');
      let last = 0;
      for (let i = 0; i < 200; i++) {
        const grant = await acquire(key, 1_000);
        if (!grant.acquired) throw new Error('not granted');
        expect(grant.fencingToken).toBeGreaterThan(last);
        last = grant.fencingToken;
        expect(await store.release(key, grant.ownerToken)).toBe(true);
      }
    });

    it('tokens keep increasing after the store loses its data', async () => {
      const keys = [uniqueKey('loss-a'), uniqueKey('loss-b')];
      const highest = new Map<string, number>();
      for (const key of keys) {
        // A burst of grants in a row, so the counter may run ahead of the clock.
        for (let i = 0; i < 50; i++) {
          const grant = await acquire(key, 1_000);
          if (!grant.acquired) throw new Error('not granted');
          highest.set(key, grant.fencingToken);
          await store.release(key, grant.ownerToken);
        }
      }
      store = await harness.loseData(store);
      for (const key of keys) {
        expect(await store.inspect(key)).toBeNull();
        const grant = await acquire(key, 1_000);
        expect(grant.acquired).toBe(true);
        if (grant.acquired) expect(grant.fencingToken).toBeGreaterThan(highest.get(key) ?? Infinity);
      }
    });

    it('an idle key leaves no state behind once its grace period is over', async () => {
      const shortGrace = await harness.open({ fenceGraceMs: 1_000 });
      try {
        const released = uniqueKey('idle-released');
        const expired = uniqueKey('idle-expired');
        const grant = await shortGrace.acquire({ key: released, ownerToken: 'a'.repeat(22), ttlMs: 5_000, holder: null });
        expect(grant.acquired).toBe(true);
        await shortGrace.acquire({ key: expired, ownerToken: 'b'.repeat(22), ttlMs: 200, holder: null });
        expect(await shortGrace.release(released, 'a'.repeat(22))).toBe(true);
        expect(await harness.hasState(shortGrace, released)).toBe(true);
        await sleep(1_400);
        await harness.collect?.(shortGrace);
        expect(await harness.hasState(shortGrace, released)).toBe(false);
        expect(await harness.hasState(shortGrace, expired)).toBe(false);
      } finally {
        await shortGrace.close();
      }
    });

    it('ping answers while the store is up', async () => {
      await expect(store.ping()).resolves.toBeUndefined();
    });
  });
  describeWaitingContract(name, harness);
}
