import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { lockId } from '../../src/domain/namespaces.js';
import { KeySpace } from '../../src/store/redis/keys.js';
import { lockField } from '../helpers/lock-record.js';
import { buildTestApp } from '../helpers/test-app.js';
import { openRedisStore } from '../helpers/redis-store.js';
import { RedisServer } from '../helpers/redis-server.js';

/**
 * A lock set's quota is counted through the quota-slot calls. A set of one key is granted by the plain
 * lock step (acquire.lua), so the lease service says so (quotaOutside) and its lease records that it took
 * no unit of the lock scripts (field b = 0): its release, renewal or force release then gives back none of
 * theirs, which would be another lease's counted in the same second.
 */
let server: RedisServer;
beforeAll(async () => {
  server = await RedisServer.start();
});
afterAll(async () => {
  await server?.stop();
});

/** A key of namespace `ns` whose lock lives in quota shard 0 (where a cap below 1,200 counts every unit). */
function keyInShard0(keys: KeySpace, ns: string): string {
  const shard0 = keys.quotaShards(ns)[0]?.count;
  for (let i = 0; ; i++) if (keys.lockKeys(lockId(ns, `set-${i}`)).quota.count === shard0) return `set-${i}`;
}

describe('a one-key lock set (granted by acquire.lua) holds a quota-slot unit, none of the lock scripts', () => {
  it('a one-key lock set records b = 0 (it took no unit of the lock scripts)', async () => {
    const prefix = 'one-key-a:';
    const redis = await openRedisStore(server, { keyPrefix: prefix, fenceGraceMs: 60_000 });
    const t = await buildTestApp({ store: redis, limits: { ...DEFAULT_LIMITS, maxHeldLocksPerNamespace: 2 } });
    const raw = server.client();
    try {
      const keys = new KeySpace(prefix);
      const res = await request(t.app.server)
        .post('/v1/lock-sets/acquire')
        .send({ keys: ['solo'], ttlMs: 60_000 })
        .expect(200);
      expect(await lockField(raw, keys.lock(lockId('default', 'solo')), 'b')).toBe('0');
      await request(t.app.server)
        .post('/v1/lock-sets/release')
        .send({ ownerToken: res.body.ownerToken, keys: ['solo'] })
        .expect(200);
    } finally {
      raw.disconnect();
      await t.close();
    }
  });

  it('cap 2: releasing a one-key lock set gives back no plain lock’s unit; the namespace never holds 3', async () => {
    const prefix = 'one-key-b:';
    const cap = 2;
    const redis = await openRedisStore(server, { keyPrefix: prefix, fenceGraceMs: 60_000 });
    const t = await buildTestApp({ store: redis, limits: { ...DEFAULT_LIMITS, maxHeldLocksPerNamespace: cap } });
    const raw = server.client();
    const app = t.app.server;
    try {
      const keys = new KeySpace(prefix);
      const setKey = keyInShard0(keys, 'default');
      const set = await request(app)
        .post('/v1/lock-sets/acquire')
        .send({ keys: [setKey], ttlMs: 60_000 })
        .expect(200);
      const setEnd = Number(await lockField(raw, keys.lock(lockId('default', setKey)), 'e'));
      // A plain lock whose quota-slot unit (ttl + 1 s margin) is counted in the second the set's lease ends in.
      const [sec, us] = (await raw.time()) as unknown as [string, string];
      const redisNow = Number(sec) * 1000 + Math.floor(Number(us) / 1000);
      const ttlL = Math.ceil(setEnd / 1000) * 1000 - 500 - 1000 - redisNow;
      await request(app).post('/v1/locks/plain-0/acquire').send({ ttlMs: ttlL }).expect(200);
      // The namespace is full: 2 of 2.
      await request(app).post('/v1/locks/plain-x/acquire').send({ ttlMs: 60_000 }).expect(429);
      await request(app)
        .post('/v1/lock-sets/release')
        .send({ ownerToken: set.body.ownerToken, keys: [setKey] })
        .expect(200);
      // One lease (plain-0) is held: one more fits, not two.
      let granted = 0;
      for (const k of ['plain-1', 'plain-2']) {
        const r = await request(app).post(`/v1/locks/${k}/acquire`).send({ ttlMs: 60_000 });
        if (r.status === 200) granted++;
      }
      console.log(`[quota] held after the set's release: 1 + ${granted} (cap ${cap})`);
      expect(1 + granted).toBeLessThanOrEqual(cap);
    } finally {
      raw.disconnect();
      await t.close();
    }
  });
});
