import { afterAll, beforeAll } from 'vitest';
import { KeySpace } from '../../src/store/redis/keys.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import type { LockStore } from '../../src/domain/lock-store.js';
import { RedisCluster } from '../helpers/redis-cluster.js';
import { eventually } from '../helpers/redis-store.js';
import { describeStoreContract } from './lock-store.contract.js';

/**
 * The same contract on a Redis Cluster (3 masters, 3 replicas on loopback, one cluster for the whole
 * file), with replica acknowledgement on: every grant and renewal is answered only once the replica of
 * the lock's master has it. Each script names all its keys, tagged by one namespace: a script touching
 * two slots would fail here with CROSSSLOT.
 */
let cluster: RedisCluster;
const PREFIX = 'contract-cluster:';

beforeAll(async () => {
  cluster = await RedisCluster.start();
  console.log(`[cluster] 3 masters + 3 replicas ready in ${cluster.startupMs} ms`);
}, 60_000);
afterAll(async () => {
  await cluster?.stop();
});

const open = async ({ fenceGraceMs, maxWaitersPerKey }: { fenceGraceMs: number; maxWaitersPerKey?: number }): Promise<LockStore> => {
  const store = new RedisStore({
    connection: cluster.connection,
    replicaAcks: { minReplicas: 1, timeoutMs: 500 },
    keyPrefix: PREFIX,
    commandTimeoutMs: 1_000,
    fenceGraceMs,
    maxWaitersPerKey,
  });
  await eventually(() => store.ping(), 10_000);
  return store;
};

describeStoreContract('redis cluster, 3 masters, 1 replica ack', {
  open,
  peer: () => open({ fenceGraceMs: 60_000, maxWaitersPerKey: 5 }),
  loseData: async (store) => {
    await cluster.onEachMaster((c) => c.flushall());
    return store;
  },
  hasState: async (_store, key) => {
    const lockKey = new KeySpace(PREFIX).lock(key);
    const client = await cluster.clientFor(lockKey);
    try {
      return (await client.exists(lockKey)) === 1;
    } finally {
      client.disconnect();
    }
  },
});
