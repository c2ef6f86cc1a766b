import { afterAll, beforeAll } from 'vitest';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import type { LockStore } from '../../src/store/store.js';
import { RedisServer } from '../helpers/redis-server.js';
import { describeStoreContract } from './lock-store.contract.js';

let server: RedisServer;
const PREFIX = 'contract:';

beforeAll(async () => {
  server = await RedisServer.start();
});
afterAll(async () => {
  await server.stop();
});

const open = async ({ fenceGraceMs }: { fenceGraceMs: number }): Promise<LockStore> => {
  const store = new RedisStore({ url: server.url, keyPrefix: PREFIX, commandTimeoutMs: 1_000, fenceGraceMs });
  // The store connects in the background; wait until it answers.
  for (let i = 0; i < 200; i++) {
    try {
      await store.ping();
      return store;
    } catch {
      await new Promise((r) => setTimeout(r, 10));
    }
  }
  throw new Error('Redis store never became ready');
};

describeStoreContract('redis', {
  open,
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
      return (await client.exists(`${PREFIX}{${key}}`)) === 1;
    } finally {
      client.disconnect();
    }
  },
});
