import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, vi } from 'vitest';
import type { Store } from '../../src/domain/lease-store.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { openEtcdStore } from './etcd-only.js';
import { EtcdCluster } from './etcd-cluster.js';
import { RedisCluster } from './redis-cluster.js';
import { RedisServer } from './redis-server.js';

/**
 * The two stores an HTTP test runs on, for `describe.each`: the embedded store and a Redis store (on a
 * redis-server this file's hooks start and stop), each opened fresh under its own key prefix. Call it
 * at the top of a test file: it registers the redis-server's beforeAll and afterAll.
 */
export function embeddedAndRedis(prefix: string): Array<[string, () => Promise<Store>]> {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await RedisServer.start();
  });
  afterAll(async () => {
    await redis.stop();
  });
  const openRedis = async (): Promise<Store> => {
    const store = new RedisStore({
      url: redis.url,
      keyPrefix: `${prefix}-${randomUUID()}:`,
      commandTimeoutMs: 1_000,
      fenceGraceMs: 60_000,
    });
    await vi.waitFor(() => store.ping(), { timeout: 2_000, interval: 10 });
    return store;
  };
  return [
    ['embedded', async () => new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0 })],
    ['redis', openRedis],
  ];
}

/**
 * Every kind of store an HTTP test can run on, for `describe.each`: the embedded store, a Redis store, an
 * etcd store (a 1-member etcd cluster) and a Redis Cluster store (3 masters, no replicas: the routes'
 * keys must each stay in one hash slot, which is what a Cluster checks), each opened fresh under its own
 * key prefix. As embeddedAndRedis, call it at the top of a test file: it registers the hooks that start
 * and stop the servers (about 2 to 5 s for the etcd member and the Cluster on a busy machine).
 */
export function everyStore(prefix: string): Array<[string, () => Promise<Store>]> {
  let etcd: EtcdCluster;
  let cluster: RedisCluster;
  beforeAll(async () => {
    [etcd, cluster] = await Promise.all([EtcdCluster.start(1), RedisCluster.start({ replicasPerMaster: 0 })]);
  }, 60_000);
  afterAll(async () => {
    await Promise.all([etcd?.stop(), cluster?.stop()]);
  });
  const openEtcd = (): Promise<Store> => openEtcdStore(etcd, prefix);
  const openCluster = async (): Promise<Store> => {
    const store = new RedisStore({
      connection: cluster.connection,
      keyPrefix: `${prefix}-${randomUUID()}:`,
      commandTimeoutMs: 2_000,
      fenceGraceMs: 60_000,
    });
    await vi.waitFor(() => store.ping(), { timeout: 10_000, interval: 20 });
    return store;
  };
  return [...embeddedAndRedis(prefix), ['etcd', openEtcd], ['redis cluster', openCluster]];
}
