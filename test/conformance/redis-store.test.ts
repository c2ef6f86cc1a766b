import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../../src/domain/errors.js';
import { KeySpace } from '../../src/store/redis/keys.js';
import { openRedisStore } from '../helpers/redis-store.js';
import { type LockStore, withWords } from '../helpers/store-words.js';
import { RedisServer } from '../helpers/redis-server.js';
import { describeStoreContract } from './lock-store.contract.js';
import { describeHistoryContract } from './history.contract.js';
import { RedisHistory } from '../../src/store/redis/redis-history.js';
import type { HistoryLimits } from '../../src/domain/history.js';
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
  openRedisStore(server, { keyPrefix: PREFIX, fenceGraceMs, maxWaitersPerKey }).then(withWords);

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

/** A Redis history on the test server under the contract's prefix. */
const openHistory = (limits: HistoryLimits): RedisHistory =>
  new RedisHistory({ connection: { mode: 'standalone', url: server.url }, keyPrefix: PREFIX, commandTimeoutMs: 2_000, limits });

describeHistoryContract('redis', {
  open: async (limits) => openHistory(limits),
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

describe('redis history index', () => {
  it('holds at most the shard cap of lists, those its TTL dropped included, with no sweep of its own', async () => {
    // keysPerNamespace 16: one list per shard. Lists of one shard, written one call apart; the first
    // two outlive their TTL before the next is written.
    const limits = { eventsPerKey: 5, keysPerNamespace: 16, retentionMs: 300 };
    const store = openHistory(limits);
    const client = server.client();
    try {
      const namespace = `index-${Date.now().toString(36)}`;
      const keyOf = (i: number) => ({ namespace, primitive: 'lock' as const, key: `k${i}` });
      const index = store.indexKey(store.listKey(keyOf(0)));
      const same = Array.from({ length: 400 }, (_, i) => keyOf(i)).filter((k) => store.indexKey(store.listKey(k)) === index);
      expect(same.length).toBeGreaterThanOrEqual(4);
      const [a, b, c, d] = same as [ReturnType<typeof keyOf>, ReturnType<typeof keyOf>, ReturnType<typeof keyOf>, ReturnType<typeof keyOf>];
      await store.append([{ ...a, record: { kind: 'released', at: Date.now(), lease: 'a' } }]);
      await store.append([{ ...b, record: { kind: 'released', at: Date.now(), lease: 'b' } }]);
      expect(await client.zcard(index)).toBe(1);
      expect(await client.exists(store.listKey(a))).toBe(0);
      await new Promise((r) => setTimeout(r, 450));
      expect(await client.exists(store.listKey(b))).toBe(0);
      await store.append([{ ...c, record: { kind: 'released', at: Date.now(), lease: 'c' } }]);
      await store.append([{ ...d, record: { kind: 'released', at: Date.now(), lease: 'd' } }]);
      expect(await client.zrange(index, 0, -1)).toEqual([store.listKey(d)]);
      expect(await client.exists(store.listKey(d))).toBe(1);
    } finally {
      client.disconnect();
      await store.close();
    }
  });

  it('a list outlives every write by the retention: TTL set when created, refreshed once per period, not per write', async () => {
    // retention 32 s: a refresh period of 1 s, a TTL of 34 s.
    const limits = { eventsPerKey: 5, keysPerNamespace: 1_600, retentionMs: 32_000 };
    const store = openHistory(limits);
    const client = server.client();
    try {
      const namespace = `ttl-${Date.now().toString(36)}`;
      const a = { namespace, primitive: 'lock' as const, key: 'a' };
      const b = { namespace, primitive: 'lock' as const, key: 'b' };
      const write = (key: typeof a, n = 1) =>
        store.append(
          Array.from({ length: n }, (_, i) => ({ ...key, record: { kind: 'released' as const, at: Date.now(), lease: `${i}` } })),
        );
      const ttlOf = (key: typeof a) => client.pttl(store.listKey(key));
      const index = store.indexKey(store.listKey(a));
      await write(a);
      // A skiplist from its first write, not a listpack (whose every ZADD of a member scans the others).
      expect(await client.object('ENCODING', index)).toBe('skiplist');
      const first = await ttlOf(a);
      const firstOfIndex = await client.pttl(index);
      expect(first).toBeGreaterThan(limits.retentionMs);
      expect(first).toBeLessThanOrEqual(34_000);
      expect(firstOfIndex).toBeGreaterThan(limits.retentionMs);
      // Written again within the period: no PEXPIRE, the TTLs run on (and still cover the retention).
      await new Promise((r) => setTimeout(r, 200));
      await write(a);
      const second = await ttlOf(a);
      expect(second).toBeLessThan(first - 100);
      expect(second).toBeGreaterThan(limits.retentionMs);
      expect(await client.pttl(index)).toBeLessThan(firstOfIndex - 100);
      // A list (or an index) gone meanwhile (its TTL, another instance's cap) and written again within the
      // period: the script sees it new and gives it a TTL, whatever this instance remembers.
      await client.del(store.listKey(a), index);
      await write(a);
      expect(await ttlOf(a)).toBeGreaterThan(limits.retentionMs);
      expect(await client.pttl(index)).toBeGreaterThan(limits.retentionMs);
      // A new list of several events in one call: new as well.
      await write(b, 3);
      expect(await store.read(b)).toHaveLength(3);
      expect(await ttlOf(b)).toBeGreaterThan(limits.retentionMs);
      // Past the period: the next write refreshes the TTL.
      const before = await ttlOf(a);
      await new Promise((r) => setTimeout(r, 1_100));
      await write(a);
      // Refreshed: some 34 s left again; not refreshed, 1.1 s less than before.
      expect(await ttlOf(a)).toBeGreaterThan(before - 500);
      expect(await store.read(a)).toHaveLength(2);
    } finally {
      client.disconnect();
      await store.close();
    }
  });

  it('one batch of more lists than one call takes, many of them in one shard: every list gets its events', async () => {
    // keysPerNamespace 3,200: 200 lists per shard. 300 keys of one namespace: about 19 in each shard, and
    // more lists than one script call carries (the batch goes as several).
    const limits = { eventsPerKey: 5, keysPerNamespace: 3_200, retentionMs: 60_000 };
    const store = openHistory(limits);
    try {
      const namespace = `batch-${Date.now().toString(36)}`;
      const keys = Array.from({ length: 300 }, (_, i) => ({ namespace, primitive: 'lock' as const, key: `k${i}` }));
      const at = Date.now();
      await store.append(keys.map((k, i) => ({ ...k, record: { kind: 'released' as const, at, lease: `lease-${i}` } })));
      const missing: string[] = [];
      for (const [i, k] of keys.entries()) {
        const events = await store.read(k);
        if (events.length !== 1 || (events[0] as { lease?: string }).lease !== `lease-${i}`) missing.push(k.key);
      }
      expect(missing).toEqual([]);
    } finally {
      await store.close();
    }
  });

  it('a Redis that cannot be reached: a batch fails with store_unavailable within the command timeout', async () => {
    const closed = await RedisServer.start();
    const url = closed.url;
    await closed.stop();
    const store = new RedisHistory({
      connection: { mode: 'standalone', url },
      keyPrefix: PREFIX,
      commandTimeoutMs: 300,
      limits: { eventsPerKey: 5, keysPerNamespace: 16, retentionMs: 60_000 },
    });
    try {
      const started = Date.now();
      const err = await store
        .append([{ namespace: 'gone', primitive: 'lock', key: 'k', record: { kind: 'released', at: started, lease: 'l' } }])
        .then(
          () => null,
          (e: unknown) => e as StoreUnavailableError,
        );
      expect(err).toBeInstanceOf(StoreUnavailableError);
      expect(err?.cause).toBeInstanceOf(Error);
      expect(Date.now() - started).toBeLessThan(300 + 5_000);
    } finally {
      await store.close();
    }
  });
});
