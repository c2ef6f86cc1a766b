import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../../src/domain/errors.js';
import { EtcdStore } from '../../src/store/etcd/etcd-store.js';
import { EtcdCluster } from '../helpers/etcd-cluster.js';
import { eventually } from '../helpers/redis-store.js';

/**
 * EtcdStore.ping is what the readiness probe asks: "can the store serve?". On etcd that needs a leader
 * and a quorum, so the ping is a linearizable read: a member cut off from its majority still holds
 * every key and would answer a serializable (local) read, but can decide nothing. Stops members: a
 * cluster of its own, left out of the mutation run's shared-cluster list.
 */
let cluster: EtcdCluster;
let store: EtcdStore;

beforeAll(async () => {
  cluster = await EtcdCluster.start(3);
  store = new EtcdStore({ endpoints: cluster.endpoints, keyPrefix: 'ping-quorum/', commandTimeoutMs: 1_000, fenceGraceMs: 60_000 });
  await eventually(() => store.ping(), 20_000);
}, 90_000);
afterAll(async () => {
  await store?.close();
  await cluster?.stop();
});

describe('etcd store: ping without a quorum', () => {
  it('fails closed (StoreUnavailableError) when only one member of three is left, though that member answers', async () => {
    const leader = await cluster.waitForLeader(20_000);
    const [kept] = cluster.members.filter((m) => m !== leader);
    for (const m of cluster.members) if (m !== kept) await cluster.kill(m);
    // The member left is up (its status answers), but has no quorum behind it.
    const status = await fetch(`http://127.0.0.1:${kept?.clientPort as number}/v3/maintenance/status`, { method: 'POST', body: '{}' });
    expect(status.ok).toBe(true);
    for (let i = 0; i < 3; i++) {
      const err = await store.ping().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StoreUnavailableError);
    }
  }, 60_000);
});
