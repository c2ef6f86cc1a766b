import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { newOwnerToken } from '../../src/domain/lock-service.js';
import { createRedisClient } from '../../src/store/redis/client.js';
import { KeySpace } from '../../src/store/redis/keys.js';
import { migrateLayout } from '../../src/store/redis/migrate-layout.js';
import type { RedisStore } from '../../src/store/redis/redis-store.js';
import { openRedisStore } from '../helpers/redis-store.js';
import { RedisServer } from '../helpers/redis-server.js';
import { isCompactRecord, lockFields, toLockHash, toMsgpackRecord } from '../helpers/lock-record.js';
import { withWords, type Worded } from '../helpers/store-words.js';

/**
 * Upgrading a running deployment to the sharded layout, as docs/operations.md says: the instances stop
 * with leases held, waiters queued and quota entries written in the layout before shards; the
 * migration runs; the new version then serves them. The old layout is written here as the version
 * before wrote it: the new store writes the records (a lock's then rewritten as the hash that version
 * kept, toLockHash), and the keys carry the old names (each key renamed to `P{ns}kind/name`, the quota
 * one `P slots:{ns}` set with a member per lease, score its end), as the old key space built them.
 */
const PREFIX = 'up:';
const NS = 'team';
let server: RedisServer;

beforeAll(async () => {
  server = await RedisServer.start();
});
afterAll(async () => {
  await server?.stop();
});

/** Renames every sharded key of namespace NS to its name in the layout before shards. */
async function toOldLayout(): Promise<string[]> {
  const raw = server.client();
  try {
    const renamed: string[] = [];
    const [, keys] = await raw.scan('0', 'MATCH', `${PREFIX}{${NS}#*`, 'COUNT', 10_000);
    for (const key of keys) {
      const old = key.replace(/^(up:\{team)#\d+\}/, '$1}');
      if (/\}[QE]$/.test(key)) await raw.del(key);
      else {
        await raw.rename(key, old);
        // That layout kept a lock as a hash of its fields.
        if (/\}\//.test(old)) await toLockHash(raw, old);
        renamed.push(old);
      }
    }
    return renamed.sort();
  } finally {
    raw.disconnect();
  }
}

describe('upgrading from the layout before shards', () => {
  it('no lease lost or doubled, queues drained, the quota counted again; nothing of the old layout left', async () => {
    const old = withWords(await openRedisStore(server, { keyPrefix: PREFIX, fenceGraceMs: 60_000 }));
    const lockA = { id: `${NS}/held`, ownerToken: newOwnerToken() };
    const lockB = { id: `${NS}/waited-for`, ownerToken: newOwnerToken() };
    const grantA = await old.acquire({ ...lockA, ttlMs: 30_000, holder: 'worker-a' });
    const grantB = await old.acquire({ ...lockB, ttlMs: 30_000, holder: null });
    if (!grantA.acquired || !grantB.acquired) throw new Error('not granted');
    const permits = old.permits;
    if (!permits) throw new Error('the Redis store has permits');
    const pool = `${NS}/pool`;
    const p1 = newOwnerToken();
    const p2 = newOwnerToken();
    for (const ownerToken of [p1, p2]) {
      expect(
        (await permits.acquirePermit({ kind: 'semaphore', id: pool, ownerToken, ttlMs: 30_000, holder: null, weight: 1, capacity: 3 }))
          .acquired,
      ).toBe(true);
    }
    await old.close();
    const renamed = await toOldLayout();
    expect(renamed).toContain(`${PREFIX}{${NS}}/held`);
    expect(renamed).toContain(`${PREFIX}{${NS}}s/pool`);
    const raw = server.client();
    const ends = (await raw.hget(`${PREFIX}{${NS}}/held`, 'e')) as string;
    // A caller queued behind B on an instance that died (its records as acquire.lua writes them: queue,
    // waiter record "aliveUntil|deadline|ttl|owner|instance|holder", and the hash's q field).
    const waiterToken = newOwnerToken();
    const deadline = Date.now() + 20_000;
    await raw.zadd(`${PREFIX}{${NS}}q/waited-for`, Date.now() * 1000, 'w1');
    await raw.hset(`${PREFIX}{${NS}}w/waited-for`, 'w1', `${Date.now() + 3_000}|${deadline}|10000|${waiterToken}|gone-instance|`);
    await raw.hset(`${PREFIX}{${NS}}/waited-for`, 'q', String(deadline + 1_000));
    await raw.zadd(
      `${PREFIX}slots:{${NS}}`,
      ends,
      lockA.ownerToken,
      ends,
      lockB.ownerToken,
      Number(ends) + 20_000,
      waiterToken,
      ends,
      p1,
      ends,
      p2,
    );

    // The upgrade: the migration, then the new version.
    const client = createRedisClient(server.url, { commandTimeoutMs: 5_000 });
    await new Promise((resolve) => client.once('ready', resolve));
    const report = await migrateLayout(client, PREFIX, 10_000);
    client.disconnect();
    expect(report).toMatchObject({ locks: 2, queuesDropped: 2, quotaUnits: 5 });

    const store: Worded<RedisStore> = withWords(await openRedisStore(server, { keyPrefix: PREFIX, fenceGraceMs: 60_000 }));
    try {
      // Not lost: the holders still hold, with their tokens, and renew with them.
      const a = await store.inspect(lockA.id);
      expect(a).toMatchObject({ holder: 'worker-a', fencingToken: grantA.fencingToken, waiters: 0 });
      expect(await store.renew(lockA.id, lockA.ownerToken, 30_000)).toMatchObject({ renewed: true, fencingToken: grantA.fencingToken });
      // Not doubled: nobody else is granted them.
      expect((await store.acquire({ id: lockA.id, ownerToken: newOwnerToken(), ttlMs: 1_000, holder: null })).acquired).toBe(false);
      // The queue is drained: B's release frees the lock (no grant to the caller that is gone).
      expect((await store.inspect(lockB.id))?.waiters).toBe(0);
      expect(await store.release(lockB.id, lockB.ownerToken)).toBe(true);
      expect(await store.inspect(lockB.id)).toBeNull();
      // The next grant's fencing token is above the old one.
      const next = await store.acquire({ id: lockB.id, ownerToken: newOwnerToken(), ttlMs: 1_000, holder: null });
      expect(next.acquired && next.fencingToken > grantB.fencingToken).toBe(true);
      // The semaphore's two leases are there; a third caller gets the one unit left, a fourth nothing.
      expect((await store.permits?.inspectPermits('semaphore', pool))?.holders).toHaveLength(2);
      expect((await store.permits?.renewPermit('semaphore', pool, p1, 30_000))?.renewed).toBe(true);
      const third = await store.permits?.acquirePermit({
        kind: 'semaphore',
        id: pool,
        ownerToken: newOwnerToken(),
        ttlMs: 5_000,
        holder: null,
        weight: 1,
        capacity: 3,
      });
      const fourth = await store.permits?.acquirePermit({
        kind: 'semaphore',
        id: pool,
        ownerToken: newOwnerToken(),
        ttlMs: 5_000,
        holder: null,
        weight: 1,
        capacity: 3,
      });
      expect([third?.acquired, fourth?.acquired]).toEqual([true, false]);
      // The quota counts the carried-over units in the new shards; A's is given back by its release.
      const counted = async () => {
        let n = 0;
        for (const shard of new KeySpace(PREFIX).quotaShards(NS)) n += Number((await raw.hget(shard.count, 'n')) ?? 0);
        return n;
      };
      // A (inside its lock's shard), B's (given back with its release), the waiter's, p1, p2 (quota-slot-call units).
      expect(await counted()).toBe(4);
      expect(await store.release(lockA.id, lockA.ownerToken)).toBe(true);
      expect(await counted()).toBe(3);
      // Nothing of the old layout is left.
      const [, leftOver] = await raw.scan('0', 'MATCH', `${PREFIX}{${NS}}*`, 'COUNT', 10_000);
      expect(leftOver).toEqual([]);
      expect(await raw.exists(`${PREFIX}slots:{${NS}}`)).toBe(0);
    } finally {
      raw.disconnect();
      await store.close();
    }
  }, 60_000);
});

/**
 * Upgrading the lock record needs no migration: the scripts read a lock of a version before as it was (a
 * hash of its fields, or the cmsgpack record that replaced it), and their next write replaces it with the
 * compact record (_lock.lua). The old records are written here as those versions left them (the new
 * store's records rewritten field by field: toLockHash, toMsgpackRecord), with each kind of state a lock
 * may be in: held with a label and an idempotency key, free with its last token kept for the grace,
 * expired within its lock-delay.
 */
describe.each([
  ['lock hashes', 'hash', toLockHash],
  ['cmsgpack records', 'string', toMsgpackRecord],
] as const)('upgrading from %s to compact lock records', (_name, oldType, toOld) => {
  it('no lease lost or doubled, no token going back, the delay kept; each old record becomes a compact one at its first write', async () => {
    const prefix = `rec-${oldType}:`;
    const keys = new KeySpace(prefix);
    const before = withWords(await openRedisStore(server, { keyPrefix: prefix, fenceGraceMs: 60_000 }));
    const held = { id: `${NS}/held`, ownerToken: newOwnerToken() };
    const freed = { id: `${NS}/freed`, ownerToken: newOwnerToken() };
    const delayed = { id: `${NS}/delayed`, ownerToken: newOwnerToken() };
    const idempotencyKey = 'scope:fingerprint';
    const grantHeld = await before.acquire({ ...held, ttlMs: 30_000, holder: 'worker-a', idempotencyKey });
    const grantFreed = await before.acquire({ ...freed, ttlMs: 30_000, holder: null });
    const grantDelayed = await before.acquire({ ...delayed, ttlMs: 50, holder: null, lockDelayMs: 30_000 });
    if (!grantHeld.acquired || !grantFreed.acquired || !grantDelayed.acquired) throw new Error('not granted');
    expect(await before.release(freed.id, freed.ownerToken)).toBe(true);
    await before.close();
    const raw = server.client();
    try {
      for (const id of [held.id, freed.id, delayed.id]) {
        const fields = await lockFields(raw, keys.lock(id));
        await toOld(raw, keys.lock(id));
        expect(await raw.type(keys.lock(id))).toBe(oldType);
        expect(await isCompactRecord(raw, keys.lock(id)).catch(() => false)).toBe(false);
        // Every field as it was.
        expect(await lockFields(raw, keys.lock(id))).toEqual(fields);
      }
      // The delayed lease has run out (its record still names its owner and end: the delay applies).
      await vi.waitFor(async () => expect(Number((await lockFields(raw, keys.lock(delayed.id))).e)).toBeLessThan(Date.now() - 5), {
        timeout: 5_000,
      });

      const store = withWords(await openRedisStore(server, { keyPrefix: prefix, fenceGraceMs: 60_000 }));
      try {
        // Not lost: the holder is seen, replayed to its idempotent retry, and renews with its token.
        expect(await store.inspect(held.id)).toMatchObject({ holder: 'worker-a', fencingToken: grantHeld.fencingToken });
        const retry = await store.acquire({ id: held.id, ownerToken: newOwnerToken(), ttlMs: 30_000, holder: null, idempotencyKey });
        expect(retry).toMatchObject({ acquired: true, fencingToken: grantHeld.fencingToken, replayed: { ownerToken: held.ownerToken } });
        // Not doubled: nobody else is granted it.
        expect((await store.acquire({ id: held.id, ownerToken: newOwnerToken(), ttlMs: 1_000, holder: null })).acquired).toBe(false);
        expect(await store.renew(held.id, held.ownerToken, 30_000)).toMatchObject({ renewed: true, fencingToken: grantHeld.fencingToken });
        // Written once, it is a compact record, with every field it had.
        expect(await raw.type(keys.lock(held.id))).toBe('string');
        expect(await isCompactRecord(raw, keys.lock(held.id))).toBe(true);
        expect(await lockFields(raw, keys.lock(held.id))).toMatchObject({
          o: held.ownerToken,
          t: String(grantHeld.fencingToken),
          h: 'worker-a',
          i: idempotencyKey,
        });
        expect(await store.inspect(held.id)).toMatchObject({ holder: 'worker-a', fencingToken: grantHeld.fencingToken });
        // The delay of the expired lease still holds the lock; its last token is kept.
        expect((await store.acquire({ id: delayed.id, ownerToken: newOwnerToken(), ttlMs: 1_000, holder: null })).acquired).toBe(false);
        expect(await store.inspectIndexed(delayed.id)).toMatchObject({ state: null, lastFencingToken: grantDelayed.fencingToken });
        // The freed lock is granted above its last token.
        const next = await store.acquire({ id: freed.id, ownerToken: newOwnerToken(), ttlMs: 1_000, holder: null });
        expect(next.acquired && next.fencingToken > grantFreed.fencingToken).toBe(true);
        expect(await isCompactRecord(raw, keys.lock(freed.id))).toBe(true);
        // The holder releases with its token; the next grant is numbered above it.
        expect(await store.release(held.id, held.ownerToken)).toBe(true);
        const after = await store.acquire({ id: held.id, ownerToken: newOwnerToken(), ttlMs: 1_000, holder: null });
        expect(after.acquired && after.fencingToken > grantHeld.fencingToken).toBe(true);
      } finally {
        await store.close();
      }
    } finally {
      raw.disconnect();
    }
  }, 60_000);
});
