import { performance } from 'node:perf_hooks';
import { Cluster, Command, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createRedisClient, type RedisClient } from '../../src/store/redis/client.js';
import { everyMasterNode, masterGate, readyForCalls, whenReadyForCalls } from '../../src/store/redis/nodes.js';
import { InvalidRequestError } from '../../src/domain/errors.js';
import { newOwnerToken } from '../../src/domain/lock-service.js';
import { lockId } from '../../src/domain/namespaces.js';
import { KeySpace } from '../../src/store/redis/keys.js';
import { RedisHistory } from '../../src/store/redis/redis-history.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { RedisCluster } from '../helpers/redis-cluster.js';
import { withWords } from '../helpers/store-words.js';
import { freePort } from '../helpers/redis-server.js';
import { eventually } from '../helpers/redis-store.js';

/**
 * The Cluster client's master gate (nodes.ts) on its own, over a real 3-master Cluster and the client
 * the store makes: no offline queue, so a command for a master whose connection is being made anew is
 * refused or sent elsewhere (MOVED) unless it waits for that connection. The store's own tests
 * (redis-cluster-store.test.ts) show the answers callers get; these pin the gate's rules one by one,
 * cheaply enough to run under each of its mutants.
 */
const TIMEOUT_MS = 1_500;

let cluster: RedisCluster;
let client: Cluster;

beforeAll(async () => {
  cluster = await RedisCluster.start({ masters: 3, replicasPerMaster: 0 });
  client = createRedisClient(cluster.connection, { commandTimeoutMs: TIMEOUT_MS }) as Cluster;
  await eventually(() => client.ping(), 10_000);
}, 60_000);

afterAll(async () => {
  client?.disconnect();
  await cluster?.stop();
});

const nodeKey = (n: Redis): string => `${n.options.host ?? ''}:${String(n.options.port ?? '')}`;
const ownerOfKey = (key: string): string | undefined => client.slots[new Command('get', [key]).getSlot()]?.[0];
const poolNode = (owner: string): Redis | undefined => client.nodes('master').find((n) => nodeKey(n) === owner);

/** Keys of each master: `perMaster` keys whose slot the named master serves. */
function keysByMaster(perMaster: number): Map<string, string[]> {
  const found = new Map<string, string[]>();
  for (let i = 0; [...found.values()].filter((k) => k.length >= perMaster).length < 3; i++) {
    const key = `gate:${String(i)}`;
    const owner = ownerOfKey(key);
    if (owner === undefined) continue;
    const list = found.get(owner) ?? [];
    if (list.length < perMaster) list.push(key);
    found.set(owner, list);
  }
  return found;
}

/** Every master connection made and ready (a command to each). */
async function warm(): Promise<void> {
  await eventually(async () => {
    for (const keys of keysByMaster(1).values()) await client.get(keys[0] as string);
    for (const n of client.nodes('master')) if (n.status !== 'ready') throw new Error(`${nodeKey(n)} ${n.status}`);
  }, 10_000);
}

/** Drops this client's connection to `owner` from the server side, as an idle reaper would. */
async function killConnectionTo(owner: string): Promise<Redis> {
  const before = poolNode(owner);
  expect(before?.status).toBe('ready');
  const admin = new Redis({ host: '127.0.0.1', port: Number(owner.split(':')[1]) });
  try {
    await admin.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
  } finally {
    admin.disconnect();
  }
  await vi.waitFor(() => expect(poolNode(owner) === before && before?.status === 'ready').toBe(false), { timeout: 5_000, interval: 5 });
  return before as Redis;
}

describe('master gate (Cluster client)', () => {
  it('is no gate on one Redis: a plain client needs none', () => {
    const plain = new Redis({ lazyConnect: true });
    try {
      expect(masterGate(plain as unknown as RedisClient, TIMEOUT_MS)).toBeNull();
    } finally {
      plain.disconnect();
    }
  });

  it('does not hold a call while the whole client is down: it fails at once, as without the gate', () => {
    const down = createRedisClient(
      { mode: 'cluster', nodes: [{ host: '127.0.0.1', port: 1 }] },
      { commandTimeoutMs: TIMEOUT_MS },
    ) as Cluster;
    try {
      expect(down.status).not.toBe('ready');
      expect(masterGate(down, TIMEOUT_MS)?.('gate:0')).toBeUndefined();
    } finally {
      down.disconnect();
    }
  });

  it('lets a call through at once when its master connection is ready, once seen ready', async () => {
    await warm();
    const gate = masterGate(client, TIMEOUT_MS);
    for (const keys of keysByMaster(2).values()) {
      // The first call of a master may look it up; from then on none waits.
      await gate?.(keys[0] as string);
      expect(gate?.(keys[0] as string)).toBeUndefined();
      expect(gate?.(keys[1] as string)).toBeUndefined();
    }
  });

  it('makes a call wait for its master connection made anew, then lets it through on a ready one; other masters do not wait', async () => {
    await warm();
    const gate = masterGate(client, TIMEOUT_MS);
    const byMaster = keysByMaster(1);
    for (const keys of byMaster.values()) await gate?.(keys[0] as string);
    const [victim, other] = [...byMaster.keys()] as [string, string];
    await killConnectionTo(victim);
    // Another master's calls are not held for the one being reconnected.
    expect(gate?.((byMaster.get(other) as string[])[0] as string)).toBeUndefined();
    const waiting = gate?.((byMaster.get(victim) as string[])[0] as string);
    expect(waiting).toBeInstanceOf(Promise);
    const started = performance.now();
    await waiting;
    expect(performance.now() - started).toBeLessThan(TIMEOUT_MS);
    expect(poolNode(victim)?.status).toBe('ready');
    // Sent together, after the wait every call is answered (no "Connection is closed", no MOVED).
    const keys = keysByMaster(20).get(victim) as string[];
    await Promise.all(keys.map(async (k) => gate?.(k)));
    const answers = await Promise.allSettled(keys.map((k) => client.set(k, '1')));
    expect(answers.filter((a) => a.status === 'rejected')).toEqual([]);
  });

  it('gives up after its timeout when the master does not answer, naming the master and its state', async () => {
    await warm();
    const gate = masterGate(client, TIMEOUT_MS);
    const byMaster = keysByMaster(1);
    for (const keys of byMaster.values()) await gate?.(keys[0] as string);
    const victim = [...byMaster.keys()][0] as string;
    const server = cluster.servers.find((s) => s.port === Number(victim.split(':')[1]));
    await killConnectionTo(victim);
    server?.pause();
    try {
      const started = performance.now();
      await expect(gate?.((byMaster.get(victim) as string[])[0] as string)).rejects.toThrow(
        new RegExp(`not ready within ${String(TIMEOUT_MS)} ms \\(${victim}`),
      );
      const tookMs = performance.now() - started;
      expect(tookMs).toBeGreaterThanOrEqual(TIMEOUT_MS - 5);
    } finally {
      server?.resume();
    }
    // And once it answers again, the next call's wait ends on its ready connection.
    await eventually(() => gate?.((byMaster.get(victim) as string[])[0] as string) ?? Promise.resolve(), 10_000);
    expect(poolNode(victim)?.status).toBe('ready');
  });
});

describe('every master node (listings)', () => {
  it('is the client itself on one Redis', async () => {
    const plain = new Redis({ lazyConnect: true });
    try {
      expect(await everyMasterNode(plain as unknown as RedisClient, TIMEOUT_MS)).toEqual([plain]);
    } finally {
      plain.disconnect();
    }
  });

  it('names every master of the slot map, waiting for a connection made anew instead of leaving its master out', async () => {
    await warm();
    const masters = [...keysByMaster(1).keys()].sort();
    expect((await everyMasterNode(client, TIMEOUT_MS)).map(nodeKey).sort()).toEqual(masters);
    await killConnectionTo(masters[1] as string);
    const nodes = await everyMasterNode(client, TIMEOUT_MS);
    expect(nodes.map(nodeKey).sort()).toEqual(masters);
    for (const n of nodes) expect(n.status).toBe('ready');
  });
});

describe('ready for calls (a Cluster client just made)', () => {
  it('waits for every master connection, making the ones a Cluster client leaves for a first command', async () => {
    const fresh = createRedisClient(cluster.connection, { commandTimeoutMs: TIMEOUT_MS }) as Cluster;
    try {
      expect(readyForCalls(fresh)).toBe(false);
      const events = ['ready', 'end', 'refresh', '-node'] as const;
      const before = events.map((e) => fresh.listenerCount(e));
      await whenReadyForCalls(fresh, 10_000);
      expect(readyForCalls(fresh)).toBe(true);
      const masters = fresh.nodes('master');
      expect(masters).toHaveLength(3);
      for (const n of masters) expect(n.status).toBe('ready');
      // It leaves no listener behind, on the client or on a master's connection.
      expect(events.map((e) => fresh.listenerCount(e))).toEqual(before);
      for (const n of masters) expect(n.listeners('ready').filter((l) => l.name === 'check')).toEqual([]);
      // Ready already: resolved without a wait.
      await whenReadyForCalls(fresh, 1);
    } finally {
      fresh.disconnect();
    }
  });

  it('on one Redis asks the client only, and says its state when it gives up', async () => {
    const plain = new Redis({ port: cluster.servers[0]?.port, lazyConnect: true });
    try {
      expect(readyForCalls(plain)).toBe(false);
      await expect(whenReadyForCalls(plain, 50)).rejects.toThrow('not connected (wait)');
      await plain.connect();
      expect(readyForCalls(plain)).toBe(true);
      await whenReadyForCalls(plain, 1);
    } finally {
      plain.disconnect();
    }
  });

  it('refuses at once a client closed, and as soon as a client waited for ends', async () => {
    const closed = new Redis({ lazyConnect: true });
    closed.disconnect();
    expect(closed.status).toBe('end');
    // Its 'end' event is emitted on the next tick: long past by the time a later call asks.
    await new Promise((resolve) => setImmediate(resolve));
    await expect(whenReadyForCalls(closed, 5_000)).rejects.toThrow('not connected (closed)');
    // Nothing listens on its port and it does not retry: it ends, and the wait with it, long before 5 s.
    const doomed = new Redis({ port: await freePort(), retryStrategy: () => null, lazyConnect: true });
    doomed.on('error', () => undefined);
    const started = performance.now();
    const waited = whenReadyForCalls(doomed, 5_000);
    doomed.connect().catch(() => undefined);
    await expect(waited).rejects.toThrow('not connected (closed)');
    expect(performance.now() - started).toBeLessThan(4_000);
  });
});

/**
 * The store's own rules that only a Cluster reaches, on this Cluster: a lock set's keys in one slot, and
 * a history batch spread over every master, one call per shard.
 */
describe('the store on a Cluster', () => {
  it('a lock set works when its keys share a shard, and is refused with invalid_request (keys) when they do not', async () => {
    const prefix = 'gate-sets:';
    const store = new RedisStore({ connection: cluster.connection, keyPrefix: prefix, commandTimeoutMs: TIMEOUT_MS, fenceGraceMs: 60_000 });
    try {
      await eventually(() => store.ping(), 10_000);
      const sets = withWords(store).lockSets;
      if (!sets) throw new Error('the Redis store has lock sets');
      const space = new KeySpace(prefix);
      const names = Array.from({ length: 64 }, (_v, i) => `s-${i}`);
      const first = names[0] as string;
      const same = names.find((n) => n !== first && space.shardOf(n) === space.shardOf(first)) as string;
      const other = names.find((n) => space.shardOf(n) !== space.shardOf(first)) as string;
      const ids = (...keys: string[]) => keys.map((k) => lockId('sets', k));
      const owner = newOwnerToken();
      expect((await sets.acquireSet({ ids: ids(first, same), ownerToken: owner, ttlMs: 10_000, holder: null })).acquired).toBe(true);
      expect(await sets.releaseSet(ids(first, same), owner)).toBe(true);
      // One key: one slot, whatever its shard.
      const alone = newOwnerToken();
      expect((await sets.acquireSet({ ids: ids(other), ownerToken: alone, ttlMs: 10_000, holder: null })).acquired).toBe(true);
      expect(await sets.releaseSet(ids(other), alone)).toBe(true);
      for (const apart of [ids(first, other), ids(first, same, other), ids(other, first)]) {
        const refused = sets.acquireSet({ ids: apart, ownerToken: newOwnerToken(), ttlMs: 10_000, holder: null });
        await expect(refused).rejects.toBeInstanceOf(InvalidRequestError);
        await expect(refused).rejects.toMatchObject({ field: 'keys' });
      }
    } finally {
      await store.close();
    }
  });

  it('a history batch over every master: each key’s events kept, in one call per shard', async () => {
    const limits = { eventsPerKey: 10, keysPerNamespace: 1_000, retentionMs: 60_000 };
    const history = new RedisHistory({ connection: cluster.connection, keyPrefix: 'gate-history:', commandTimeoutMs: 2_000, limits });
    try {
      const at = Date.now();
      const keys = Array.from({ length: 48 }, (_v, i) => ({ namespace: 'h', primitive: 'lock' as const, key: `k${i}` }));
      const batch = keys.flatMap((k, i) => [
        { ...k, record: { kind: 'granted' as const, at, lease: `L${i}`, fencingToken: i + 1, holder: `h${i}`, expiresAt: at + 5_000 } },
        { ...k, record: { kind: 'released' as const, at: at + 1, lease: `L${i}` } },
      ]);
      await history.append(batch);
      const masters = new Set(keys.map((k) => client.slots[new Command('get', [history.listKey(k)]).getSlot()]?.[0]));
      expect(masters.size).toBe(3);
      for (const [i, k] of keys.entries()) {
        const records = await history.read(k);
        expect(records.map((r) => r.kind)).toEqual(['granted', 'released']);
        expect(records[0]).toMatchObject({ fencingToken: i + 1, holder: `h${i}` });
      }
    } finally {
      await history.close();
    }
  });
});
