import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lockId } from '../../src/domain/namespaces.js';
import { KeySpace } from '../../src/store/redis/keys.js';
import type { LockStore } from '../../src/domain/lock-store.js';
import { makeKeys } from '../helpers/api-keys.js';
import { KeyholderProcess } from '../helpers/keyholder-process.js';
import { RedisCluster } from '../helpers/redis-cluster.js';
import { openReplicatedStore } from '../helpers/redis-store.js';
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

const open = (options: { fenceGraceMs: number; maxWaitersPerKey?: number }): Promise<LockStore> =>
  openReplicatedStore(cluster.connection, { keyPrefix: PREFIX, ...options });

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

/**
 * The whole service on the Cluster: one keyholder process with API keys of namespaces served by two
 * different masters. The rate limiter's counters and each namespace's quota live in their own slots.
 */
describe('a keyholder process on the Cluster', () => {
  const keys = makeKeys([
    { id: 'a', namespace: 'cl-a', scopes: ['locks'] },
    { id: 'b', namespace: 'cl-b', scopes: ['locks'] },
  ]);
  let server: KeyholderProcess;
  const call = async (key: 'a' | 'b', path: string, body?: unknown) => {
    const res = await fetch(`${server.url}${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: { authorization: `Bearer ${keys.plain[key]}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(5_000),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };

  beforeAll(async () => {
    const prefix = 'svc-cluster:';
    const space = new KeySpace(prefix);
    // The two namespaces must be on two masters for this to show anything.
    expect(await cluster.masterOf(space.lock(lockId('cl-a', 'x')))).not.toBe(await cluster.masterOf(space.lock(lockId('cl-b', 'x'))));
    server = await KeyholderProcess.start({
      env: {
        REDIS_CLUSTER_NODES: cluster.nodesEnv,
        REDIS_KEY_PREFIX: prefix,
        KEYHOLDER_API_KEYS_FILE: keys.writeFile(),
        RATE_LIMIT_MAX: '6',
        RATE_LIMIT_WINDOW_MS: '60000',
        NAMESPACE_MAX_HELD_LOCKS: '2',
      },
    });
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
  });

  it('counts each API key on its own (429 after the limit) and caps each namespace on its own (quota), on two masters', async () => {
    for (const key of ['a', 'b'] as const) {
      expect((await call(key, '/v1/locks/l0/acquire', { ttlMs: 30_000 })).status).toBe(200);
      expect((await call(key, '/v1/locks/l1/acquire', { ttlMs: 30_000 })).status).toBe(200);
      expect((await call(key, '/v1/locks/l2/acquire', { ttlMs: 30_000 })).body.code).toBe('quota_exceeded');
    }
    for (let i = 3; i < 6; i++) expect((await call('a', '/v1/locks/l0')).status).toBe(200);
    expect((await call('a', '/v1/locks/l0')).body.code).toBe('rate_limited');
    expect((await call('b', '/v1/locks/l0')).status).toBe(200);
  });
});
