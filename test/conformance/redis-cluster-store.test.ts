import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidRequestError } from '../../src/domain/errors.js';
import { newOwnerToken } from '../../src/domain/lock-service.js';
import { lockId } from '../../src/domain/namespaces.js';
import { KeySpace } from '../../src/store/redis/keys.js';
import { type LockStore, withWords } from '../helpers/store-words.js';
import { makeKeys } from '../helpers/api-keys.js';
import { KeyholderProcess } from '../helpers/keyholder-process.js';
import { RedisCluster } from '../helpers/redis-cluster.js';
import { openReplicatedStore } from '../helpers/redis-store.js';
import { describeStoreContract } from './lock-store.contract.js';
import { describeHistoryContract } from './history.contract.js';
import { RedisHistory } from '../../src/store/redis/redis-history.js';
import { QUOTA_SHARDS } from '../../src/store/redis/keys.js';

/**
 * The same contract on a Redis Cluster (3 masters, 3 replicas on loopback, one cluster for the whole
 * file), with replica acknowledgement on: every grant and renewal is answered only once the replica of
 * the lock's master has it. Each script names all its keys, tagged by one namespace: a script touching
 * two slots would fail here with CROSSSLOT.
 */
let cluster: RedisCluster;
/** The history contract's existence checks (see `stored` below). */
let historyProbe: Cluster | undefined;
const PREFIX = 'contract-cluster:';

beforeAll(async () => {
  cluster = await RedisCluster.start();
  console.log(`[cluster] 3 masters + 3 replicas ready in ${cluster.startupMs} ms`);
}, 60_000);
afterAll(async () => {
  historyProbe?.disconnect();
  await cluster?.stop();
});

const open = (options: { fenceGraceMs: number; maxWaitersPerKey?: number }): Promise<LockStore> =>
  openReplicatedStore(cluster.connection, { keyPrefix: PREFIX, ...options }).then(withWords);

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

describeHistoryContract('redis cluster, 3 masters', {
  open: async (limits) => new RedisHistory({ connection: cluster.connection, keyPrefix: PREFIX, commandTimeoutMs: 2_000, limits }),
  // One Cluster client for every check: two new connections per key (slot lookup, then the master) took
  // over 2 s for a batch's 520 keys on a busy machine, past the 2 s retention of the bounded store's lists.
  stored: async (store, key) => {
    historyProbe ??= new Cluster([...cluster.connection.nodes]);
    return (await historyProbe.exists((store as RedisHistory).listKey(key))) === 1;
  },
  keysKept: (keysPerNamespace) => QUOTA_SHARDS * Math.ceil(keysPerNamespace / QUOTA_SHARDS),
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
    // Each namespace's locks spread over every master (keys.ts); a small quota (2) is counted in one
    // shard of each namespace, and the two namespaces' shards are two different slots.
    expect(space.quotaFor('cl-a', 'x', 2).count).not.toBe(space.quotaFor('cl-b', 'x', 2).count);
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

/**
 * One namespace over the whole Cluster: its keys carry 16 shard tags whose slots lie in 16 evenly
 * spaced slot ranges (keys.ts), so each of the 3 masters (even slot ranges, as the helper creates
 * them) serves about a third of them. The quota is counted per shard inside the lock scripts.
 */
describe('one namespace spread over the Cluster', () => {
  const space = new KeySpace(PREFIX);
  let store: LockStore;
  beforeAll(async () => {
    store = await open({ fenceGraceMs: 60_000 });
  });
  afterAll(async () => {
    await store?.close();
  });

  /** Keys per master matching `pattern`, as shares of their total. */
  async function sharesPerMaster(pattern: string): Promise<number[]> {
    const counts: number[] = [];
    await cluster.onEachMaster(async (c) => {
      let cursor = '0';
      let n = 0;
      do {
        const [next, found] = await c.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
        cursor = next;
        n += found.length;
      } while (cursor !== '0');
      counts.push(n);
    });
    const total = counts.reduce((a, b) => a + b, 0);
    return counts.map((n) => n / total);
  }

  /** Runs `fn` over 0..n-1, 100 at a time. */
  async function inBatches(n: number, fn: (i: number) => Promise<void>): Promise<void> {
    for (let from = 0; from < n; from += 100) await Promise.all(Array.from({ length: Math.min(100, n - from) }, (_v, j) => fn(from + j)));
  }

  it('3,000 locks held in one namespace, quota on: at least 20% on each master; the quota then stops at 16 x 600 = its limit, refusing nothing below 90% of it', async () => {
    const ns = 'spread';
    const LIMIT = 9_600;
    let held = 0;
    let firstRefusalAt: number | undefined;
    const take = async (i: number) => {
      const got = await store.acquire({
        id: lockId(ns, `job-${i}`),
        ownerToken: newOwnerToken(),
        ttlMs: 120_000,
        holder: null,
        maxHeldInNamespace: LIMIT,
      });
      if (got.acquired) held++;
      else {
        expect(got.quotaFull).toBe(true);
        firstRefusalAt ??= held;
      }
    };
    await inBatches(3_000, take);
    expect(held).toBe(3_000);
    const shares = await sharesPerMaster(`${PREFIX}{${ns}#*}/*`);
    console.log(`[cluster] 3,000 locks of one namespace per master: ${shares.map((s) => `${(s * 100).toFixed(1)}%`).join(' / ')}`);
    expect(shares).toHaveLength(3);
    for (const share of shares) expect(share).toBeGreaterThanOrEqual(0.2);
    // The bound (docs/limits.md): never above the limit (16 shards x ceil(9,600 / 16) = 9,600), and with
    // these uniformly spread keys no refusal before 90% of it.
    await inBatches(LIMIT + 2_000 - 3_000, (i) => take(3_000 + i));
    console.log(`[cluster] quota ${LIMIT}: first refusal with ${firstRefusalAt} held, ${held} held in the end`);
    expect(held).toBeLessThanOrEqual(LIMIT);
    expect(firstRefusalAt).toBeGreaterThanOrEqual(0.9 * LIMIT);
    expect(held).toBeGreaterThanOrEqual(0.97 * LIMIT);
  }, 180_000);

  it('semaphores and read/write locks of one namespace spread too', async () => {
    const permits = store.permits;
    if (!permits) throw new Error('the Redis store has permits');
    const ns = 'spread-permits';
    await inBatches(600, async (i) => {
      const kind = i % 2 === 0 ? 'semaphore' : 'rwlock';
      const got = await permits.acquirePermit({
        kind,
        key: lockId(ns, `p-${i}`),
        ownerToken: newOwnerToken(),
        ttlMs: 120_000,
        holder: null,
        weight: 1,
        capacity: 3,
      });
      expect(got.acquired).toBe(true);
    });
    for (const letter of ['s', 'r']) {
      const shares = await sharesPerMaster(`${PREFIX}{${ns}#*}${letter}/*`);
      console.log(
        `[cluster] 300 ${letter === 's' ? 'semaphores' : 'read/write locks'} of one namespace per master: ${shares.map((s) => `${(s * 100).toFixed(1)}%`).join(' / ')}`,
      );
      for (const share of shares) expect(share).toBeGreaterThanOrEqual(0.2);
    }
  });

  it('a lock set works when its keys share a shard, and is refused with invalid_request (keys) when they do not', async () => {
    const sets = store.lockSets;
    if (!sets) throw new Error('the Redis store has lock sets');
    const ns = 'spread-sets';
    const names = Array.from({ length: 64 }, (_v, i) => `s-${i}`);
    const first = names[0] as string;
    const same = names.find((n) => n !== first && space.shardOf(n) === space.shardOf(first)) as string;
    const other = names.find((n) => space.shardOf(n) !== space.shardOf(first)) as string;
    const ownerToken = newOwnerToken();
    const together = await sets.acquireSet({ keys: [lockId(ns, first), lockId(ns, same)], ownerToken, ttlMs: 10_000, holder: null });
    expect(together.acquired).toBe(true);
    expect(await sets.releaseSet([lockId(ns, first), lockId(ns, same)], ownerToken)).toBe(true);
    const apart = sets.acquireSet({
      keys: [lockId(ns, first), lockId(ns, other)],
      ownerToken: newOwnerToken(),
      ttlMs: 10_000,
      holder: null,
    });
    await expect(apart).rejects.toBeInstanceOf(InvalidRequestError);
    await expect(apart).rejects.toMatchObject({ field: 'keys' });
  });
});
