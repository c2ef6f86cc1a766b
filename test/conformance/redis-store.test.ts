import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../../src/domain/errors.js';
import { KeySpace } from '../../src/store/redis/keys.js';
import { openRedisStore } from '../helpers/redis-store.js';
import { type LockStore, withWords } from '../helpers/store-words.js';
import { RedisServer } from '../helpers/redis-server.js';
import { describeStoreContract } from './lock-store.contract.js';
import { describeHistoryContract } from './history.contract.js';
import { RedisHistory } from '../../src/store/redis/redis-history.js';
import { decodeRecord, encodeRecord, type HistoryKey, type HistoryLimits, type HistoryRecord } from '../../src/domain/history.js';
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
      const { data, field } = (store as RedisHistory).historyKeys(key);
      return (await client.hexists(data, field)) === 1;
    } finally {
      client.disconnect();
    }
  },
  // Counted per quota shard: keysPerNamespace / 16, rounded up, in each.
  keysKept: (keysPerNamespace) => QUOTA_SHARDS * Math.ceil(keysPerNamespace / QUOTA_SHARDS),
});

describe('redis history layout: a hash and an index per shard', () => {
  /** `count` keys of one namespace that share a shard (so its hash and index). */
  const sameShard = (store: RedisHistory, namespace: string, count: number) => {
    const keyOf = (i: number) => ({ namespace, primitive: 'lock' as const, key: `k${i}` });
    const { index } = store.historyKeys(keyOf(0));
    const same = Array.from({ length: 400 }, (_, i) => keyOf(i)).filter((k) => store.historyKeys(k).index === index);
    expect(same.length).toBeGreaterThanOrEqual(count);
    return same.slice(0, count);
  };
  const released = (lease: string) => ({ kind: 'released' as const, at: Date.now(), lease });

  it('holds at most the shard cap of keys, in the index and the hash alike; an idle shard goes whole', async () => {
    // keysPerNamespace 16: one key per shard. Keys of one shard, written one call apart; the shard then
    // outlives its TTL (retention 300 ms) before the next two are written.
    const limits = { eventsPerKey: 5, keysPerNamespace: 16, retentionMs: 300 };
    const store = openHistory(limits);
    const client = server.client();
    try {
      const [a, b, c, d] = sameShard(store, `index-${Date.now().toString(36)}`, 4) as [HistoryKey, HistoryKey, HistoryKey, HistoryKey];
      const { index, data } = store.historyKeys(a);
      await store.append([{ ...a, record: released('a') }]);
      await store.append([{ ...b, record: released('b') }]);
      expect(await client.zrange(index, 0, -1)).toEqual([store.historyKeys(b).field]);
      expect(await client.hkeys(data)).toEqual([store.historyKeys(b).field]);
      await new Promise((r) => setTimeout(r, 450));
      expect(await client.exists(index, data)).toBe(0);
      await store.append([{ ...c, record: released('c') }]);
      await store.append([{ ...d, record: released('d') }]);
      expect(await client.zrange(index, 0, -1)).toEqual([store.historyKeys(d).field]);
      expect(await client.hkeys(data)).toEqual([store.historyKeys(d).field]);
      expect((await store.read(d)).map((r) => r.lease)).toEqual(['d']);
    } finally {
      client.disconnect();
      await store.close();
    }
  });

  it('drops a key idle for the retention from a shard still written', async () => {
    // Two keys per shard; retention 1 s (a refresh period of 31 ms): b is written every 100 ms, a once.
    const limits = { eventsPerKey: 5, keysPerNamespace: 32, retentionMs: 1_000 };
    const store = openHistory(limits);
    const client = server.client();
    try {
      const [a, b] = sameShard(store, `idle-${Date.now().toString(36)}`, 2) as [HistoryKey, HistoryKey];
      const { index, data } = store.historyKeys(a);
      // Before the write: its rank (Redis's clock, on this host) is no earlier.
      const written = Date.now();
      await store.append([{ ...a, record: released('a') }]);
      const kept = () => client.hexists(data, store.historyKeys(a).field);
      while (Date.now() - written < 1_300) {
        await new Promise((r) => setTimeout(r, 100));
        await store.append([{ ...b, record: released('b') }]);
        const present = await kept();
        // Never before the retention (the write that may have dropped it ran before this clock reading).
        if (Date.now() - written < 990) expect(present).toBe(1);
      }
      await store.append([{ ...b, record: released('b') }]);
      expect(await kept()).toBe(0);
      expect(await client.zscore(index, store.historyKeys(a).field)).toBeNull();
      expect(await client.hexists(data, store.historyKeys(b).field)).toBe(1);
    } finally {
      client.disconnect();
      await store.close();
    }
  });

  it('a shard outlives every write by the retention: TTLs set when created, refreshed once per period, not per write', async () => {
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
      const { index, data } = store.historyKeys(a);
      const ttls = async () => [await client.pttl(index), await client.pttl(data)] as const;
      await write(a);
      // A hash table from its first write, not a listpack (whose every field read scans the others).
      expect(await client.object('ENCODING', data)).toBe('hashtable');
      const [firstOfIndex, first] = await ttls();
      expect(first).toBeGreaterThan(limits.retentionMs);
      expect(first).toBeLessThanOrEqual(34_000);
      expect(firstOfIndex).toBeGreaterThan(limits.retentionMs);
      // Written again within the period: no PEXPIRE, the TTLs run on (and still cover the retention).
      await new Promise((r) => setTimeout(r, 200));
      await write(a);
      const [secondOfIndex, second] = await ttls();
      expect(second).toBeLessThan(first - 100);
      expect(second).toBeGreaterThan(limits.retentionMs);
      expect(secondOfIndex).toBeLessThan(firstOfIndex - 100);
      // The shard gone meanwhile (its TTL), or its hash or its index alone (evicted, deleted), and written
      // again within the period: the script sees what is new and gives it a TTL, whatever this instance remembers.
      for (const gone of [[index, data], [data], [index]]) {
        await client.del(...gone);
        await write(a);
        for (const ttl of await ttls()) expect(ttl, gone.join(' ')).toBeGreaterThan(limits.retentionMs);
      }
      // A key of several events in one call.
      await write(b, 3);
      expect(await store.read(b)).toHaveLength(3);
      // Past the period: the next write refreshes the TTLs.
      const [, before] = await ttls();
      await new Promise((r) => setTimeout(r, 1_100));
      await write(a);
      // Refreshed: some 34 s left again; not refreshed, 1.1 s less than before.
      expect((await ttls())[1]).toBeGreaterThan(before - 500);
      // a's writes since its hash was last deleted: two in the loop, one now.
      expect(await store.read(a)).toHaveLength(3);
    } finally {
      client.disconnect();
      await store.close();
    }
  });

  it('reads a key of the layout before (a LIST per key) with what it is written since; deletes the list when it leaves the index', async () => {
    // Two keys per shard; 5 events per key.
    const limits = { eventsPerKey: 5, keysPerNamespace: 32, retentionMs: 60_000 };
    const store = openHistory(limits);
    const client = server.client();
    try {
      const [a, b] = sameShard(store, `upgrade-${Date.now().toString(36)}`, 2) as [HistoryKey, HistoryKey];
      const { index, data, list } = store.historyKeys(a);
      const t = Date.now();
      const old = Array.from({ length: 4 }, (_, i): HistoryRecord => ({ kind: 'released', at: t + i, lease: `old${i}` }));
      // As the script before wrote it: the list, its TTL, and the list's key name in the shard's index.
      await client.rpush(list, ...old.map(encodeRecord));
      await client.pexpire(list, 60_000);
      await client.zadd(index, t, list);
      expect((await store.read(a)).map((r) => r.lease)).toEqual(['old0', 'old1', 'old2', 'old3']);
      await store.append([0, 1, 2].map((i) => ({ ...a, record: { kind: 'released' as const, at: t + 10 + i, lease: `new${i}` } })));
      // Both, oldest first; the last eventsPerKey of them.
      expect((await store.read(a)).map((r) => r.lease)).toEqual(['old2', 'old3', 'new0', 'new1', 'new2']);
      expect(await client.hexists(data, store.historyKeys(a).field)).toBe(1);
      // A third key in the shard (cap 2): the least recently written is the old list, deleted with its entry.
      await store.append([{ ...b, record: released('b') }]);
      expect(await client.exists(list)).toBe(0);
      expect(await client.zrange(index, 0, -1)).toEqual([store.historyKeys(a).field, store.historyKeys(b).field]);
      expect((await store.read(a)).map((r) => r.lease)).toEqual(['new0', 'new1', 'new2']);
      // The field keeps its count and the last eventsPerKey lines, not every event written.
      await store.append([3, 4, 5].map((i) => ({ ...a, record: { kind: 'released' as const, at: t + 10 + i, lease: `new${i}` } })));
      const [count, ...lines] = ((await client.hget(data, store.historyKeys(a).field)) ?? '').split('\n');
      expect(count).toBe('5');
      expect(lines.map((line) => decodeRecord(line)?.lease)).toEqual(['new1', 'new2', 'new3', 'new4', 'new5']);
    } finally {
      client.disconnect();
      await store.close();
    }
  });

  it('one batch of more keys than one call takes, many of them in one shard: every key gets its events', async () => {
    // keysPerNamespace 3,200: 200 keys per shard. 300 keys of one namespace: about 19 in each shard, and
    // more keys than one script call carries (the batch goes as several).
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
