import { performance } from 'node:perf_hooks';
import { Cluster, Command, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { InvalidRequestError } from '../../src/domain/errors.js';
import { newOwnerToken } from '../../src/domain/lock-service.js';
import { lockId } from '../../src/domain/namespaces.js';
import { KeySpace } from '../../src/store/redis/keys.js';
import { type LockStore, withWords } from '../helpers/store-words.js';
import { makeKeys } from '../helpers/api-keys.js';
import { KeyholderProcess } from '../helpers/keyholder-process.js';
import { RedisCluster } from '../helpers/redis-cluster.js';
import { eventually, openReplicatedStore } from '../helpers/redis-store.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { describeStoreContract } from './lock-store.contract.js';
import { describeHistoryContract } from './history.contract.js';
import { RedisHistory } from '../../src/store/redis/redis-history.js';
import { QUOTA_SHARDS } from '../../src/store/redis/keys.js';
import { createRedisClient } from '../../src/store/redis/client.js';
import { RedisRateAllowance } from '../../src/store/redis/rate-allowance.js';
import type { HistoryKey } from '../../src/domain/history.js';

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
  // over 2 s for a batch's 520 keys on a busy machine.
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

  /**
   * ioredis groups auto-pipelined calls by the slot of their first argument; a lock set's script takes a
   * variable number of keys, so its first argument is the key count, not a key. Lock sets on different
   * masters then shared one pipeline with each other or with single-key calls, and ioredis refused the
   * whole pipeline ("All keys in the pipeline should belong to the same slots allocation group"): 503
   * for every call in it while the Cluster was healthy.
   */
  it('lock sets on every master and single locks sent in one turn: every one granted', async () => {
    // For each of 12 sets, two names of one shard (a lock set of them is one Cluster slot, keys.ts); the
    // shards differ from set to set (0-11), so the sets fall on different masters.
    const pairOf = (shard: number): string[] => {
      const pair: string[] = [];
      for (let n = 0; pair.length < 2; n++) if (space.shardOf(`k${String(n)}`) === shard) pair.push(`k${String(n)}`);
      return pair;
    };
    const sets = Array.from({ length: 12 }, (_, shard) => pairOf(shard).map((n) => lockId('turn', n)));
    const calls: Promise<boolean>[] = sets.flatMap((ids, i) => [
      store.lockSets.acquireSet({ ids, ownerToken: newOwnerToken(), ttlMs: 30_000, holder: null }).then((o) => o.acquired),
      store
        .acquire({ id: lockId('turn', `single${String(i)}`), ownerToken: newOwnerToken(), ttlMs: 30_000, holder: null })
        .then((o) => o.acquired),
    ]);
    const answers = await Promise.allSettled(calls);
    const refused = answers.flatMap((a) => (a.status === 'rejected' ? [String((a.reason as Error).message)] : []));
    expect(refused).toEqual([]);
    expect(answers.map((a) => (a.status === 'fulfilled' ? a.value : null))).toEqual(calls.map(() => true));
    // The sets fall on more than one master, or the test shows nothing.
    const masters = new Set(await Promise.all(sets.map((ids) => cluster.masterOf(space.lock(ids[0] as string)))));
    expect(masters.size).toBeGreaterThan(1);
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
        id: lockId(ns, `p-${i}`),
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
    const together = await sets.acquireSet({ ids: [lockId(ns, first), lockId(ns, same)], ownerToken, ttlMs: 10_000, holder: null });
    expect(together.acquired).toBe(true);
    expect(await sets.releaseSet([lockId(ns, first), lockId(ns, same)], ownerToken)).toBe(true);
    const apart = sets.acquireSet({
      ids: [lockId(ns, first), lockId(ns, other)],
      ownerToken: newOwnerToken(),
      ttlMs: 10_000,
      holder: null,
    });
    await expect(apart).rejects.toBeInstanceOf(InvalidRequestError);
    await expect(apart).rejects.toMatchObject({ field: 'keys' });
  });
});

/**
 * A master's connection lost and made anew (CLIENT KILL on that master, as a network blip or a proxy's
 * idle reaper would): the Cluster client opens a new connection on the next command for that master's
 * slots. Lock calls sent meanwhile, several at once, must be answered once it is made, not refused
 * with 503 while the master is healthy; a call still unanswered at its deadline fails closed (503).
 */
describe('a master connection dropped under the store', () => {
  const CALLS = 20;
  const COMMAND_TIMEOUT_MS = 1_000;

  it(`${CALLS} lock calls on one master right after its connection was killed: every one granted, none refused`, async () => {
    const prefix = `${PREFIX}dropped:`;
    const space = new KeySpace(prefix);
    const store = new RedisStore({
      connection: cluster.connection,
      keyPrefix: prefix,
      commandTimeoutMs: COMMAND_TIMEOUT_MS,
      fenceGraceMs: 60_000,
    });
    try {
      await eventually(() => store.ping(), 10_000);
      const words = withWords(store);
      // Keys whose locks live on the master of the first one, by the store's own slot map.
      const client = (store as unknown as { redis: Cluster }).redis;
      const port = await cluster.masterOf(space.lock(lockId('drop', 'k-0')));
      const onPort = (prefixOfKey: string, n: number): string[] => {
        const found: string[] = [];
        for (let i = 0; found.length < n; i++) {
          const id = lockId('drop', `${prefixOfKey}-${i}`);
          if (client.slots[new Command('exists', [space.lock(id)]).getSlot()]?.[0] === `127.0.0.1:${port}`) found.push(id);
        }
        return found;
      };
      const ids = onPort('k', CALLS + 1);
      const take = (id: string) =>
        words.acquire({ id, ownerToken: newOwnerToken(), ttlMs: 30_000, holder: null }).then(
          (outcome) => (outcome.acquired ? 'granted' : 'held'),
          (err: Error) => `${err.constructor.name}: ${err.message}`,
        );
      // The store's connection to that master is made and used.
      expect(await take(ids[0] as string)).toBe('granted');
      const node = () => client.nodes('master').find((n) => n.options.port === port);
      const before = node();
      expect(before?.status).toBe('ready');
      await withAdmin(port, (c) => c.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes'));
      // Once the store has seen the connection close (a call in flight as it closed may rightly fail).
      await vi.waitFor(() => expect(node() === before && before?.status === 'ready').toBe(false), { timeout: 5_000, interval: 5 });
      const started = performance.now();
      const answers = await Promise.all(ids.slice(1).map(take));
      const tookMs = Math.round(performance.now() - started);
      const tally = answers.reduce<Record<string, number>>((acc, a) => ({ ...acc, [a]: (acc[a] ?? 0) + 1 }), {});
      console.log(`[cluster] ${CALLS} lock calls right after a master connection was killed: ${JSON.stringify(tally)} in ${tookMs} ms`);
      expect.soft(tally).toEqual({ granted: CALLS });
      // Once more, one call at a time: how long the master's keys are refused, if at all (for the docs).
      await withAdmin(port, (c) => c.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes'));
      const killedAt = performance.now();
      const refused: string[] = [];
      for (const id of onPort('one-by-one', 10_000)) {
        const answer = await take(id);
        if (answer === 'granted') break;
        refused.push(answer);
        if (performance.now() - killedAt > 10_000) throw new Error(`still refused after 10 s: ${answer}`);
      }
      console.log(
        `[cluster] one call at a time after a kill: ${refused.length} refused (${refused.join('; ')}), first grant ${Math.round(performance.now() - killedAt)} ms after the kill`,
      );
    } finally {
      await store.close();
    }
  });
});

/**
 * A listing walks every master with SCAN, each on the pool's connection to it (redis-store.ts, scanIds).
 * Right after one master's connection was killed, the listing must not come back complete without that
 * master's locks: it lists every lock, or answers 503.
 */
describe('a master connection dropped under a listing', () => {
  it('every lock listed right after a master connection was killed (or a 503), never a complete listing short of them', async () => {
    const prefix = `${PREFIX}dropped-list:`;
    const store = new RedisStore({ connection: cluster.connection, keyPrefix: prefix, commandTimeoutMs: 1_000, fenceGraceMs: 60_000 });
    try {
      await eventually(() => store.ping(), 10_000);
      const words = withWords(store);
      const ids = Array.from({ length: 48 }, (_v, i) => lockId('listed', `l-${i}`));
      for (const id of ids)
        expect((await words.acquire({ id, ownerToken: newOwnerToken(), ttlMs: 60_000, holder: null })).acquired).toBe(true);
      const listAll = async (): Promise<string> => {
        const seen = new Set<string>();
        let cursor: string | undefined;
        try {
          do {
            const page = await words.list({ prefix: 'listed/', limit: 100, cursor });
            for (const row of page.leases) seen.add(row.id);
            cursor = page.nextCursor ?? undefined;
          } while (cursor !== undefined);
        } catch (err) {
          return `${(err as Error).constructor.name}: ${(err as Error).message}`;
        }
        return `listed ${seen.size}`;
      };
      expect(await listAll()).toBe(`listed ${ids.length}`);
      const client = (store as unknown as { redis: Cluster }).redis;
      const port = await cluster.masterOf(new KeySpace(prefix).lock(ids[0] as string));
      const node = () => client.nodes('master').find((n) => n.options.port === port);
      const before = node();
      await withAdmin(port, (c) => c.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes'));
      await vi.waitFor(() => expect(node() === before && before?.status === 'ready').toBe(false), { timeout: 5_000, interval: 5 });
      const answer = await listAll();
      console.log(`[cluster] a listing of ${ids.length} locks right after a master connection was killed: ${answer}`);
      expect(answer === `listed ${ids.length}` || answer.startsWith('StoreUnavailableError')).toBe(true);
    } finally {
      await store.close();
    }
  });
});

/**
 * The other calls on the Cluster that are not the lock store's scripts, each on a client of its own: the
 * rate limiter's shared allowance (shared-rate-limit.ts) and the lease history (redis-history.ts). Right
 * after their master's connection was killed, calls sent together on that master's keys must be
 * answered once the connection is made anew, as the lock calls are, not refused while it is healthy.
 */
describe('a master connection dropped under the rate limiter and the history', () => {
  const CALLS = 20;
  const COMMAND_TIMEOUT_MS = 1_000;

  /** `n` values of `make(i)` whose Redis key (`redisKey`) lies on the master at `port`, by `client`'s slot map. */
  function onMaster<T>(client: Cluster, port: number, make: (i: number) => T, redisKey: (value: T) => string, n: number): T[] {
    const found: T[] = [];
    for (let i = 0; found.length < n; i++) {
      const value = make(i);
      if (client.slots[new Command('exists', [redisKey(value)]).getSlot()]?.[0] === `127.0.0.1:${port}`) found.push(value);
    }
    return found;
  }

  /** CLIENT KILL on the master at `port`, then waits until `client` has seen its connection there close. */
  async function killConnectionsOn(client: Cluster, port: number): Promise<void> {
    const node = () => client.nodes('master').find((n) => n.options.port === port);
    const before = node();
    expect(before?.status).toBe('ready');
    await withAdmin(port, (c) => c.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes'));
    await vi.waitFor(() => expect(node() === before && before?.status === 'ready').toBe(false), { timeout: 5_000, interval: 5 });
  }

  const tallyOf = (answers: string[]) => answers.reduce<Record<string, number>>((acc, a) => ({ ...acc, [a]: (acc[a] ?? 0) + 1 }), {});
  const refusal = (err: Error) => `${err.constructor.name}: ${err.message}`;

  it(`${CALLS} allowance calls of the rate limiter on one master right after its connection was killed: every one answered`, async () => {
    const prefix = `${PREFIX}dropped-rate:`;
    const space = new KeySpace(prefix);
    // As openSharedRateLimit makes it: a client of its own, the store's command timeout, the same wait.
    const client = createRedisClient(cluster.connection, { commandTimeoutMs: COMMAND_TIMEOUT_MS }) as Cluster;
    const allowance = new RedisRateAllowance(client, prefix, COMMAND_TIMEOUT_MS);
    const take = (rateKey: string) =>
      allowance.handOut(rateKey, 1, 100, 60_000).then((batch) => (batch.granted === 1 ? 'granted' : `granted ${batch.granted}`), refusal);
    try {
      await eventually(() => allowance.handOut('key:warm-up', 1, 100, 60_000), 10_000);
      const port = await cluster.masterOf(space.rateWindow('key:r-0'));
      const rateKeys = onMaster(
        client,
        port,
        (i) => `key:r-${i}`,
        (k) => space.rateWindow(k),
        CALLS + 1,
      );
      // The client's connection to that master is made and used.
      expect(await take(rateKeys[0] as string)).toBe('granted');
      await killConnectionsOn(client, port);
      const started = performance.now();
      const tally = tallyOf(await Promise.all(rateKeys.slice(1).map(take)));
      console.log(
        `[cluster] ${CALLS} rate allowance calls right after a master connection was killed: ${JSON.stringify(tally)} in ${Math.round(performance.now() - started)} ms`,
      );
      expect(tally).toEqual({ granted: CALLS });
    } finally {
      client.disconnect();
    }
  });

  it(`${CALLS} history appends and reads on one master right after its connection was killed: every one answered`, async () => {
    const prefix = `${PREFIX}dropped-history:`;
    const history = new RedisHistory({
      connection: cluster.connection,
      keyPrefix: prefix,
      commandTimeoutMs: COMMAND_TIMEOUT_MS,
      limits: { eventsPerKey: 10, keysPerNamespace: 1_000, retentionMs: 60_000 },
    });
    const client = (history as unknown as { redis: Cluster }).redis;
    const append = (key: HistoryKey) =>
      history.append([{ ...key, record: { kind: 'released', at: Date.now(), lease: key.key } }]).then(() => 'appended', refusal);
    const read = (key: HistoryKey) => history.read(key).then((records) => `read ${records.length}`, refusal);
    try {
      const first: HistoryKey = { namespace: 'drop', primitive: 'lock', key: 'h-0' };
      await eventually(() => history.append([{ ...first, record: { kind: 'released', at: Date.now(), lease: 'warm-up' } }]), 10_000);
      const port = await cluster.masterOf(history.listKey(first));
      const keys = onMaster(
        client,
        port,
        (i): HistoryKey => ({ namespace: 'drop', primitive: 'lock', key: `h-${i}` }),
        (k) => history.listKey(k),
        CALLS + 1,
      );
      expect(await append(keys[0] as HistoryKey)).toBe('appended');
      await killConnectionsOn(client, port);
      let started = performance.now();
      const appended = tallyOf(await Promise.all(keys.slice(1).map(append)));
      console.log(
        `[cluster] ${CALLS} history appends right after a master connection was killed: ${JSON.stringify(appended)} in ${Math.round(performance.now() - started)} ms`,
      );
      await killConnectionsOn(client, port);
      started = performance.now();
      const read1 = tallyOf(await Promise.all(keys.slice(1).map(read)));
      console.log(
        `[cluster] ${CALLS} history reads right after a master connection was killed: ${JSON.stringify(read1)} in ${Math.round(performance.now() - started)} ms`,
      );
      expect.soft(appended).toEqual({ appended: CALLS });
      expect.soft(read1).toEqual({ 'read 1': CALLS });
    } finally {
      await history.close();
    }
  });
});

async function withAdmin<T>(port: number, use: (client: Redis) => Promise<T>): Promise<T> {
  const client = new Redis({ port, host: '127.0.0.1', lazyConnect: false });
  try {
    return await use(client);
  } finally {
    client.disconnect();
  }
}
