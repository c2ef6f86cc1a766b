import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, vi } from 'vitest';
import type { Store } from '../../src/domain/lease-store.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { openEtcdStore } from './etcd-only.js';
import { EtcdCluster } from './etcd-cluster.js';
import { RedisServer } from './redis-server.js';

/** embedded, Redis (own redis-server) and etcd (1 member) for describe.each. */
export function threeStores(prefix: string): Array<[string, () => Promise<Store>]> {
  let redis: RedisServer;
  let etcd: EtcdCluster;
  beforeAll(async () => {
    [redis, etcd] = await Promise.all([RedisServer.start(), EtcdCluster.start(1)]);
  }, 60_000);
  afterAll(async () => {
    await Promise.all([redis?.stop(), etcd?.stop()]);
  });
  return [
    ['embedded', async () => new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0 })],
    [
      'redis',
      async () => {
        const store = new RedisStore({
          url: redis.url,
          keyPrefix: `${prefix}-${randomUUID()}:`,
          commandTimeoutMs: 2_000,
          fenceGraceMs: 60_000,
        });
        await vi.waitFor(() => store.ping(), { timeout: 5_000, interval: 10 });
        return store;
      },
    ],
    ['etcd', () => openEtcdStore(etcd, prefix)],
  ];
}
