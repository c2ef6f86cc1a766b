import { afterAll, beforeAll } from 'vitest';
import { KeySpace } from '../../src/store/redis/keys.js';
import { openRedisStore } from '../helpers/redis-store.js';
import type { LockStore } from '../../src/domain/lock-store.js';
import { RedisServer } from '../helpers/redis-server.js';
import { describeStoreContract } from './lock-store.contract.js';
import { describeHistoryContract } from './history.contract.js';
import { RedisHistory } from '../../src/store/redis/redis-history.js';
import { QUOTA_SHARDS } from '../../src/store/redis/keys.js';

let server: RedisServer;
const PREFIX = 'contract:';

beforeAll(async () => {
  server = await RedisServer.startShared();
});
afterAll(async () => {
  await server.stop();
});

const open = ({ fenceGraceMs, maxWaitersPerKey }: { fenceGraceMs: number; maxWaitersPerKey?: number }): Promise<LockStore> =>
  openRedisStore(server, { keyPrefix: PREFIX, fenceGraceMs, maxWaitersPerKey });

describeStoreContract('redis', {
  open,
  // A second RedisStore on the same Redis is exactly a second keyholder instance.
  peer: () => open({ fenceGraceMs: 60_000, maxWaitersPerKey: 5 }),
  // What an operator's FLUSHALL (or a restart without persistence) does to the data.
  loseData: async (store) => {
    const client = server.client();
    await client.flushall();
    client.disconnect();
    return store;
  },
  hasState: async (_store, key) => {
    const client = server.client();
    try {
      return (await client.exists(new KeySpace(PREFIX).lock(key))) === 1;
    } finally {
      client.disconnect();
    }
  },
});

describeHistoryContract('redis', {
  open: async (limits) =>
    new RedisHistory({ connection: { mode: 'standalone', url: server.url }, keyPrefix: PREFIX, commandTimeoutMs: 2_000, limits }),
  stored: async (store, key) => {
    const client = server.client();
    try {
      return (await client.exists((store as RedisHistory).listKey(key))) === 1;
    } finally {
      client.disconnect();
    }
  },
  // Counted per quota shard: keysPerNamespace / 16, rounded up, in each.
  keysKept: (keysPerNamespace) => QUOTA_SHARDS * Math.ceil(keysPerNamespace / QUOTA_SHARDS),
});
