import { afterAll, describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../../src/config.js';
import { RedisStore } from '../../../src/store/redis/redis-store.js';
import { EtcdStore } from '../../../src/store/etcd/etcd-store.js';
import { RedisCluster } from '../../helpers/redis-cluster.js';
import { RedisServer } from '../../helpers/redis-server.js';
import { EtcdCluster } from '../../helpers/etcd-cluster.js';
import { eventually } from '../../helpers/redis-store.js';
import { buildTestApp, type TestApp } from '../../helpers/test-app.js';
import { quotaWorkload } from '../../helpers/quota-workload.js';

/**
 * Every primitive (locks, semaphores, read/write locks, lock sets) under one small exact quota
 * (limit 12: one shard, docs/limits.md "none over it below 1,200"), with waits, renewals, releases,
 * force releases and a set key released alone. Never above the limit; once everything is released,
 * exactly the limit is free again.
 */
const LIMIT = 12;
const limits = { ...DEFAULT_LIMITS, maxHeldLocksPerNamespace: LIMIT };
const cleanups: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
});

async function run(app: TestApp): Promise<void> {
  const report = await quotaWorkload(app.app, { limit: LIMIT, workers: 12, durationMs: 6_000 });
  const unavailable = Object.entries(report.statuses).filter(([k]) => / 503$/.test(k));
  expect(unavailable, 'no 503 on a healthy store (a 503 may keep a unit)').toEqual([]);
  expect(report.fill, 'locks granted by a fill once every lease was released').toBe(LIMIT);
}

describe('quota units given back exactly, every primitive', () => {
  it('one Redis', async () => {
    const server = await RedisServer.start();
    cleanups.push(() => server.stop());
    const store = new RedisStore({ url: server.url, keyPrefix: 'rq:', commandTimeoutMs: 2_000, fenceGraceMs: 60_000 });
    await eventually(() => store.ping(), 10_000);
    const app = await buildTestApp({ store, limits, history: null });
    cleanups.push(() => app.close());
    await run(app);
  }, 60_000);

  it('Redis Cluster', async () => {
    const cluster = await RedisCluster.start();
    cleanups.push(() => cluster.stop());
    const store = new RedisStore({ connection: cluster.connection, keyPrefix: 'rq:', commandTimeoutMs: 2_000, fenceGraceMs: 60_000 });
    await eventually(() => store.ping(), 10_000);
    const app = await buildTestApp({ store, limits, history: null });
    cleanups.push(() => app.close());
    await run(app);
  }, 90_000);

  it('etcd', async () => {
    const cluster = await EtcdCluster.start(1);
    cleanups.push(() => cluster.stop());
    const store = new EtcdStore({ endpoints: cluster.endpoints, keyPrefix: 'rq/', commandTimeoutMs: 2_000, fenceGraceMs: 60_000 });
    await eventually(() => store.ping(), 10_000);
    const app = await buildTestApp({ store, limits, history: null });
    cleanups.push(() => app.close());
    await run(app);
  }, 90_000);
});

/**
 * The same mix under the default-sized limit (9,600: locks counted inside the lock scripts, the other
 * primitives and lock sets through the quota-slot calls, all in the same 16 shards). The bound is not
 * exact there, so the check reads the shards' counts: at a quiet moment they count exactly the keys
 * held, and nothing once everything is released.
 */
describe('quota units given back exactly, limit counted in 16 shards', () => {
  async function shardCounts(store: RedisStore, read: (key: string) => Promise<string | null>): Promise<number> {
    let sum = 0;
    for (const shard of (store as unknown as { keys: import('../../../src/store/redis/keys.js').KeySpace }).keys.quotaShards('default'))
      sum += Number((await read(shard.count)) ?? 0);
    return sum;
  }
  for (const topology of ['one Redis', 'Redis Cluster'] as const) {
    it(
      topology,
      async () => {
        let store: RedisStore;
        let read: (key: string) => Promise<string | null>;
        if (topology === 'one Redis') {
          const server = await RedisServer.start();
          cleanups.push(() => server.stop());
          store = new RedisStore({ url: server.url, keyPrefix: 'rq16:', commandTimeoutMs: 2_000, fenceGraceMs: 60_000 });
          const raw = server.client();
          cleanups.push(async () => raw.disconnect());
          read = (key) => raw.hget(key, 'n');
        } else {
          const cluster = await RedisCluster.start();
          cleanups.push(() => cluster.stop());
          store = new RedisStore({ connection: cluster.connection, keyPrefix: 'rq16:', commandTimeoutMs: 2_000, fenceGraceMs: 60_000 });
          read = async (key) => {
            const c = await cluster.clientFor(key);
            try {
              return await c.hget(key, 'n');
            } finally {
              c.disconnect();
            }
          };
        }
        await eventually(() => store.ping(), 10_000);
        const app = await buildTestApp({ store, limits: { ...DEFAULT_LIMITS, maxHeldLocksPerNamespace: 9_600 }, history: null });
        cleanups.push(() => app.close());
        const seen: Record<string, number> = {};
        const report = await quotaWorkload(app.app, {
          limit: 9_600,
          workers: 12,
          durationMs: 6_000,
          ttlMs: [30_000, 40_000],
          noFill: true,
          quiescent: async (heldKeys) => {
            seen.heldKeys = heldKeys;
            seen.countedWhileHeld = await shardCounts(store, read);
          },
          released: async () => {
            seen.countedAfterRelease = await shardCounts(store, read);
          },
        });
        expect(Object.entries(report.statuses).filter(([k]) => / 503$/.test(k))).toEqual([]);
        expect(seen.countedWhileHeld).toBe(seen.heldKeys);
        expect(seen.countedAfterRelease).toBe(0);
      },
      90_000,
    );
  }
});
