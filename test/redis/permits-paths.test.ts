import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { Cluster, Command, Redis } from 'ioredis';
import { StoreUnavailableError } from '../../src/domain/errors.js';
import { newOwnerToken } from '../../src/domain/lock-service.js';
import { createRedisClient, type ReplicaAcks } from '../../src/store/redis/client.js';
import { KeySpace } from '../../src/store/redis/keys.js';
import { confirmOnReplicas, dataNodes, dropConnection, echoPingOn, ownerOf } from '../../src/store/redis/nodes.js';
import { MisalignedReplyError } from '../../src/store/redis/replies.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { FaultProxy } from '../helpers/fault-proxy.js';
import { until, withClient } from '../helpers/redis-admin.js';
import { freePort, RedisServer } from '../helpers/redis-server.js';
import { eventually } from '../helpers/redis-store.js';
import { withWords, type Worded } from '../helpers/store-words.js';

/**
 * The Redis store's permit paths that the contracts reach only from stores built before their tests
 * (a wait that runs out, a hand-over message, the heartbeat, a caller leaving as it is granted,
 * closing with waiters, replica acknowledgement), and the Cluster paths of nodes.ts on a small
 * Cluster of two masters. Every store here is built inside its test, so StrykerJS counts the test as
 * reaching the store's constructor and its wait room.
 */
let server: RedisServer;
let raw: Redis;
const PREFIX = 'paths:';
const space = new KeySpace(PREFIX);
let n = 0;
const uniqueKey = () => `paths/sem${++n}`;
const opened: Worded<RedisStore>[] = [];

beforeAll(async () => {
  server = await RedisServer.start();
  raw = server.client();
});
afterEach(async () => {
  // A store a test closed itself is closed again here: harmless.
  await Promise.all(opened.splice(0).map((s) => s.close().catch(() => undefined)));
});
afterAll(async () => {
  raw?.disconnect();
  await server?.stop();
});

/**
 * A store on the test server. `heartbeat: false`: its heartbeat interval is created on a fake timer
 * that never fires, so grants reach a waiter only through hand-over messages and the visits its wait
 * room schedules, and the test runs the heartbeat's visit itself (`engine.visitAll()`).
 */
async function open(options: { heartbeat?: boolean; replicaAcks?: ReplicaAcks } = {}): Promise<Worded<RedisStore>> {
  const make = () =>
    withWords(
      new RedisStore({
        url: server.url,
        keyPrefix: PREFIX,
        commandTimeoutMs: 1_000,
        fenceGraceMs: 60_000,
        replicaAcks: options.replicaAcks,
      }),
    );
  let store: Worded<RedisStore>;
  if (options.heartbeat === false) {
    vi.useFakeTimers({ toFake: ['setInterval'] });
    try {
      store = make();
    } finally {
      vi.useRealTimers();
    }
  } else {
    store = make();
  }
  opened.push(store);
  await eventually(() => store.ping(), 10_000);
  return store;
}

interface Call {
  readonly key: string;
  readonly ownerToken?: string;
  readonly waitMs?: number;
  readonly signal?: AbortSignal;
}

/** A permit of a semaphore of one (each test's key is its own). */
const take = (store: Worded<RedisStore>, { key, ownerToken = newOwnerToken(), waitMs = 0, signal }: Call) =>
  store.permits.acquirePermit({
    kind: 'semaphore',
    id: key,
    ownerToken,
    ttlMs: 10_000,
    holder: null,
    weight: 1,
    capacity: 1,
    waitMs,
    signal,
  });

const inspect = (store: Worded<RedisStore>, key: string) => store.permits.inspectPermits('semaphore', key);

/** Waits (on the condition, not a sleep) until `count` live callers wait on `key`. */
const waitersAre = (store: Worded<RedisStore>, key: string, count: number, timeout = 5_000) =>
  expect.poll(async () => (await inspect(store, key))?.waiters, { timeout, interval: 10 }).toBe(count);

/** The promise's outcome, or a failure as soon as `ms` have passed: an answer that never comes fails fast. */
async function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

const settled = (p: Promise<unknown>): Promise<unknown> => p.catch((err: unknown) => err);

/** How many WAIT commands the server on `port` has run. */
async function waitCalls(port: number): Promise<number> {
  const stats = await withClient(port, (c) => c.info('commandstats'));
  return Number(/cmdstat_wait:calls=(\d+)/.exec(stats)?.[1] ?? 0);
}

describe('redis permits: waiting, in a store built by the test', () => {
  it('a wait that runs out is answered "full" with the time the holder has left, and leaves the queue', async () => {
    const store = await open();
    const key = uniqueKey();
    expect((await take(store, { key })).acquired).toBe(true);
    const started = performance.now();
    const outcome = await within(3_000, 'the waiter', take(store, { key, waitMs: 100 }));
    expect(outcome).toMatchObject({ acquired: false, reason: 'full' });
    if (outcome.acquired) return;
    expect(performance.now() - started).toBeGreaterThanOrEqual(90);
    expect(outcome.retryAfterMs).toBeGreaterThan(0);
    expect(outcome.retryAfterMs).toBeLessThanOrEqual(10_000);
    expect((await inspect(store, key))?.waiters).toBe(0);
  });

  it('a hand-over message grants the waiter at once, without a heartbeat', async () => {
    const store = await open({ heartbeat: false });
    const other = await open();
    const key = uniqueKey();
    const holder = newOwnerToken();
    expect((await take(other, { key, ownerToken: holder })).acquired).toBe(true);
    // Without the message the grant would be found only when this wait runs out (cancel finds it granted).
    const waiting = take(store, { key, waitMs: 4_000 });
    await waitersAre(other, key, 1);
    const releasedAt = performance.now();
    expect(await other.permits.releasePermit('semaphore', key, holder)).toBe(true);
    const outcome = await within(3_000, 'the grant', waiting);
    expect(outcome.acquired).toBe(true);
    expect(performance.now() - releasedAt).toBeLessThan(2_000);
    expect((await inspect(other, key))?.holders).toHaveLength(1);
  });

  it('the heartbeat keeps a waiter alive: refreshed, it is served after its liveness would have run out', async () => {
    const store = await open({ heartbeat: false });
    const other = await open();
    const key = uniqueKey();
    const holder = newOwnerToken();
    expect((await take(other, { key, ownerToken: holder })).acquired).toBe(true);
    const waiting = take(store, { key, waitMs: 5_000 });
    await waitersAre(other, key, 1);
    // What three seconds without a heartbeat leave behind: the waiter's record no longer counts as alive.
    const records = space.permitKeys('semaphore', key).waiters;
    const [id] = await raw.hkeys(records);
    const record = id === undefined ? null : await raw.hget(records, id);
    if (id === undefined || record === null) throw new Error('no waiter record');
    await raw.hset(records, id, record.replace(/^\d+/, String(Date.now() - 1_000)));
    expect((await inspect(other, key))?.waiters).toBe(0);
    store.engine.visitAll();
    await waitersAre(other, key, 1, 2_000);
    expect(await other.permits.releasePermit('semaphore', key, holder)).toBe(true);
    expect((await within(3_000, 'the grant', waiting)).acquired).toBe(true);
  });

  it('a waiter whose caller leaves as it is handed the permit gives it back at once', async () => {
    const store = await open();
    const key = uniqueKey();
    const holder = newOwnerToken();
    expect((await take(store, { key, ownerToken: holder })).acquired).toBe(true);
    const caller = new AbortController();
    const leaving = settled(take(store, { key, waitMs: 5_000, signal: caller.signal }));
    await waitersAre(store, key, 1);
    // The release hands the permit to the waiter; its caller leaves in the same tick, so the cancel
    // runs right after the release on the same connection and finds the waiter granted.
    const released = store.permits.releasePermit('semaphore', key, holder);
    const reason = new Error('the caller left');
    caller.abort(reason);
    expect(await released).toBe(true);
    expect(await leaving).toBe(reason);
    // Given back, not kept for its 10 s TTL.
    await expect.poll(() => inspect(store, key), { timeout: 2_000, interval: 10 }).toBeNull();
  });

  it('closing the store answers its permit waiters at once and takes them out of the queue', async () => {
    const store = await open();
    const other = await open();
    const key = uniqueKey();
    expect((await take(other, { key })).acquired).toBe(true);
    const waiting = settled(take(store, { key, waitMs: 5_000 }));
    // Asked on the waiter's own connection, then one turn of the event loop: the acquire's answer has
    // been read and the caller waits in the room (not still registering) when the store closes.
    await waitersAre(store, key, 1);
    await new Promise((resolve) => setImmediate(resolve));
    await store.close();
    const answer = await within(1_000, 'the waiter', waiting);
    expect(answer).toBeInstanceOf(StoreUnavailableError);
    expect((answer as Error).message).toMatch(/closing/);
    expect(await raw.zcard(space.permitKeys('semaphore', key).queue)).toBe(0);
    expect((await inspect(other, key))?.waiters).toBe(0);
  });

  it('a permit force-released as it is handed over: the waiter is told it could not be delivered, never granted', async () => {
    const store = await open();
    const key = uniqueKey();
    const holder = newOwnerToken();
    expect((await take(store, { key, ownerToken: holder })).acquired).toBe(true);
    const waiting = settled(take(store, { key, waitMs: 5_000 }));
    await waitersAre(store, key, 1);
    // Both go out in this tick on the store's connection: the hand-over's confirmation, sent once its
    // message arrives, finds the permit already evicted.
    const released = store.permits.releasePermit('semaphore', key, holder);
    const evicted = store.permits.forceReleasePermits('semaphore', key);
    expect(await released).toBe(true);
    expect(await evicted).toHaveLength(1);
    const answer = await within(3_000, 'the waiter', waiting);
    expect(answer).toBeInstanceOf(StoreUnavailableError);
    expect(await inspect(store, key)).toBeNull();
  });
});

describe('redis permits: replica acknowledgement with no replica to confirm', () => {
  // One Redis and no replica: WAIT never reaches one, as when the replica is down.
  const acks: ReplicaAcks = { minReplicas: 1, timeoutMs: 20 };

  it('a permit granted at once is given back, and the caller gets a 503', async () => {
    const strict = await open({ replicaAcks: acks });
    const plain = await open();
    const key = uniqueKey();
    await expect(take(strict, { key })).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(await inspect(plain, key)).toBeNull();
  });

  it('so is a permit handed over to a waiter', async () => {
    const strict = await open({ replicaAcks: acks });
    const plain = await open();
    const key = uniqueKey();
    const holder = newOwnerToken();
    expect((await take(plain, { key, ownerToken: holder })).acquired).toBe(true);
    const waiting = settled(take(strict, { key, waitMs: 5_000 }));
    await waitersAre(plain, key, 1);
    expect(await plain.permits.releasePermit('semaphore', key, holder)).toBe(true);
    expect(await within(3_000, 'the waiter', waiting)).toBeInstanceOf(StoreUnavailableError);
    expect(await inspect(plain, key)).toBeNull();
  });
});

describe('nodes: one Redis', () => {
  it('on one Redis, WAIT runs on its one connection', async () => {
    expect(ownerOf(raw, 'any')).toBe('single');
    const before = await waitCalls(server.port);
    await expect(confirmOnReplicas(raw, space.lock('paths/x'), 'single', 0, 100)).resolves.toBe(0);
    expect(await waitCalls(server.port)).toBe(before + 1);
  });

  it('ping fails while Redis holds the connection open but answers nothing', async () => {
    const stalled = await RedisServer.start();
    const store = withWords(new RedisStore({ url: stalled.url, keyPrefix: PREFIX, commandTimeoutMs: 200, fenceGraceMs: 60_000 }));
    try {
      await eventually(() => store.ping(), 10_000);
      stalled.pause();
      await expect(store.ping()).rejects.toBeInstanceOf(StoreUnavailableError);
    } finally {
      stalled.resume();
      await store.close();
      await stalled.stop();
    }
  });

  it("a ping that reads another call's reply fails: the connection's replies are out of step", async () => {
    const proxy = await FaultProxy.start(server.port);
    const client = new Redis(proxy.url, { commandTimeout: 300, maxRetriesPerRequest: 0 });
    client.on('error', () => undefined);
    try {
      await client.ping();
      const dropped = proxy.stats.bytesDropped;
      proxy.set({ kind: 'dropReplies' });
      const lost = client.get('paths:lost').catch((err: unknown) => err);
      await vi.waitFor(() => expect(proxy.stats.bytesDropped).toBeGreaterThan(dropped), { timeout: 5_000 });
      proxy.heal();
      // Replies are matched to calls by order: the lost GET takes the PING's reply, and the PING the
      // reply meant for the ECHO sent behind it.
      const ping = echoPingOn(client).catch((err: unknown) => err);
      const echo = client.echo('another call').catch((err: unknown) => err);
      expect(await ping).toBeInstanceOf(MisalignedReplyError);
      await Promise.all([lost, echo]);
    } finally {
      client.disconnect();
      await proxy.close();
    }
  });
});

/**
 * nodes.ts on a Redis Cluster of two masters without replicas (slots split in half, joined with
 * CLUSTER MEET): which master a key's WAIT goes to, the data nodes in a stable order, and dropping one
 * node's connection. The client starts from the master that sorts last, so the order in which it
 * learns the masters is not already the sorted one.
 */
describe('nodes: a Cluster of two masters', () => {
  const masters: RedisServer[] = [];
  let client: Cluster;
  const name = (port: number) => `127.0.0.1:${port}`;
  /** The master serving the low half of the slots. */
  const low = () => masters[0] as RedisServer;
  /** A key whose slot is served by `port`. */
  const keyOn = (port: number): string => {
    const wantLow = low().port === port;
    for (let i = 0; ; i++) {
      const key = `kh:{k${i}}`;
      if (new Command('exists', [key]).getSlot() < 8192 === wantLow) return key;
    }
  };

  beforeAll(async () => {
    const started = await Promise.all(
      [0, 1].map(async () => {
        const busPort = await freePort();
        const args = [
          '--cluster-enabled',
          'yes',
          '--cluster-config-file',
          'nodes.conf',
          '--cluster-port',
          String(busPort),
          '--cluster-announce-ip',
          '127.0.0.1',
        ];
        const node = await RedisServer.start({ args });
        return { node, busPort };
      }),
    );
    for (const { node } of started) masters.push(node);
    const [a, b] = started as [(typeof started)[number], (typeof started)[number]];
    await withClient(a.node.port, (c) => c.call('CLUSTER', 'ADDSLOTSRANGE', '0', '8191'));
    await withClient(b.node.port, (c) => c.call('CLUSTER', 'ADDSLOTSRANGE', '8192', '16383'));
    await withClient(a.node.port, (c) => c.call('CLUSTER', 'MEET', '127.0.0.1', String(b.node.port), String(b.busPort)));
    for (const { node } of started) {
      await until(`node ${node.port} to know both halves of the slots`, 10_000, () =>
        withClient(node.port, async (c) => (((await c.call('CLUSTER', 'SLOTS')) as unknown[]).length === 2 ? true : undefined)),
      );
    }
    const last = [...masters].sort((x, y) => name(x.port).localeCompare(name(y.port)))[1] as RedisServer;
    const created = createRedisClient({ mode: 'cluster', nodes: [{ host: '127.0.0.1', port: last.port }] }, { commandTimeoutMs: 1_000 });
    if (!(created instanceof Cluster)) throw new Error('expected a Cluster client');
    client = created;
    await until('the client to know both masters and the slot map', 10_000, async () =>
      client.status === 'ready' && client.nodes('master').length === 2 && client.slots[0] !== undefined && client.slots[16383] !== undefined
        ? true
        : undefined,
    );
  }, 30_000);
  afterAll(async () => {
    client?.disconnect();
    await Promise.all(masters.map((m) => m.stop()));
  });

  it("a key's owner is the master serving its slot, as the slot map names it", () => {
    for (const master of masters) expect(ownerOf(client, keyOn(master.port))).toBe(name(master.port));
  });

  it("WAIT goes to the key's master while the map names the master that ran the script; else 0 without asking", async () => {
    // The master the client learnt first (the one a lookup that ignores the key would pick) is not the key's.
    const first = client.nodes('master')[0]?.options.port;
    const master = masters.find((m) => m.port !== first) as RedisServer;
    const other = masters.find((m) => m !== master) as RedisServer;
    const key = keyOn(master.port);
    const calls = async () => ({ master: await waitCalls(master.port), other: await waitCalls(other.port) });
    const before = await calls();
    await expect(confirmOnReplicas(client, key, name(master.port), 0, 100)).resolves.toBe(0);
    expect(await calls()).toEqual({ master: before.master + 1, other: before.other });
    // The slot map names another master than before the script (a failover or a slot move between).
    await expect(confirmOnReplicas(client, key, name(other.port), 0, 100)).resolves.toBe(0);
    await expect(confirmOnReplicas(client, key, null, 0, 100)).resolves.toBe(0);
    expect(await calls()).toEqual({ master: before.master + 1, other: before.other });
  });

  it('the data nodes are the masters, each once, sorted by host:port', () => {
    const names = dataNodes(client).map((node) => `${node.options.host}:${node.options.port}`);
    expect(names).toEqual(masters.map((m) => name(m.port)).sort());
  });

  it("dropping one node's connection keeps the client; without a node, the whole client reconnects", async () => {
    const [node, other] = dataNodes(client);
    if (node === undefined || other === undefined) throw new Error('expected two nodes');
    dropConnection(client, node);
    // The client and the other master's connection are untouched (no keyed command here: a Cluster
    // this young may still answer CLUSTERDOWN for keys).
    expect(client.status).toBe('ready');
    expect(await other.ping()).toBe('PONG');
    dropConnection(client);
    expect(client.status).not.toBe('ready');
    await eventually(async () => expect(client.status).toBe('ready'), 10_000);
  });
});
