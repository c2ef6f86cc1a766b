import { clockOf, sleep } from './contract-kit.js';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { IdempotencyKeyReusedError, StoreUnavailableError } from '../../src/domain/errors.js';
import { idempotencyKeyOf } from '../../src/domain/idempotency.js';
import { newOwnerToken } from '../../src/domain/lock-service.js';
import type { LockStore } from '../helpers/store-words.js';
import type { Clock } from '../../src/store/shared/clock.js';
import { describeWaitingContract } from './waiting.contract.js';
import { describeWatchAndSetsContract } from './watch-and-sets.contract.js';
import { describePermitWatchContract } from './permit-watch.contract.js';
import { describePermitKindsContract } from './permit-kinds.contract.js';
import { describeRwLockContract } from './rwlock.contract.js';
import { describeSemaphoreContract } from './semaphore.contract.js';
import { describeReleaseRequestContract } from './release-request.contract.js';

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
  /**
   * The clock the store's times (lease ends, refusals' waits, request times) are on, read here;
   * `Date.now` when absent, as redis-server's TIME is. A store in this process reads the monotonic
   * wall clock, which parts from `Date.now` while the system clock is slewed or stepped: by 130 to
   * 190 ms within one test file on a CI machine, more than the contract's 50 ms of slack. The
   * contract's "now" is the store's, so that cannot fail it.
   */
  clock?: Clock;
}

const uniqueKey = (name: string) => `${name}:${randomUUID()}`;

export function describeStoreContract(name: string, harness: StoreHarness): void {
  describe(`lock store contract: ${name}`, () => {
    const now = clockOf(harness);
    let store: LockStore;

    beforeAll(async () => {
      store = await harness.open({ fenceGraceMs: 60_000 });
    });
    afterAll(async () => {
      await store.close();
      await harness.teardown?.();
    });

    const acquire = (key: string, ttlMs = 5_000, holder: string | null = null, ownerToken = newOwnerToken()) =>
      store.acquire({ id: key, ownerToken, ttlMs, holder }).then((outcome) => ({ ...outcome, ownerToken }));

    it('grants a free lock with a fencing token and an expiry on the store clock', async () => {
      const before = now();
      const grant = await acquire(uniqueKey('free'), 5_000, 'worker-1');
      expect(grant.acquired).toBe(true);
      if (!grant.acquired) return;
      expect(Number.isSafeInteger(grant.fencingToken)).toBe(true);
      expect(grant.fencingToken).toBeGreaterThan(0);
      // The store clock and this clock are the same machine's; allow a little slack.
      expect(grant.expiresAtMs).toBeGreaterThanOrEqual(before + 5_000 - 50);
      expect(grant.expiresAtMs).toBeLessThanOrEqual(now() + 5_000 + 50);
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
      // Long enough that a starved process still renews it in time (300 ms was not, at a load of 45).
      const grant = await acquire(key, 1_000);
      if (!grant.acquired) throw new Error('not granted');
      await sleep(50);
      const before = now();
      const renewed = await store.renew(key, grant.ownerToken, 5_000);
      expect(renewed.renewed).toBe(true);
      if (!renewed.renewed) return;
      expect(renewed.fencingToken).toBe(grant.fencingToken);
      // 5 s from the renew, on the store clock (not from the old lease end); a little slack as above.
      expect(renewed.expiresAtMs).toBeGreaterThanOrEqual(before + 5_000 - 50);
      expect(renewed.expiresAtMs).toBeLessThanOrEqual(now() + 5_000 + 50);
      // Past the original lease, the renewed one still holds.
      await sleep(grant.expiresAtMs - now() + 100);
      expect((await store.inspect(key))?.fencingToken).toBe(grant.fencingToken);
      expect((await acquire(key)).acquired).toBe(false);
    });

    it('renew measures the new lease from now, not from the old lease end: a shorter renew shortens it', async () => {
      // The test above cannot tell "now + ttl" from "old end + ttl" once its 50 ms sleep stretches past
      // 250 ms on a busy machine; here the two differ by the 60 s still left on the grant.
      const key = uniqueKey('renew-shorter');
      const grant = await acquire(key, 60_000);
      if (!grant.acquired) throw new Error('not granted');
      const before = now();
      const renewed = await store.renew(key, grant.ownerToken, 1_000);
      const after = now();
      if (!renewed.renewed) throw new Error('not renewed');
      expect(renewed.expiresAtMs).toBeGreaterThanOrEqual(before + 1_000 - 50);
      expect(renewed.expiresAtMs).toBeLessThanOrEqual(after + 1_000 + 50);
      expect((await store.inspect(key))?.ttlRemainingMs).toBeLessThanOrEqual(1_000);
      expect(await store.release(key, grant.ownerToken)).toBe(true);
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

    it('an empty holder label is no label', async () => {
      const key = uniqueKey('empty-holder');
      const grant = await acquire(key, 5_000, '');
      expect(grant.acquired).toBe(true);
      expect((await store.inspect(key))?.holder).toBeNull();
      expect(await store.forceRelease(key)).toMatchObject({ released: true, holder: null });
    });

    it("an acquire with the live lease's idempotency key gets that lease back; other keys, and the key after the lease, do not", async () => {
      const key = uniqueKey('idem');
      const first = await store.acquire({ id: key, ownerToken: newOwnerToken(), ttlMs: 5_000, holder: 'w1', idempotencyKey: 'idem-a' });
      if (!first.acquired) throw new Error('not granted');
      expect(first.replayed).toBeUndefined();

      // The same idempotency key while the lease is live: the same grant (token, expiry, owner, holder).
      const again = await store.acquire({ id: key, ownerToken: newOwnerToken(), ttlMs: 9_000, holder: 'other', idempotencyKey: 'idem-a' });
      expect(again).toMatchObject({ acquired: true, fencingToken: first.fencingToken, expiresAtMs: first.expiresAtMs });
      if (!again.acquired || !again.replayed) throw new Error('not replayed');
      expect(again.replayed.holder).toBe('w1');
      // The replayed owner token is the live lease's: it renews and releases it.
      expect(await store.renew(key, again.replayed.ownerToken, 5_000)).toMatchObject({ renewed: true, fencingToken: first.fencingToken });

      // Another idempotency key, or none, is refused as usual; waiting callers too are answered at once.
      expect(
        (await store.acquire({ id: key, ownerToken: newOwnerToken(), ttlMs: 5_000, holder: null, idempotencyKey: 'idem-b' })).acquired,
      ).toBe(false);
      expect((await store.acquire({ id: key, ownerToken: newOwnerToken(), ttlMs: 5_000, holder: null })).acquired).toBe(false);
      const waited = await store.acquire({
        id: key,
        ownerToken: newOwnerToken(),
        ttlMs: 5_000,
        holder: null,
        waitMs: 5_000,
        idempotencyKey: 'idem-a',
      });
      expect(waited).toMatchObject({
        acquired: true,
        fencingToken: first.fencingToken,
        replayed: { ownerToken: again.replayed.ownerToken },
      });

      // Kept only as long as the lease: after release, the key grants a new lease with a higher token.
      expect(await store.release(key, again.replayed.ownerToken)).toBe(true);
      const next = await store.acquire({ id: key, ownerToken: newOwnerToken(), ttlMs: 5_000, holder: null, idempotencyKey: 'idem-a' });
      expect(next).toMatchObject({ acquired: true });
      if (!next.acquired) return;
      expect(next.replayed).toBeUndefined();
      expect(next.fencingToken).toBeGreaterThan(first.fencingToken);

      // A lease granted without a key (here: after a force release) never answers an old key.
      await store.forceRelease(key);
      const plain = newOwnerToken();
      expect((await store.acquire({ id: key, ownerToken: plain, ttlMs: 5_000, holder: null })).acquired).toBe(true);
      expect(
        (await store.acquire({ id: key, ownerToken: newOwnerToken(), ttlMs: 5_000, holder: null, idempotencyKey: 'idem-a' })).acquired,
      ).toBe(false);
      expect(await store.release(key, plain)).toBe(true);

      // Nor does a lease handed to a waiter when a keyed lease runs out.
      const keyed = await store.acquire({ id: key, ownerToken: newOwnerToken(), ttlMs: 300, holder: null, idempotencyKey: 'idem-h' });
      expect(keyed.acquired).toBe(true);
      const waiter = newOwnerToken();
      const handed = await store.acquire({ id: key, ownerToken: waiter, ttlMs: 5_000, holder: null, waitMs: 10_000 });
      expect(handed).toMatchObject({ acquired: true });
      expect(
        (await store.acquire({ id: key, ownerToken: newOwnerToken(), ttlMs: 5_000, holder: null, idempotencyKey: 'idem-h' })).acquired,
      ).toBe(false);
      expect(await store.release(key, waiter)).toBe(true);
    });

    it('an idempotency key reused for another request (same scope, other fingerprint) is refused with idempotency_key_reused; nothing changes', async () => {
      const key = uniqueKey('idem-reuse');
      const asked = (ttlMs: number, holder: string | null) => idempotencyKeyOf('caller', 'retry-1', { ttlMs, holder, lockDelayMs: 0 });
      const owner = newOwnerToken();
      const first = await store.acquire({ id: key, ownerToken: owner, ttlMs: 5_000, holder: 'w1', idempotencyKey: asked(5_000, 'w1') });
      if (!first.acquired) throw new Error('not granted');

      // The same request again: the same grant, exactly.
      const again = await store.acquire({
        id: key,
        ownerToken: newOwnerToken(),
        ttlMs: 5_000,
        holder: 'w1',
        idempotencyKey: asked(5_000, 'w1'),
      });
      expect(again).toMatchObject({
        acquired: true,
        fencingToken: first.fencingToken,
        expiresAtMs: first.expiresAtMs,
        replayed: { ownerToken: owner, holder: 'w1' },
      });

      // Another ttlMs or holder under the same key: refused, whether the caller waits or not.
      for (const [ttlMs, holder, waitMs] of [
        [3_600_000, 'w1', 0],
        [5_000, 'w2', 0],
        [5_000, null, 0],
        [5_000, 'w2', 5_000],
      ] as const) {
        const reused = store.acquire({ id: key, ownerToken: newOwnerToken(), ttlMs, holder, waitMs, idempotencyKey: asked(ttlMs, holder) });
        await expect(reused).rejects.toBeInstanceOf(IdempotencyKeyReusedError);
      }
      // Another caller's key on the same lock is just a held lock.
      const other = idempotencyKeyOf('other-caller', 'retry-1', { ttlMs: 5_000, holder: 'w1', lockDelayMs: 0 });
      expect(
        (await store.acquire({ id: key, ownerToken: newOwnerToken(), ttlMs: 5_000, holder: 'w1', idempotencyKey: other })).acquired,
      ).toBe(false);
      // Nothing changed: the lease is the first one, and its owner still holds it.
      expect(await store.inspect(key)).toMatchObject({ holder: 'w1', fencingToken: first.fencingToken, expiresAtMs: first.expiresAtMs });
      expect(await store.release(key, owner)).toBe(true);
      // Once the lease is gone, the key is free to shape a new request.
      expect(
        await store.acquire({ id: key, ownerToken: newOwnerToken(), ttlMs: 4_000, holder: null, idempotencyKey: asked(4_000, null) }),
      ).toMatchObject({ acquired: true });
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
        const grant = await shortGrace.acquire({ id: released, ownerToken: 'a'.repeat(22), ttlMs: 5_000, holder: null });
        expect(grant.acquired).toBe(true);
        await shortGrace.acquire({ id: expired, ownerToken: 'b'.repeat(22), ttlMs: 200, holder: null });
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

    it('force release frees a held lock whoever holds it; the evicted token is dead; the next token is higher', async () => {
      const key = uniqueKey('force');
      const grant = await acquire(key, 60_000, 'stuck-worker');
      if (!grant.acquired) throw new Error('not granted');
      const outcome = await store.forceRelease(key);
      expect(outcome).toEqual({
        released: true,
        holder: 'stuck-worker',
        fencingToken: grant.fencingToken,
        evictedOwnerToken: grant.ownerToken,
      });
      expect(await store.inspect(key)).toBeNull();
      expect(await store.renew(key, grant.ownerToken, 60_000)).toEqual({ renewed: false });
      expect(await store.release(key, grant.ownerToken)).toBe(false);
      const next = await acquire(key);
      expect(next.acquired).toBe(true);
      if (next.acquired) expect(next.fencingToken).toBeGreaterThan(grant.fencingToken);
      // The evicted owner cannot touch the new holder's lease either.
      expect(await store.release(key, grant.ownerToken)).toBe(false);
      expect((await store.inspect(key))?.fencingToken).toBe(next.acquired ? next.fencingToken : -1);
    });

    it('force release naming a fencing token evicts only that lease: a newer holder keeps the lock', async () => {
      const key = uniqueKey('force-token');
      const shown = await acquire(key, 60_000, 'shown');
      if (!shown.acquired) throw new Error('not granted');
      // The lease the operator looked at ends and another holder takes the lock.
      expect(await store.release(key, shown.ownerToken)).toBe(true);
      const newer = await acquire(key, 60_000, 'newer');
      if (!newer.acquired) throw new Error('not granted');
      expect(await store.forceRelease(key, shown.fencingToken)).toEqual({ released: false });
      expect(await store.inspect(key)).toMatchObject({ holder: 'newer', fencingToken: newer.fencingToken });
      expect(await store.renew(key, newer.ownerToken, 60_000)).toMatchObject({ renewed: true });
      // Named by its own token, the live lease goes, as an unconditional force release would.
      expect(await store.forceRelease(key, newer.fencingToken)).toEqual({
        released: true,
        holder: 'newer',
        fencingToken: newer.fencingToken,
        evictedOwnerToken: newer.ownerToken,
      });
      expect(await store.inspect(key)).toBeNull();
      expect(await store.forceRelease(key, newer.fencingToken)).toEqual({ released: false });
    });

    it('force release of a free, expired or unknown lock changes nothing', async () => {
      expect(await store.forceRelease(uniqueKey('force-unknown'))).toEqual({ released: false });
      const key = uniqueKey('force-expired');
      await acquire(key, 100);
      await sleep(200);
      expect(await store.forceRelease(key)).toEqual({ released: false });
    });

    it('list pages through held locks under a prefix, never showing owner tokens or free locks', async () => {
      const prefix = `${uniqueKey('list')}/`;
      const held = new Map<string, number>();
      const tokens: string[] = [];
      for (let i = 0; i < 7; i++) {
        const grant = await acquire(`${prefix}k${i}`, 30_000, `h${i}`);
        if (!grant.acquired) throw new Error('not granted');
        held.set(`${prefix}k${i}`, grant.fencingToken);
        tokens.push(grant.ownerToken);
      }
      // Released and expired locks, and locks outside the prefix, are not listed.
      const released = await acquire(`${prefix}released`);
      if (released.acquired) await store.release(`${prefix}released`, released.ownerToken);
      await acquire(`${prefix}expired`, 100);
      await acquire(`${uniqueKey('other')}/k0`);
      await sleep(200);

      const seen = new Map<string, number>();
      let cursor: string | undefined;
      for (let page = 0; page < 100; page++) {
        const result = await store.list({ prefix, limit: 3, cursor });
        expect(JSON.stringify(result)).not.toMatch(new RegExp(tokens.join('|')));
        for (const lock of result.leases) {
          expect(lock.id.startsWith(prefix)).toBe(true);
          expect(lock.holder).toMatch(/^h\d$/);
          expect(lock.ttlRemainingMs).toBeGreaterThan(0);
          seen.set(lock.id, lock.fencingToken);
        }
        if (result.nextCursor === null) break;
        cursor = result.nextCursor;
      }
      expect(seen).toEqual(held);
    });

    it("a cursor that did not come from list is the caller's mistake (invalid_request on cursor), not an outage", async () => {
      const prefix = `${uniqueKey('cursor')}/`;
      for (const cursor of ['\uFFFD\u0001garbage', 'not a cursor', '99999999999999999999999']) {
        await expect(store.list({ prefix, limit: 3, cursor })).rejects.toMatchObject({ code: 'invalid_request', field: 'cursor' });
      }
      // The store still answers.
      expect(await store.list({ prefix, limit: 3 })).toEqual({ leases: [], nextCursor: null });
    });

    it('quota slots: at most maxQuotaSlots live slots per namespace; freed or ended slots make room (an ended one within a second of its end)', async () => {
      const ns = uniqueKey('quota');
      expect(await store.reserveQuotaSlot(ns, 'a', 5_000, 2)).toEqual({ reserved: true });
      expect(await store.reserveQuotaSlot(ns, 'b', 300, 2)).toEqual({ reserved: true });
      const endOfB = now() + 300;
      const full = await store.reserveQuotaSlot(ns, 'c', 5_000, 2);
      expect(full.reserved).toBe(false);
      if (!full.reserved) {
        expect(full.retryAfterMs).toBeGreaterThan(0);
        // A store that counts by the second (Redis, docs/limits.md) says when b's second ends.
        expect(full.retryAfterMs).toBeLessThanOrEqual(1_300);
      }
      // Another namespace has its own slots.
      expect(await store.reserveQuotaSlot(uniqueKey('quota-other'), 'c', 5_000, 2)).toEqual({ reserved: true });
      // An ended slot stops counting by itself: asked again as told, until b's end plus its second.
      let again = await store.reserveQuotaSlot(ns, 'c', 5_000, 2);
      while (!again.reserved && now() < endOfB + 1_000 + 2_000) {
        await sleep(again.retryAfterMs);
        again = await store.reserveQuotaSlot(ns, 'c', 5_000, 2);
      }
      expect(again).toEqual({ reserved: true });
      expect((await store.reserveQuotaSlot(ns, 'd', 5_000, 2)).reserved).toBe(false);
      // A freed slot makes room at once; freeing an unknown one is harmless.
      await store.freeQuotaSlot(ns, 'a', 2);
      await store.freeQuotaSlot(ns, 'nobody', 2);
      expect(await store.reserveQuotaSlot(ns, 'd', 5_000, 2)).toEqual({ reserved: true });
    });

    it('quota slots: extend moves a slot later, never earlier, and counts a missing slot again, over the cap if need be', async () => {
      const ns = uniqueKey('quota-extend');
      expect(await store.reserveQuotaSlot(ns, 'a', 200, 1)).toEqual({ reserved: true });
      await store.extendQuotaSlot(ns, 'a', now() + 5_000, 1);
      await store.extendQuotaSlot(ns, 'a', now() + 10, 1);
      await sleep(350);
      // Still held by the extended slot "a".
      expect((await store.reserveQuotaSlot(ns, 'b', 1_000, 1)).reserved).toBe(false);
      await store.freeQuotaSlot(ns, 'a', 1);
      // An extend is sent for a lease just renewed: a slot gone missing while its lease lived on counts again.
      await store.extendQuotaSlot(ns, 'a', now() + 5_000, 1);
      expect((await store.reserveQuotaSlot(ns, 'b', 1_000, 1)).reserved).toBe(false);
      // Over the cap if need be: the lease it counts is held. The namespace then holds two slots.
      await store.extendQuotaSlot(ns, 'ghost', now() + 5_000, 1);
      await store.freeQuotaSlot(ns, 'a', 1);
      expect((await store.reserveQuotaSlot(ns, 'b', 1_000, 1)).reserved).toBe(false);
      await store.freeQuotaSlot(ns, 'ghost', 1);
      expect(await store.reserveQuotaSlot(ns, 'b', 1_000, 1)).toEqual({ reserved: true });
    });

    it('quota slots: a retired slot is given back, and no extend moves or counts it again; a plain free leaves it retired', async () => {
      const ns = uniqueKey('quota-retire');
      expect(await store.reserveQuotaSlot(ns, 'a', 5_000, 1)).toEqual({ reserved: true });
      // Its lease was force-released; the lease's end was a minute away.
      const leaseEnd = now() + 60_000;
      await store.retireQuotaSlot(ns, 'a', leaseEnd, 1);
      // The extend of a renewal decided before the eviction, then the evicted holder's own release: still free.
      await store.extendQuotaSlot(ns, 'a', leaseEnd, 1);
      await store.freeQuotaSlot(ns, 'a', 1);
      await store.extendQuotaSlot(ns, 'a', leaseEnd, 1);
      expect(await store.reserveQuotaSlot(ns, 'b', 1_000, 1)).toEqual({ reserved: true });
      // A slot retired that was missing is never counted by an extend either.
      await store.retireQuotaSlot(ns, 'c', leaseEnd, 1);
      await store.freeQuotaSlot(ns, 'b', 1);
      await store.extendQuotaSlot(ns, 'c', leaseEnd, 1);
      expect(await store.reserveQuotaSlot(ns, 'd', 1_000, 1)).toEqual({ reserved: true });
      // Other slots are extended and counted again as before.
      await store.freeQuotaSlot(ns, 'd', 1);
      await store.extendQuotaSlot(ns, 'e', leaseEnd, 1);
      expect((await store.reserveQuotaSlot(ns, 'f', 1_000, 1)).reserved).toBe(false);
      await store.freeQuotaSlot(ns, 'e', 1);
    });

    it('the quota bound (docs/limits.md) on every store: a limit of 700 is never exceeded, and nobody is refused below it', async () => {
      const ns = uniqueKey('quota-bound');
      let held = 0;
      let firstRefusal: number | undefined;
      // One at a time: an optimistic store (etcd) retries on every concurrent reservation.
      for (let i = 0; i < 750; i++) {
        if ((await store.reserveQuotaSlot(ns, `unit-${i}`, 60_000, 700)).reserved) held++;
        else firstRefusal ??= held;
      }
      expect(held).toBe(700);
      expect(firstRefusal).toBe(700);
    }, 120_000);

    it('200 concurrent slot reservations against a cap of 5: exactly 5 succeed', async () => {
      const ns = uniqueKey('quota-race');
      const outcomes = await Promise.all(Array.from({ length: 200 }, (_, i) => store.reserveQuotaSlot(ns, `s${i}`, 5_000, 5)));
      expect(outcomes.filter((o) => o.reserved)).toHaveLength(5);
    });

    it('ping answers while the store is up', async () => {
      await expect(store.ping()).resolves.toBeUndefined();
    });

    it('a closed store rejects every method (never throws synchronously) with StoreUnavailableError', async () => {
      const closed = await harness.open({ fenceGraceMs: 60_000 });
      const key = uniqueKey('closed');
      // A caller still waiting when the store closes is answered at once, not when its wait runs out.
      const ownerToken = newOwnerToken();
      expect((await closed.acquire({ id: key, ownerToken, ttlMs: 60_000, holder: null })).acquired).toBe(true);
      const waiting = closed.acquire({ id: key, ownerToken: newOwnerToken(), ttlMs: 1_000, holder: null, waitMs: 60_000 });
      await vi.waitFor(async () => expect((await closed.inspect(key))?.waiters).toBe(1), { timeout: 5_000, interval: 10 });
      const closing = closed.close();
      await expect(waiting).rejects.toBeInstanceOf(StoreUnavailableError);
      await closing;
      const { lockSets: sets, permits } = closed;
      const calls: Record<string, () => Promise<unknown>> = {
        acquire: () => closed.acquire({ id: key, ownerToken: newOwnerToken(), ttlMs: 1_000, holder: null }),
        'acquire (waiting)': () => closed.acquire({ id: key, ownerToken: newOwnerToken(), ttlMs: 1_000, holder: null, waitMs: 1_000 }),
        renew: () => closed.renew(key, newOwnerToken(), 1_000),
        release: () => closed.release(key, newOwnerToken()),
        inspect: () => closed.inspect(key),
        forceRelease: () => closed.forceRelease(key),
        list: () => closed.list({ prefix: '', limit: 10 }),
        reserveQuotaSlot: () => closed.reserveQuotaSlot(key, 's', 1_000, 1),
        extendQuotaSlot: () => closed.extendQuotaSlot(key, 's', now() + 1_000, 1),
        freeQuotaSlot: () => closed.freeQuotaSlot(key, 's', 1),
        ping: () => closed.ping(),
        inspectIndexed: () => closed.inspectIndexed(key),
        watchChanges: () => closed.watchChanges(key, () => undefined),
        acquireSet: () => sets.acquireSet({ ids: [key], ownerToken: newOwnerToken(), ttlMs: 1_000, holder: null }),
        renewSet: () => sets.renewSet([key], newOwnerToken(), 1_000),
        releaseSet: () => sets.releaseSet([key], newOwnerToken()),
        acquirePermit: () =>
          permits.acquirePermit({
            kind: 'semaphore',
            id: key,
            ownerToken: newOwnerToken(),
            ttlMs: 1_000,
            holder: null,
            weight: 1,
            capacity: 1,
          }),
        renewPermit: () => permits.renewPermit('semaphore', key, newOwnerToken(), 1_000),
        releasePermit: () => permits.releasePermit('semaphore', key, newOwnerToken()),
        inspectPermits: () => permits.inspectPermits('semaphore', key),
        forceReleasePermits: () => permits.forceReleasePermits('semaphore', key),
        listPermits: () => permits.listPermits('semaphore', { prefix: '', limit: 10 }),
      };
      for (const [method, call] of Object.entries(calls)) {
        // A synchronous throw would escape the `.catch()` callers chain on the promise.
        let pending: Promise<unknown> | undefined;
        expect(() => (pending = call()), method).not.toThrow();
        const err: unknown = await pending?.then(
          () => new Error(`${method} resolved on a closed store`),
          (e: unknown) => e,
        );
        expect(err, method).toBeInstanceOf(StoreUnavailableError);
        expect((err as StoreUnavailableError).code, method).toBe('store_unavailable');
      }
      // Closing again is harmless.
      await expect(closed.close()).resolves.toBeUndefined();
    });
  });
  describeWaitingContract(name, harness);
  describeWatchAndSetsContract(name, harness);
  describeSemaphoreContract(name, harness);
  describeRwLockContract(name, harness);
  describePermitKindsContract(name, harness);
  describePermitWatchContract(name, harness);
  describeReleaseRequestContract(name, harness);
}
