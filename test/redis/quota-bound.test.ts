import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { newOwnerToken } from '../../src/domain/lock-service.js';
import type { LockStore } from '../helpers/store-words.js';
import { lockId } from '../../src/domain/namespaces.js';
import { KeySpace, QUOTA_INSIDE_FROM, QUOTA_SHARDS, quotaShardsFor } from '../../src/store/redis/keys.js';
import { lockField } from '../helpers/lock-record.js';
import { buildTestApp } from '../helpers/test-app.js';
import { openRedisStore } from '../helpers/redis-store.js';
import { RedisServer } from '../helpers/redis-server.js';
import { withWords } from '../helpers/store-words.js';

/**
 * The bound docs/limits.md states for the Redis quota, on a real redis-server: a namespace never holds
 * more than its limit plus (shards in use - 1); with uniformly spread keys (these fixed names), nobody
 * is refused below 90% of the limit. Both ways the Redis store counts: inside the lock scripts (a limit
 * of QUOTA_INSIDE_FROM or more, 16 shards) and through the quota-slot calls (a smaller limit, fewer shards).
 * The Cluster test (test/conformance/redis-cluster-store.test.ts) does the first on 3 masters.
 */
let server: RedisServer;
let store: LockStore;

beforeAll(async () => {
  server = await RedisServer.start();
  store = withWords(await openRedisStore(server, { keyPrefix: 'bound:', fenceGraceMs: 60_000 }));
});
afterAll(async () => {
  await store?.close();
  await server?.stop();
});

/** Runs `fn` over 0..n-1, 100 at a time (each batch one write to Redis). */
async function inBatches(n: number, fn: (i: number) => Promise<void>): Promise<void> {
  for (let from = 0; from < n; from += 100) await Promise.all(Array.from({ length: Math.min(100, n - from) }, (_v, j) => fn(from + j)));
}

describe('the Redis quota bound', () => {
  it(`inside the lock scripts (limit ${QUOTA_INSIDE_FROM}, ${QUOTA_SHARDS} shards): never above the limit + 15, nobody refused below 90% of it`, async () => {
    const limit = QUOTA_INSIDE_FROM;
    let held = 0;
    let firstRefusal: number | undefined;
    await inBatches(limit + 1_000, async (i) => {
      const got = await store.acquire({
        id: lockId('inside', `job-${i}`),
        ownerToken: newOwnerToken(),
        ttlMs: 60_000,
        holder: null,
        maxHeldInNamespace: limit,
      });
      if (got.acquired) held++;
      else {
        expect(got.quotaFull).toBe(true);
        firstRefusal ??= held;
      }
    });
    console.log(`[quota] limit ${limit} inside the scripts: first refusal at ${firstRefusal} held, ${held} held in the end`);
    expect(held).toBeLessThanOrEqual(limit + QUOTA_SHARDS - 1);
    expect(firstRefusal).toBeGreaterThanOrEqual(0.9 * limit);
  }, 120_000);

  it('through the quota-slot calls (limit 2,000: 3 shards of 667): never above the limit + 2, nobody refused below 90% of it', async () => {
    const limit = 2_000;
    expect(quotaShardsFor(limit)).toBe(3);
    let held = 0;
    let firstRefusal: number | undefined;
    await inBatches(limit + 300, async (i) => {
      const slot = await store.reserveQuotaSlot('through', `unit-${i}`, 60_000, limit);
      if (slot.reserved) held++;
      else firstRefusal ??= held;
    });
    console.log(`[quota] limit ${limit} through the quota-slot calls: first refusal at ${firstRefusal} held, ${held} held in the end`);
    expect(held).toBeLessThanOrEqual(limit + 2);
    expect(firstRefusal).toBeGreaterThanOrEqual(0.9 * limit);
  }, 120_000);

  it('a limit under 1,200 is one shard: exact', async () => {
    const limit = 1_199;
    expect(quotaShardsFor(limit)).toBe(1);
    let held = 0;
    await inBatches(limit + 100, async (i) => {
      if ((await store.reserveQuotaSlot('exact', `unit-${i}`, 60_000, limit)).reserved) held++;
    });
    expect(held).toBe(limit);
  }, 120_000);
});

describe('which leases hold a unit of the lock scripts', () => {
  // The lock service counts a cap below QUOTA_INSIDE_FROM through the quota-slot calls: its leases say they
  // took no unit of the lock scripts (field b = 0), so that their release, renewal or force release gives
  // back none of those (another lease's, counted in the same second: test/redis/scripts.test.ts).
  it.each([
    ['counted around the lock scripts', 5, '0'],
    ['counted inside them', QUOTA_INSIDE_FROM, null],
  ] as const)('a lock granted with the cap %s (%i): field b %s', async (_name, cap, b) => {
    const redis = await openRedisStore(server, { keyPrefix: `wired-${cap}:`, fenceGraceMs: 60_000 });
    const t = await buildTestApp({ store: redis, limits: { ...DEFAULT_LIMITS, maxHeldLocksPerNamespace: cap } });
    try {
      const res = await request(t.app.server).post('/v1/locks/job/acquire').send({ ttlMs: 60_000 }).expect(200);
      const keys = new KeySpace(`wired-${cap}:`);
      const raw = server.client();
      try {
        expect(await lockField(raw, keys.lock(lockId('default', 'job')), 'b')).toBe(b);
      } finally {
        raw.disconnect();
      }
      await request(t.app.server).post('/v1/locks/job/release').send({ ownerToken: res.body.ownerToken }).expect(200);
    } finally {
      await t.close();
    }
  });
});
