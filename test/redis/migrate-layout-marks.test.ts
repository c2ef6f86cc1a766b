import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisClient, type RedisClient } from '../../src/store/redis/client.js';
import { defineScripts } from '../../src/store/redis/scripts.js';
import { KeySpace, QUOTA_INSIDE_FROM } from '../../src/store/redis/keys.js';
import { migrateLayout } from '../../src/store/redis/migrate-layout.js';
import { lockField } from '../helpers/lock-record.js';
import { RedisServer } from '../helpers/redis-server.js';

/**
 * Moving to the sharded layout with the quota counted inside the lock scripts: a plain lock's unit is
 * counted in its own shard, so its record carries no mark; a lock set's key holds quota-slot units and is
 * marked (field b = 0), so that its release or force release gives back no unit of the lock scripts.
 */
const NS = 'team';
let server: RedisServer;
let client: RedisClient;
beforeAll(async () => {
  server = await RedisServer.start();
  client = createRedisClient(server.url, { commandTimeoutMs: 5_000 });
  await new Promise((resolve) => client.once('ready', resolve));
});
afterAll(async () => {
  client?.disconnect();
  await server?.stop();
});

describe('migrate-layout, quota counted inside the lock scripts', () => {
  it("a migrated lock-set key (its unit a quota-slot unit) is marked b = 0: its force release keeps another lease's unit", async () => {
    const prefix = 'mig:';
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
