import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { EtcdStore } from '../../src/store/etcd/etcd-store.js';
import { EtcdCluster } from '../helpers/etcd-cluster.js';
import { eventually } from '../helpers/redis-store.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';

/**
 * On etcd the namespace quota is one count (docs/limits.md: "the embedded store and etcd: always
 * 1 shard", exact), kept as one slot key per lease under a namespace version key that every reservation
 * compares and bumps (EtcdStore.reserveQuotaSlot): each compare-and-set round admits one reservation of
 * the namespace, and a call gives up after MAX_CAS_ROUNDS (64) rounds with 503 "too much contention".
 * So a burst of more than 64 acquires at once in one namespace, far below its limit, on a healthy etcd,
 * answers some of them 503 store_unavailable: refused below the limit, for no reason a caller can act on.
 */
let cluster: EtcdCluster;
let app: TestApp;

beforeAll(async () => {
  cluster = await EtcdCluster.startShared(1);
  const store = new EtcdStore({ endpoints: cluster.endpoints, keyPrefix: 'burst/', commandTimeoutMs: 5_000, fenceGraceMs: 60_000 });
  await eventually(() => store.ping(), 10_000);
  app = await buildTestApp({ store, limits: { ...DEFAULT_LIMITS, maxHeldLocksPerNamespace: 10_000 }, history: null });
}, 60_000);
afterAll(async () => {
  await app?.close();
  await cluster?.stop();
});

it('a burst of 150 acquires of distinct locks in one namespace (limit 10,000) is all granted on a healthy etcd', async () => {
  const answers = await Promise.all(
    Array.from({ length: 150 }, (_v, i) =>
      app.app.inject({ method: 'POST', url: `/v1/locks/burst-${i}/acquire`, payload: { ttlMs: 30_000 } }),
    ),
  );
  const statuses: Record<number, number> = {};
  for (const a of answers) statuses[a.statusCode] = (statuses[a.statusCode] ?? 0) + 1;
  expect(statuses).toEqual({ 200: 150 });
}, 120_000);

it('and the limit stays exact under such a burst: 150 at once under a limit of 100 grant exactly 100', async () => {
  const store = new EtcdStore({ endpoints: cluster.endpoints, keyPrefix: 'burst100/', commandTimeoutMs: 5_000, fenceGraceMs: 60_000 });
  await eventually(() => store.ping(), 10_000);
  const small = await buildTestApp({ store, limits: { ...DEFAULT_LIMITS, maxHeldLocksPerNamespace: 100 }, history: null });
  try {
    const answers = await Promise.all(
      Array.from({ length: 150 }, (_v, i) =>
        small.app.inject({ method: 'POST', url: `/v1/locks/b-${i}/acquire`, payload: { ttlMs: 30_000 } }),
      ),
    );
    const statuses: Record<number, number> = {};
    for (const a of answers) statuses[a.statusCode] = (statuses[a.statusCode] ?? 0) + 1;
    expect(statuses).toEqual({ 200: 100, 429: 50 });
  } finally {
    await small.close();
  }
}, 120_000);

/**
 * The same cap, met by the slots that just ended: a reservation drops every ended slot of the namespace in
 * its transaction, and etcd refuses a transaction of more than 128 operations. Slots of leases that ended
 * (not released) stay until etcd's own lease on them runs out, some 2 s after their end; with more than
 * 126 of them, every reservation of the namespace failed (503) until then.
 */
it('a reservation right after 200 leases of the namespace ended by themselves is decided (not a 503)', async () => {
  const store = new EtcdStore({ endpoints: cluster.endpoints, keyPrefix: 'ended/', commandTimeoutMs: 5_000, fenceGraceMs: 60_000 });
  try {
    await eventually(() => store.ping(), 10_000);
    // One at a time (no contention): 200 slots that all end at one moment, 8 s from now (room for the
    // reservations on a loaded machine); etcd drops a slot 2 s or more after its end, so all 200 are
    // there, ended, right after it.
    const endAt = Date.now() + 8_000;
    for (let i = 0; i < 200; i++) {
      const ttlMs = Math.round(endAt - Date.now());
      expect(ttlMs, 'the 200 reservations took longer than 8 s').toBeGreaterThan(0);
      expect(await store.reserveQuotaSlot('ns', `ended-${i}`, ttlMs, 10_000)).toEqual({ reserved: true });
    }
    await vi.waitFor(() => expect(Date.now()).toBeGreaterThan(endAt + 20), { timeout: 15_000, interval: 20 });
    const outcome = await store.reserveQuotaSlot('ns', 'after', 30_000, 10_000).catch((err: unknown) => err);
    expect(outcome).toEqual({ reserved: true });
  } finally {
    await store.close();
  }
}, 60_000);
