import { afterAll, beforeAll, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { EtcdStore } from '../../src/store/etcd/etcd-store.js';
import { EtcdCluster } from '../helpers/etcd-cluster.js';
import { eventually } from '../helpers/redis-store.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';
/**
 * Every change of an etcd key is one compare-and-set on its record, given up after MAX_CAS_ROUNDS (64)
 * lost rounds with 503 "too much contention on one key". A burst of acquires of one semaphore with room
 * for all of them, on a healthy etcd and with no quota, answered some of them 503: one instance's
 * acquires of a key now take their turns.
 */
let cluster: EtcdCluster;
let app: TestApp;
beforeAll(async () => {
  cluster = await EtcdCluster.startShared(1);
  const store = new EtcdStore({ endpoints: cluster.endpoints, keyPrefix: 'p2/', commandTimeoutMs: 5_000, fenceGraceMs: 60_000 });
  await eventually(() => store.ping(), 10_000);
  app = await buildTestApp({ store, limits: { ...DEFAULT_LIMITS, maxHeldLocksPerNamespace: 0 }, history: null });
}, 60_000);
afterAll(async () => {
  await app?.close();
  await cluster?.stop();
});
it('150 acquires at once of one semaphore of 200 (no quota) are all granted on a healthy etcd', async () => {
  const answers = await Promise.all(
    Array.from({ length: 150 }, () =>
      app.app.inject({ method: 'POST', url: '/v1/semaphores/hot/acquire', payload: { limit: 200, ttlMs: 30_000 } }),
    ),
  );
  const statuses: Record<number, number> = {};
  for (const a of answers) statuses[a.statusCode] = (statuses[a.statusCode] ?? 0) + 1;
  expect(statuses[200]).toBe(150);
});
