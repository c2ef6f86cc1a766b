import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { newOwnerToken } from '../../src/domain/lock-service.js';
import { type LeaseKind, type LeaseStore } from '../../src/domain/lease-store.js';
import type { StoreHarness } from './lock-store.contract.js';
import { clockOf, useInstances } from './contract-kit.js';
import { KeySpace } from '../../src/store/redis/keys.js';
import { lockIndex } from '../../src/domain/watch.js';

const uniqueKey = (name: string) => `${name}:${randomUUID()}`;

/** The watch index a read gives: a permit key's is stored, a lock's computed from its tokens (watch.ts). */
function indexOf(kind: LeaseKind, read: unknown): number {
  return kind === 'lock' ? lockIndex(read as Parameters<typeof lockIndex>[0]) : (read as { index: number }).index;
}
const redisKeys = new KeySpace('');

/** Each kind with the capacity and weight one of its leases is taken with (a read/write lock: a reader). */
const KINDS: ReadonlyArray<{ kind: LeaseKind; capacity: number }> = [
  { kind: 'lock', capacity: 1 },
  { kind: 'semaphore', capacity: 2 },
  { kind: 'rwlock', capacity: 2 },
];

/**
 * Release requests (LeaseStore.requestRelease): an ask to one lease's holder to let go, stored with that
 * lease in the store (so any instance's renewal carries it), never reaching another lease, and gone with
 * the lease. Run through the lease port, so every primitive of every store meets the same rules.
 */
export function describeReleaseRequestContract(name: string, harness: StoreHarness): void {
  describe(`release request contract: ${name}`, () => {
    const now = clockOf(harness);
    const instance = useInstances(harness);
    // The port itself, not the words over it (test/helpers/store-words.ts).
    const leases = (i = 0): LeaseStore => instance(i).leases;

    const take = async (kind: LeaseKind, key: string, capacity: number, ttlMs = 5_000, i = 0) => {
      const ownerToken = newOwnerToken();
      const outcome = await leases(i).acquire({ kind, ids: [key], capacity, weight: 1, ownerToken, ttlMs, holder: null });
      if (!outcome.acquired) throw new Error(`not granted: ${JSON.stringify(outcome)}`);
      return { ownerToken, fencingToken: outcome.fencingTokens[0] as number };
    };

    for (const { kind, capacity } of KINDS) {
      it(`${kind}: the request is stored with the lease it names, and every instance's renewal of it carries it`, async () => {
        const key = uniqueKey(`rr-${kind}`);
        const lease = await take(kind, key, capacity);
        const plain = await leases().renew(kind, [key], lease.ownerToken, 5_000);
        expect(plain).toMatchObject({ renewed: true });
        expect(plain).not.toHaveProperty('releaseRequested');

        const before = now();
        const asked = await leases(1).requestRelease(kind, key, lease.fencingToken, { by: 'ops-key', reason: 'deploy' });
        expect(asked).toMatchObject({ by: 'ops-key', reason: 'deploy' });
        // The store's clock, on this machine: the same as ours, give or take a little.
        expect(asked?.atMs).toBeGreaterThanOrEqual(before - 50);
        expect(asked?.atMs).toBeLessThanOrEqual(now() + 50);

        for (const i of [0, 2]) {
          const renewed = await leases(i).renew(kind, [key], lease.ownerToken, 5_000);
          expect(renewed).toMatchObject({ renewed: true, fencingTokens: [lease.fencingToken], releaseRequested: asked });
        }
        // Not an eviction: the lease is still its holder's.
        expect(await leases().release(kind, [key], lease.ownerToken)).toBe(true);
      });

      it(`${kind}: inspect and the watch read show the request on the lease it names, on every instance, without a new index`, async () => {
        const key = uniqueKey(`rr-shown-${kind}`);
        const lease = await take(kind, key, capacity);
        // A semaphore and a read/write lock have room for a second lease beside it, which must not show it.
        const other = kind === 'lock' ? null : await take(kind, key, capacity, 5_000, 1);
        const askedOf = (state: unknown, fencingToken: number) => {
          if (state === null) return 'free';
          if (kind === 'lock') {
            const held = state as { fencingToken: number; releaseRequested?: unknown };
            return held.fencingToken === fencingToken ? held.releaseRequested : 'not shown';
          }
          const shown = (state as { holders: Array<{ fencingToken: number; releaseRequested?: unknown }> }).holders;
          const lease = shown.find((h) => h.fencingToken === fencingToken);
          return lease === undefined ? 'not shown' : lease.releaseRequested;
        };
        const before = await leases().inspectIndexed(kind, key);
        expect(askedOf(before.state, lease.fencingToken)).toBeUndefined();
        expect(JSON.stringify(before.state)).not.toContain('releaseRequested');

        const asked = await leases(1).requestRelease(kind, key, lease.fencingToken, { by: 'ops-key', reason: 'drain' });
        expect(asked).not.toBeNull();
        for (const i of [0, 1, 2]) {
          expect(askedOf(await leases(i).inspect(kind, key), lease.fencingToken)).toEqual(asked);
          const indexed = await leases(i).inspectIndexed(kind, key);
          expect(askedOf(indexed.state, lease.fencingToken)).toEqual(asked);
          if (other) expect(askedOf(indexed.state, other.fencingToken)).toBeUndefined();
          // A request is no change of holder: the watch index stays (a watcher is not woken for it).
          expect(indexOf(kind, indexed)).toBe(indexOf(kind, before));
        }
        expect(await leases().release(kind, [key], lease.ownerToken)).toBe(true);
        if (other) {
          const after = await leases(2).inspectIndexed(kind, key);
          expect(JSON.stringify(after.state)).not.toContain('releaseRequested');
          await leases().release(kind, [key], other.ownerToken);
        } else {
          const next = await take(kind, key, capacity, 5_000, 2);
          const after = await leases().inspect(kind, key);
          expect(askedOf(after, next.fencingToken)).toBeUndefined();
          await leases().release(kind, [key], next.ownerToken);
        }
      });

      it(`${kind}: asking again replaces the request; no reason reads back as null`, async () => {
        const key = uniqueKey(`rr-again-${kind}`);
        const lease = await take(kind, key, capacity);
        await leases().requestRelease(kind, key, lease.fencingToken, { by: 'a', reason: 'first' });
        const second = await leases().requestRelease(kind, key, lease.fencingToken, { by: 'b', reason: null });
        expect(second).toMatchObject({ by: 'b', reason: null });
        expect(await leases(1).renew(kind, [key], lease.ownerToken, 5_000)).toMatchObject({ releaseRequested: second });
        await leases().release(kind, [key], lease.ownerToken);
      });

      it(`${kind}: a request naming another fencing token, or an unknown key, changes nothing`, async () => {
        const key = uniqueKey(`rr-other-${kind}`);
        const lease = await take(kind, key, capacity);
        expect(await leases().requestRelease(kind, key, lease.fencingToken + 1, { by: 'x', reason: null })).toBeNull();
        expect(await leases().requestRelease(kind, uniqueKey('rr-none'), 1, { by: 'x', reason: null })).toBeNull();
        expect(await leases().renew(kind, [key], lease.ownerToken, 5_000)).not.toHaveProperty('releaseRequested');
        await leases().release(kind, [key], lease.ownerToken);
      });

      it(`${kind}: the request ends with its lease: the next lease on the key starts without one`, async () => {
        const key = uniqueKey(`rr-ends-${kind}`);
        const first = await take(kind, key, capacity);
        await leases().requestRelease(kind, key, first.fencingToken, { by: 'ops', reason: 'drain' });
        expect(await leases().release(kind, [key], first.ownerToken)).toBe(true);
        // Released: its token names nothing live any more.
        expect(await leases().requestRelease(kind, key, first.fencingToken, { by: 'ops', reason: null })).toBeNull();
        const next = await take(kind, key, capacity, 5_000, 1);
        expect(next.fencingToken).toBeGreaterThan(first.fencingToken);
        expect(await leases(2).renew(kind, [key], next.ownerToken, 5_000)).not.toHaveProperty('releaseRequested');

        // Evicted, then expired: neither leaves the request to the lease after it.
        await leases().requestRelease(kind, key, next.fencingToken, { by: 'ops', reason: null });
        expect(await leases().forceRelease(kind, key, next.fencingToken)).toHaveLength(1);
        const short = await take(kind, key, capacity, 150);
        await leases().requestRelease(kind, key, short.fencingToken, { by: 'ops', reason: null });
        await expect.poll(() => leases().inspect(kind, key), { timeout: 10_000, interval: 20 }).toBeNull();
        expect(await leases().requestRelease(kind, key, short.fencingToken, { by: 'ops', reason: null })).toBeNull();
        const last = await take(kind, key, capacity);
        expect(await leases().renew(kind, [key], last.ownerToken, 5_000)).not.toHaveProperty('releaseRequested');
        await leases().release(kind, [key], last.ownerToken);
      });

      it(`${kind}: a lease handed to a queued caller starts without the request made of the one before`, async () => {
        const key = uniqueKey(`rr-handover-${kind}`);
        // A writer (the whole capacity) queues behind the reader, so the hand-over happens for every kind.
        const first = await take(kind, key, capacity);
        const ownerToken = newOwnerToken();
        const waiting = leases(1).acquire({
          kind,
          ids: [key],
          capacity,
          weight: capacity,
          ownerToken,
          ttlMs: 5_000,
          holder: null,
          waitMs: 10_000,
        });
        await expect.poll(async () => (await leases().queue(kind, key, 10)).length, { timeout: 10_000, interval: 10 }).toBe(1);
        await leases().requestRelease(kind, key, first.fencingToken, { by: 'ops', reason: 'handover' });
        expect(await leases().release(kind, [key], first.ownerToken)).toBe(true);
        const handed = await waiting;
        expect(handed.acquired).toBe(true);
        expect(await leases(2).renew(kind, [key], ownerToken, 5_000)).not.toHaveProperty('releaseRequested');
        await leases().release(kind, [key], ownerToken);
      });
    }

    it('semaphore: a request reaches only the lease it names, not the others on the key', async () => {
      const key = uniqueKey('rr-sem-two');
      const a = await take('semaphore', key, 2);
      const b = await take('semaphore', key, 2, 5_000, 1);
      await leases().requestRelease('semaphore', key, b.fencingToken, { by: 'ops', reason: null });
      expect(await leases().renew('semaphore', [key], a.ownerToken, 5_000)).not.toHaveProperty('releaseRequested');
      expect(await leases().renew('semaphore', [key], b.ownerToken, 5_000)).toMatchObject({ releaseRequested: { by: 'ops' } });
      await leases().release('semaphore', [key], a.ownerToken);
      await leases().release('semaphore', [key], b.ownerToken);
    });

    it('lock set: a request on one of its keys comes with the renewal of the whole set', async () => {
      // One namespace and one shard of the Redis key layout, so the set is one Cluster slot (as in watch-and-sets.contract.ts).
      const ns = `ns-${randomUUID().slice(0, 8)}`;
      const names: string[] = [];
      for (let i = 0; names.length < 2; i++) if (redisKeys.shardOf(`rr${i}`) === redisKeys.shardOf('rr0')) names.push(`rr${i}`);
      const keys = names.map((n) => `${ns}/${n}`).sort();
      const ownerToken = newOwnerToken();
      const outcome = await leases().acquire({ kind: 'lock', ids: keys, capacity: 1, weight: 1, ownerToken, ttlMs: 5_000, holder: null });
      if (!outcome.acquired) throw new Error('set not granted');
      expect(await leases().renew('lock', keys, ownerToken, 5_000)).not.toHaveProperty('releaseRequested');
      const asked = await leases(1).requestRelease('lock', keys[1] as string, outcome.fencingTokens[1] as number, {
        by: 'ops',
        reason: 'set',
      });
      expect(asked).not.toBeNull();
      expect(await leases(2).renew('lock', keys, ownerToken, 5_000)).toMatchObject({ renewed: true, releaseRequested: asked });
      expect(await leases().release('lock', keys, ownerToken)).toBe(true);
    });
  });
}
