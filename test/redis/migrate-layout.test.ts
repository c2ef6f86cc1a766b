import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisClient, type RedisClient } from '../../src/store/redis/client.js';
import { KeySpace, QUOTA_INSIDE_FROM } from '../../src/store/redis/keys.js';
import { defineScripts } from '../../src/store/redis/scripts.js';
import { lockField } from '../helpers/lock-record.js';
import { migrateLayout } from '../../src/store/redis/migrate-layout.js';
import { RedisServer } from '../helpers/redis-server.js';

/**
 * The layout migration key by key (test/redis/upgrade-layout.test.ts runs a whole upgrade through the
 * store): which keys it moves and under which names, with their fields, members and time left; which it
 * drops; which it leaves alone (not of the old layout, or of another prefix); and where it counts the
 * quota's units for each kind of limit. The old keys are written here as that layout named them
 * (`P{group}kind/name`, `P{group}kind`, `Pslots:{ns}`).
 */
const NS = 'team';
let server: RedisServer;
let client: RedisClient;

beforeAll(async () => {
  server = await RedisServer.startShared();
  client = createRedisClient(server.url, { commandTimeoutMs: 5_000 });
  await new Promise((resolve) => client.once('ready', resolve));
});
afterAll(async () => {
  client?.disconnect();
  await server?.stop();
});

/** Keys a migration of `prefix` must not touch: not of the old layout, or of another prefix. */
const untouched = (prefix: string) => [
  `${prefix}{}/empty-group`,
  `${prefix}{${NS}#3}/already-sharded`,
  `${prefix}{${NS}}zz/unknown-kind`,
  `${prefix}{${NS}`,
  `${prefix}{te/am}/slash-in-group`,
  `other:{${NS}}/other-prefix`,
];

describe.each([
  ['counted inside the lock scripts', QUOTA_INSIDE_FROM, 'm*1:'],
  ['counted through the quota-slot calls', 5, 'm?2:'],
  ['no quota', 0, 'm[3]:'],
] as const)('migrating the layout before shards, quota %s', (_name, limit, prefix) => {
  it('moves locks and permit keys with their fields, members and time left; drops queues; counts the live units; leaves the rest', async () => {
    const raw = server.client();
    const keys = new KeySpace(prefix);
    const now = Date.now();
    const held = { o: 'owner-held', e: String(now + 30_000), t: '5', h: 'worker-a' };
    const expired = { o: 'owner-expired', e: String(now - 1_000), t: '7' };
    try {
      await raw.hset(`${prefix}{${NS}}/held`, held);
      await raw.pexpire(`${prefix}{${NS}}/held`, 30_000);
      await raw.hset(`${prefix}{${NS}}/expired`, expired);
      // A free lock whose only field announced a queue: nothing is left to write.
      await raw.hset(`${prefix}{${NS}}/only-queued`, 'q', String(now + 5_000));
      // A semaphore named by its group alone, and a read/write lock's pool and lease ends.
      await raw.hset(`${prefix}{${NS}}s`, 'x', '2');
      await raw.hset(`${prefix}{${NS}}r/rw`, 'x', '1');
      await raw.zadd(`${prefix}{${NS}}re/rw`, now + 10_000, 'lease-1', now + 20_000, 'lease-2', now + 30_000, 'lease-3');
      await raw.zadd(`${prefix}{${NS}}q/held`, now * 1000, 'w1');
      await raw.hset(`${prefix}{${NS}}sw/pool`, 'w2', 'record');
      await raw.zadd(`${prefix}slots:{${NS}}`, held.e, held.o, expired.e, expired.o, now + 30_000, 'permit-1');
      for (const key of untouched(prefix)) await raw.set(key, 'kept');

      const report = await migrateLayout(client, prefix, limit);
      expect(report).toEqual({ locks: 3, permitKeys: 3, queuesDropped: 2, quotaUnits: limit > 0 ? 2 : 0 });

      // Under a quota counted through the quota-slot calls, the live lease says it took no unit of the lock
      // scripts (b = 0), so its release gives back none of theirs (another lease's).
      expect(await raw.hgetall(keys.lock(`${NS}/held`))).toEqual(limit > 0 && limit < QUOTA_INSIDE_FROM ? { ...held, b: '0' } : held);
      const ttl = await raw.pttl(keys.lock(`${NS}/held`));
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(30_000);
      expect(await raw.hgetall(keys.lock(`${NS}/expired`))).toEqual(expired);
      expect(await raw.pttl(keys.lock(`${NS}/expired`))).toBe(-1);
      expect(await raw.exists(keys.lock(`${NS}/only-queued`))).toBe(0);
      expect(await raw.hgetall(keys.permitKeys('semaphore', NS).pool)).toEqual({ x: '2' });
      expect(await raw.hgetall(keys.permitKeys('rwlock', `${NS}/rw`).pool)).toEqual({ x: '1' });
      expect(await raw.zrange(keys.permitKeys('rwlock', `${NS}/rw`).expiries, 0, -1, 'WITHSCORES')).toEqual([
        'lease-1',
        String(now + 10_000),
        'lease-2',
        String(now + 20_000),
        'lease-3',
        String(now + 30_000),
      ]);
      for (const key of untouched(prefix)) expect(await raw.get(key)).toBe('kept');

      // The quota: the live lock's unit and the permit's; not the expired lock's.
      const units = async (shard: { ends: string }) => (await raw.zrange(shard.ends, 0, -1)).filter((m) => m.startsWith('u:'));
      const counted = async () => {
        let n = 0;
        for (const shard of keys.quotaShards(NS)) n += Number((await raw.hget(shard.count, 'n')) ?? 0);
        return n;
      };
      expect(await counted()).toBe(limit > 0 ? 2 : 0);
      if (limit >= QUOTA_INSIDE_FROM) {
        // The lock's unit sits in its lock's own shard, as the lock scripts count it; the permit's by its id.
        expect(Number(await raw.hget(keys.lockKeys(`${NS}/held`).quota.count, 'n'))).toBeGreaterThanOrEqual(1);
        expect(await units(keys.quotaFor(NS, 'permit-1', limit))).toContain('u:permit-1');
        for (const shard of keys.quotaShards(NS)) expect(await units(shard)).not.toContain(`u:${held.o}`);
      } else if (limit > 0) {
        // Every unit through the quota-slot calls, the lock's too.
        expect(await units(keys.quotaFor(NS, held.o, limit))).toContain(`u:${held.o}`);
        expect(await units(keys.quotaFor(NS, 'permit-1', limit))).toContain('u:permit-1');
      }
      for (const shard of keys.quotaShards(NS)) expect(await units(shard)).not.toContain(`u:${expired.o}`);

      // Nothing of the old layout is left but the keys it does not know.
      const [, left] = await raw.scan('0', 'MATCH', `${prefix.replace(/[*?[\]]/g, (c) => `\\${c}`)}*`, 'COUNT', 10_000);
      const old = left.filter((key) => !/#\d+\}/.test(key) && !untouched(prefix).includes(key));
      expect(old).toEqual([]);
    } finally {
      raw.disconnect();
    }
  });
});

describe('migrating more keys than one SCAN page', () => {
  it('moves every one', async () => {
    const prefix = 'many:';
    const raw = server.client();
    try {
      const count = 2_500;
      const pipeline = raw.pipeline();
      for (let i = 0; i < count; i++) pipeline.hset(`${prefix}{${NS}}/lock-${i}`, 't', String(i));
      await pipeline.exec();
      expect(await migrateLayout(client, prefix, 0)).toMatchObject({ locks: count });
      const keys = new KeySpace(prefix);
      for (const i of [0, 1_000, count - 1]) expect(await raw.hget(keys.lock(`${NS}/lock-${i}`), 't')).toBe(String(i));
    } finally {
      raw.disconnect();
    }
  });
});

/**
 * With the quota counted inside the lock scripts: a plain lock's unit is counted in its own shard, so its
 * record carries no mark; a lock set's key holds quota-slot units and is marked (field b = 0), so that its
 * release or force release gives back no unit of the lock scripts.
 */
describe('migrate-layout, quota counted inside the lock scripts', () => {
  it("a migrated lock-set key (its unit a quota-slot unit) is marked b = 0: its force release keeps another lease's unit", async () => {
    const prefix = 'mig-marks:';
    const keys = new KeySpace(prefix);
    const raw = server.client();
    try {
      // Two names of one shard: a lock set's only key and a plain lock.
      const names: string[] = [];
      const shardOfSet = keys.lockKeys(`${NS}/solo`).quota.count;
      for (let i = 0; names.length < 1; i++) if (keys.lockKeys(`${NS}/plain-${i}`).quota.count === shardOfSet) names.push(`plain-${i}`);
      const plain = names[0] as string;
      const end = Math.ceil(Date.now() / 1000) * 1000 + 30_500;
      await raw.hset(`${prefix}{${NS}}/solo`, { o: 'owner-set', e: String(end), t: '5' });
      await raw.hset(`${prefix}{${NS}}/${plain}`, { o: 'owner-plain', e: String(end), t: '6' });
      await raw.zadd(`${prefix}slots:{${NS}}`, end, 'owner-set.0', end, 'owner-plain');
      await migrateLayout(client, prefix, QUOTA_INSIDE_FROM);
      const quota = keys.lockKeys(`${NS}/solo`).quota;
      const second = String(Math.ceil(end / 1000));
      // The plain lock's unit, counted in its (and the set key's) shard.
      expect(await raw.hget(quota.count, second)).toBe('1');
      expect(await lockField(raw, keys.lock(`${NS}/solo`), 'b')).toBe('0');
      const scripts = defineScripts(client);
      const lk = keys.lockKeys(`${NS}/solo`);
      const evicted = (await scripts.run('forceRelease', {
        keys: lk,
        graceMs: 60_000,
        channelPrefix: 'ch:',
        lockName: `${NS}/solo`,
      })) as unknown[];
      expect(evicted[0]).toBe(1);
      // The plain lock still holds its unit.
      expect(await raw.hget(quota.count, second)).toBe('1');
      // And the plain lock itself is counted inside: not marked.
      expect(await lockField(raw, keys.lock(`${NS}/${plain}`), 'b')).toBe(null);
    } finally {
      raw.disconnect();
    }
  });
});
