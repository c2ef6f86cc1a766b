import { afterAll, beforeAll } from 'vitest';
import { KeySpace } from '../../src/store/redis/keys.js';
import { type LockStore, withWords } from '../helpers/store-words.js';
import { SentinelTopology } from '../helpers/redis-sentinel.js';
import { openReplicatedStore } from '../helpers/redis-store.js';
import { describeStoreContract } from './lock-store.contract.js';

/**
 * The same contract through Redis Sentinel (1 primary, 1 replica, 3 sentinels on loopback), with
 * replica acknowledgement on: every grant and renewal is answered only once the replica has it.
 */
let topology: SentinelTopology;
const PREFIX = 'contract-sentinel:';

beforeAll(async () => {
  topology = await SentinelTopology.start({ replicas: 1, sentinels: 3 });
}, 60_000);
afterAll(async () => {
  await topology?.stop();
});

const open = (options: { fenceGraceMs: number; maxWaitersPerKey?: number }): Promise<LockStore> =>
  openReplicatedStore(topology.connection, { keyPrefix: PREFIX, ...options }).then(withWords);

describeStoreContract('redis via sentinel, 1 replica ack', {
  open,
  peer: () => open({ fenceGraceMs: 60_000, maxWaitersPerKey: 5 }),
  loseData: async (store) => {
    const client = await topology.primaryClient();
    await client.flushall();
    client.disconnect();
    return store;
  },
  hasState: async (_store, key) => {
    const client = await topology.primaryClient();
    try {
      return (await client.exists(new KeySpace(PREFIX).lock(key))) === 1;
    } finally {
      client.disconnect();
    }
  },
});
