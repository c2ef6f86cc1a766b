import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { OverloadedError, StoreUnavailableError } from '../../src/domain/errors.js';
import { newOwnerToken } from '../../src/domain/lock-service.js';
import { connectionPatienceMs } from '../../src/store/redis/client.js';
import { KeySpace } from '../../src/store/redis/keys.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { MisalignedReplyError } from '../../src/store/redis/replies.js';
import { defineScripts } from '../../src/store/redis/scripts.js';
import { HEARTBEAT_INTERVAL_MS } from '../../src/store/shared/wait-room.js';
import { FaultProxy } from '../helpers/fault-proxy.js';
import { RedisServer } from '../helpers/redis-server.js';
import { lockFields } from '../helpers/lock-record.js';
import { eventually, openRedisStore } from '../helpers/redis-store.js';
import { withWords, type Worded } from '../helpers/store-words.js';

/**
 * How the Redis store uses its connection, seen from Redis and from a proxy in front of it: the
 * listing's SCAN rounds, the echo PING and the probe after a timeout, replacing a connection whose
 * replies are out of step, refusing calls while disconnected, hand-overs found by message or by a
 * visit, and replica acknowledgement on a Redis that has no replica (WAIT answers 0).
 */
let server: RedisServer;
let proxy: FaultProxy;
/** Straight to Redis. */
let store: Worded<RedisStore>;
/** Through the proxy, with a short command timeout: a lost reply fails its call within 150 ms. */
let faulty: Worded<RedisStore>;
let raw: Redis;
const PREFIX = 'calls:';
const keySpace = new KeySpace(PREFIX);
let n = 0;
const uniqueKey = (label: string) => `${label}${++n}`;

/** The calls of each command Redis has run since it started (INFO commandstats). */
async function commandCalls(): Promise<Map<string, number>> {
  const calls = new Map<string, number>();
  for (const m of (await raw.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls.set(m[1] as string, Number(m[2]));
  return calls;
}

/** The count of calls of `command` Redis has run since it started. */
async function callsOf(command: string): Promise<number> {
  return (await commandCalls()).get(command) ?? 0;
}

const openVia = async (commandTimeoutMs: number): Promise<Worded<RedisStore>> => {
  const opened = withWords(new RedisStore({ url: proxy.url, keyPrefix: PREFIX, commandTimeoutMs, fenceGraceMs: 60_000 }));
  await eventually(() => opened.ping(), 10_000);
  return opened;
};

/** The value or the error, so a failure can be looked at without try/catch. */
const settle = (p: Promise<unknown>): Promise<unknown> =>
  p.then(
    (value) => value,
    (err: unknown) => err,
  );

beforeAll(async () => {
  server = await RedisServer.startShared();
  proxy = await FaultProxy.start(server.port);
  raw = server.client();
  store = withWords(await openRedisStore(server, { keyPrefix: PREFIX }));
  faulty = await openVia(150);
});
afterEach(async () => {
  proxy.heal();
  await eventually(() => faulty.ping(), 10_000);
});
afterAll(async () => {
  raw?.disconnect();
  await faulty?.close();
  await store?.close();
  await proxy?.close();
  await server?.stop();
});

/** How many times Redis has read from its clients' sockets since it started (INFO stats). */
async function socketReads(): Promise<number> {
  const info = await raw.info('stats');
  return Number(/^total_reads_processed:(\d+)/m.exec(info)?.[1] ?? Number.NaN);
}

describe('redis store: calls on the connection', () => {
  it('the script calls of one turn of the event loop reach Redis in one write, not one each', async () => {
    const keys = Array.from({ length: 100 }, () => uniqueKey('batch'));
    const before = await socketReads();
    // 100 calls started in one turn; each is about 200 bytes, so Redis needs 2 reads of its 16 KiB
    // buffer for all of them, plus 1 for this INFO.
    await Promise.all(keys.map((key) => store.inspect(key)));
    const reads = (await socketReads()) - before;
    expect(reads).toBeLessThanOrEqual(5);
  });

  it('a call asked at once (a release that may hand over) leaves at once, after what its turn wrote before it; the calls after it wait for the turn to end', async () => {
    const redis = server.client();
    try {
      await redis.ping();
      const scripts = defineScripts(redis);
      const socket = redis.stream;
      const key = uniqueKey('flush');
      const ownerToken = newOwnerToken();
      const lockKeys = keySpace.lockKeys(key);
      const handOver = { graceMs: 60_000, channelPrefix: keySpace.grantChannelPrefix(), lockName: key };
      const acquireArgs = { ...handOver, keys: lockKeys, ownerToken, ttlMs: 10_000, holder: '', idempotencyKey: '' };
      const waitArgs = { waitMs: 0, waiterId: '-', instanceId: 'i', maxWaiters: 10, livenessMs: 3_000, maxQuotaSlots: 0 };
      const acquired = scripts.run('acquire', { ...acquireArgs, ...waitArgs });
      // Held in the corked socket until the turn ends.
      expect(socket.writableLength).toBeGreaterThan(0);
      const released = scripts.run('release', { ...handOver, keys: lockKeys, ownerToken }, true);
      // Sent now, the acquire before it.
      expect(socket.writableLength).toBe(0);
      const inspected = scripts.run('inspect', { keys: lockKeys });
      expect(socket.writableLength).toBeGreaterThan(0);
      // In order: granted, released, then free.
      expect(await acquired).toEqual([1, expect.any(Number), expect.any(Number)]);
      expect(await released).toBe(1);
      expect(await inspected).toEqual([0, expect.any(Number), 0]);
    } finally {
      redis.disconnect();
    }
  });

  it('the store releases at once only a key an acquire here found held lately; another release waits for the turn with the other calls', async () => {
    const socket = (store as unknown as { redis: Redis }).redis.stream;
    const calm = uniqueKey('calm');
    const calmOwner = newOwnerToken();
    expect((await store.acquire({ id: calm, ownerToken: calmOwner, ttlMs: 30_000, holder: null })).acquired).toBe(true);
    const calmReleased = store.release(calm, calmOwner);
    // Held in the corked socket until the turn ends, with the turn's other calls.
    expect(socket.writableLength).toBeGreaterThan(0);
    expect(await calmReleased).toBe(true);

    const contended = uniqueKey('contended');
    const holder = newOwnerToken();
    expect((await store.acquire({ id: contended, ownerToken: holder, ttlMs: 30_000, holder: null })).acquired).toBe(true);
    // Another caller finds it held: its release may hand it over from now on.
    expect((await store.acquire({ id: contended, ownerToken: newOwnerToken(), ttlMs: 30_000, holder: null })).acquired).toBe(false);
    const released = store.release(contended, holder);
    // Sent now.
    expect(socket.writableLength).toBe(0);
    expect(await released).toBe(true);
  });

  it('an acquire past the cap of its quota shard is refused as quota-full (not as busy); the release of the first lease lets it in', async () => {
    // A cap of 16 leases counts one per shard (QUOTA_SHARDS): two locks of one shard cannot both be held.
    const space = new KeySpace('');
    const [first, second] = Array.from({ length: 400 }, (_v, i) => `cap-${i}`).filter(
      (name) => space.shardOf(name) === space.shardOf('cap-0'),
    );
    const ns = uniqueKey('capped');
    const holder = newOwnerToken();
    const acquire = (name: string | undefined, ownerToken: string) =>
      store.acquire({ id: `${ns}/${name as string}`, ownerToken, ttlMs: 30_000, holder: null, maxHeldInNamespace: 16 });
    expect((await acquire(first, holder)).acquired).toBe(true);
    const refused = await acquire(second, newOwnerToken());
    expect(refused).toMatchObject({ acquired: false, quotaFull: true });
    expect(await store.inspect(`${ns}/${second as string}`)).toBeNull();
    expect(await store.release(`${ns}/${first as string}`, holder)).toBe(true);
    const granted = await acquire(second, newOwnerToken());
    expect(granted.acquired).toBe(true);
    expect(granted).not.toHaveProperty('quotaFull');
  });

  it('a plain acquire and release with the quota on run the commands below inside their scripts, and no queue command', async () => {
    // Every key in one quota shard (the namespace's shard of "held"), which holds another lease
    // throughout, as under load.
    const space = new KeySpace('');
    const shard = space.shardOf('held');
    const ns = uniqueKey('quota');
    const names = Array.from({ length: 400 }, (_v, i) => `plain-${i}`).filter((name) => space.shardOf(name) === shard);
    expect(
      (await store.acquire({ id: `${ns}/held`, ownerToken: newOwnerToken(), ttlMs: 30_000, holder: null, maxHeldInNamespace: 16_000 }))
        .acquired,
    ).toBe(true);
    let next = 0;
    const run = async () => {
      const key = `${ns}/${names[next++] as string}`;
      const ownerToken = newOwnerToken();
      expect((await store.acquire({ id: key, ownerToken, ttlMs: 30_000, holder: null, maxHeldInNamespace: 16_000 })).acquired).toBe(true);
      expect(await store.release(key, ownerToken)).toBe(true);
    };
    await run();
    const before = await commandCalls();
    const startedSec = Math.floor(Date.now() / 1000);
    const pairs = 20;
    for (let i = 0; i < pairs; i++) await run();
    const after = await commandCalls();
    const secondsSeen = Math.floor(Date.now() / 1000) - startedSec + 1;
    const perPair: Record<string, number> = {};
    const total: Record<string, number> = {};
    for (const [command, calls] of after) {
      const delta = calls - (before.get(command) ?? 0);
      if (delta > 0 && command !== 'info') {
        perPair[command] = delta / pairs;
        total[command] = delta;
      }
    }
    // The clock and the lock record read once per call (get); the grant writes the record with its
    // expiry (set ... px), and so does the release (the last token, kept for the grace). The quota shard
    // (_quota.lua): the acquire reads it once (hmget) and writes it once (hset: its total and the count
    // of the unit's ending second); the release takes one off each of the two (hincrby, twice). Once per
    // second of lease ends a shard first counts in, that second is indexed (zadd) and the shard's two
    // keys kept longer (pexpire): at most once per second this loop ran, whatever the number of pairs.
    const { zadd = 0, pexpire = 0, ...rest } = perPair;
    expect(rest).toEqual({ fcall: 2, time: 2, get: 2, set: 2, hmget: 1, hset: 1, hincrby: 2 });
    expect(zadd * pairs).toBeLessThanOrEqual(secondsSeen);
    expect(pexpire * pairs).toBeLessThanOrEqual(2 * secondsSeen);
  });

  it('ping fails when Redis does not answer, though the connection stays open', async () => {
    proxy.set({ kind: 'dropReplies' });
    await expect(faulty.ping()).rejects.toBeInstanceOf(StoreUnavailableError);
  });

  it('a burst of timed-out calls sends one probe PING, not one per call', async () => {
    const pingsBefore = await callsOf('ping');
    const connections = proxy.stats.connections;
    proxy.set({ kind: 'dropReplies' });
    const calls = [1, 2, 3, 4].map(() => settle(faulty.inspect(uniqueKey('burst'))));
    for (const failed of await Promise.all(calls)) expect(failed).toBeInstanceOf(StoreUnavailableError);
    // The probe's PING is lost too: once it has gone unanswered for connectionPatienceMs (3 s) the
    // probe replaces the connection, which the proxy sees as a new one. Every probe of the burst has
    // sent its PING by then. Measured: 3.2 and 6.4 s alone, over 9 s once in the whole suite on 2 busy
    // cores; five patience periods (15 s) leave room under the test's 30 s.
    await eventually(async () => expect(proxy.stats.connections).toBeGreaterThan(connections), 5 * connectionPatienceMs(150), 5);
    expect((await callsOf('ping')) - pingsBefore).toBe(1);
  });

  it('a Redis slower than the command timeout keeps its connection: the calls fail, the probe waits for its answer', async () => {
    // Replies held four command timeouts: every call times out (503), the probe's PING is answered late
    // but in step. A slow Redis is not a broken connection; replacing it would only add a reconnect.
    const connections = proxy.stats.connections;
    const pingsBefore = await callsOf('ping');
    proxy.set({ kind: 'delayReplies', delayMs: 4 * 150 });
    const calls = [1, 2, 3].map(() => settle(faulty.inspect(uniqueKey('slow'))));
    for (const failed of await Promise.all(calls)) expect(failed).toBeInstanceOf(StoreUnavailableError);
    // The probe's PING reached Redis, and its answer is on its way back.
    await eventually(async () => expect((await callsOf('ping')) - pingsBefore).toBe(1), 10_000, 5);
    proxy.heal();
    // Served again on the same connection: the delayed replies, the probe's among them, all came in step.
    await eventually(() => faulty.inspect(uniqueKey('after')), 10_000, 5);
    expect(proxy.stats.connections).toBe(connections);
  });

  it('a call that fails for another reason than a timeout sends no probe', async () => {
    const key = uniqueKey('wrongtype');
    // Not a hash: the script fails with WRONGTYPE, an answer on a connection that is in step.
    await raw.set(keySpace.lock(key), 'not a lock');
    const pingsBefore = await callsOf('ping');
    await expect(store.inspect(key)).rejects.toBeInstanceOf(StoreUnavailableError);
    // On the same connection, so behind any probe the failure started.
    await store.ping();
    expect((await callsOf('ping')) - pingsBefore).toBe(1);
    await raw.del(keySpace.lock(key));
  });

  it('a reply out of step replaces the connection at once, not a command timeout later', async () => {
    const patient = await openVia(300);
    try {
      const dropped = proxy.stats.bytesDropped;
      proxy.set({ kind: 'dropReplies' });
      const lost = settle(patient.ping());
      await eventually(async () => expect(proxy.stats.bytesDropped).toBeGreaterThan(dropped), 5_000, 5);
      proxy.heal();
      // Auto-pipelining sends these two together once the lost call has timed out. The lost call, still
      // first in ioredis's queue, takes the first reply: the first of the two reads the second's.
      const first = settle(patient.ping());
      const second = settle(patient.ping());
      expect(await lost).toBeInstanceOf(StoreUnavailableError);
      const failed = await first;
      expect(failed).toBeInstanceOf(StoreUnavailableError);
      // The cause says why (a reply out of step, not an outage), for whoever reads the log.
      expect((failed as Error).cause).toBeInstanceOf(MisalignedReplyError);
      // Serving again before another command timeout could have ended the fault (a probe's PING).
      await eventually(() => patient.ping(), 250, 5);
      await second;
    } finally {
      await patient.close();
    }
  });

  it('while disconnected, calls are refused before anything is sent; watchChanges does not wait on the subscriber', async () => {
    // Every connection is reset, and the new ones get no answer to their ready check: never ready.
    proxy.set({ kind: 'blackhole' });
    proxy.resetAll();
    await eventually(async () => expect(await settle(faulty.ping())).toBeInstanceOf(StoreUnavailableError), 5_000, 5);
    await expect(faulty.watchChanges(uniqueKey('watched'), () => undefined)).rejects.toThrow(/not connected/);
    await expect(faulty.inspect(uniqueKey('inspected'))).rejects.toThrow(/not connected/);
    // The lock pair's two calls too (they make the check themselves, not through the store's call).
    await expect(faulty.acquire({ id: uniqueKey('acquired'), ownerToken: newOwnerToken(), ttlMs: 30_000, holder: null })).rejects.toThrow(
      /not connected/,
    );
    await expect(faulty.release(uniqueKey('released'), newOwnerToken())).rejects.toThrow(/not connected/);
  });

  it('a store closed while its connection is down does not reconnect', async () => {
    // A proxy of its own: every connection it sees is this store's.
    const own = await FaultProxy.start(server.port);
    const closing = withWords(new RedisStore({ url: own.url, keyPrefix: PREFIX, commandTimeoutMs: 1_000, fenceGraceMs: 60_000 }));
    try {
      await eventually(() => closing.ping(), 10_000);
      own.resetAll();
      // Reconnecting now; the first attempt is due 50 ms after the reset.
      await eventually(async () => expect(await settle(closing.ping())).toBeInstanceOf(StoreUnavailableError), 5_000, 5);
      await closing.close();
      const connections = own.stats.connections;
      // Time for a reconnect to show: the first two attempts are due 50 and 100 ms after the reset.
      await sleep(200);
      expect(own.stats.connections).toBe(connections);
    } finally {
      await closing.close();
      await own.close();
    }
  });
});

describe('redis store: hand-overs', () => {
  it('a hand-over whose lease ran out before its message arrived is a 503, not a grant', async () => {
    const waiterStore = await openVia(1_000);
    try {
      const key = uniqueKey('late');
      const holder = newOwnerToken();
      expect((await store.acquire({ id: key, ownerToken: holder, ttlMs: 10_000, holder: null })).acquired).toBe(true);
      const waiting = settle(waiterStore.acquire({ id: key, ownerToken: newOwnerToken(), ttlMs: 20, holder: null, waitMs: 5_000 }));
      await eventually(async () => expect(await raw.zcard(keySpace.lockKeys(key).queue)).toBe(1), 5_000, 5);
      // The hand-over message and the confirming renewal each take 60 ms more: the 20 ms lease is over
      // before the renewal reaches Redis.
      proxy.set({ kind: 'delay', delayMs: 60 });
      expect(await store.release(key, holder)).toBe(true);
      const outcome = await waiting;
      // Redis answered: the lease ran out while this instance delivered it, which is this instance's
      // lag, so the caller is told overloaded (never a grant, never a store failure).
      expect(outcome).toBeInstanceOf(OverloadedError);
      expect((outcome as Error).message).toMatch(/took longer than the lease to deliver it/);
    } finally {
      proxy.heal();
      await waiterStore.close();
    }
  });

  it('a released lock reaches its waiter by the hand-over message, before any heartbeat', async () => {
    const channels = async () => (await raw.pubsub('CHANNELS', `${keySpace.grantChannelPrefix()}*`)) as string[];
    const known = new Set(await channels());
    const createdAt = performance.now();
    const waiterStore = withWords(new RedisStore({ url: server.url, keyPrefix: PREFIX, commandTimeoutMs: 1_000, fenceGraceMs: 60_000 }));
    try {
      // Its first heartbeat visit is HEARTBEAT_INTERVAL_MS after this; its hand-over channel must be subscribed first.
      await eventually(async () => expect((await channels()).filter((c) => !known.has(c))).toHaveLength(1), 5_000, 5);
      await eventually(() => waiterStore.ping(), 5_000, 5);
      const key = uniqueKey('message');
      const holder = newOwnerToken();
      expect((await store.acquire({ id: key, ownerToken: holder, ttlMs: 10_000, holder: null })).acquired).toBe(true);
      const waiting = waiterStore.acquire({ id: key, ownerToken: newOwnerToken(), ttlMs: 5_000, holder: null, waitMs: 5_000 });
      await eventually(async () => expect(await raw.zcard(keySpace.lockKeys(key).queue)).toBe(1), 5_000, 5);
      expect(await store.release(key, holder)).toBe(true);
      expect((await waiting).acquired).toBe(true);
      expect(performance.now() - createdAt).toBeLessThan(HEARTBEAT_INTERVAL_MS);
    } finally {
      await waiterStore.close();
    }
  });

  it('a release hands the lock to a waiter of its own instance in its reply: no message, no second call', async () => {
    const other = withWords(new RedisStore({ url: server.url, keyPrefix: PREFIX, commandTimeoutMs: 1_000, fenceGraceMs: 60_000 }));
    try {
      await eventually(() => other.ping(), 5_000, 5);
      const key = uniqueKey('own');
      const keys = keySpace.lockKeys(key);
      const holder = newOwnerToken();
      expect((await store.acquire({ id: key, ownerToken: holder, ttlMs: 10_000, holder: null })).acquired).toBe(true);
      // Queued in this order: one caller of the releasing instance, then one of another instance.
      const mine = store.acquire({ id: key, ownerToken: newOwnerToken(), ttlMs: 5_000, holder: null, waitMs: 5_000 });
      await eventually(async () => expect(await raw.zcard(keys.queue)).toBe(1), 5_000, 5);
      const theirs = other.acquire({ id: key, ownerToken: newOwnerToken(), ttlMs: 5_000, holder: null, waitMs: 5_000 });
      await eventually(async () => expect(await raw.zcard(keys.queue)).toBe(2), 5_000, 5);

      const renewals = vi.spyOn(store.engine as unknown as { renewLockLease: () => Promise<unknown> }, 'renewLockLease');
      const published = await callsOf('publish');
      expect(await store.release(key, holder)).toBe(true);
      const granted = await mine;
      // The waiter learnt of its lease from the release's reply: Redis published nothing, and the lease
      // the reply names is the caller's answer, with no renewal to confirm it.
      expect((await callsOf('publish')) - published).toBe(0);
      expect(renewals).not.toHaveBeenCalled();
      renewals.mockRestore();
      const { o: owner, t: token, e: end } = await lockFields(raw, keySpace.lock(key));
      expect(granted).toMatchObject({ acquired: true, fencingToken: Number(token), expiresAtMs: Number(end) });
      if (!granted.acquired) return;

      // The next waiter belongs to another instance: it is told by message, as before.
      const ownerNow = owner as string;
      const beforeTheirs = await callsOf('publish');
      expect(await store.release(key, ownerNow)).toBe(true);
      expect((await theirs).acquired).toBe(true);
      expect((await callsOf('publish')) - beforeTheirs).toBe(1);
    } finally {
      await other.close();
    }
  });

  it('a visit that finds its waiter holding the lock grants it, though the message went elsewhere', async () => {
    const key = uniqueKey('visit');
    const keys = keySpace.lockKeys(key);
    expect((await store.acquire({ id: key, ownerToken: newOwnerToken(), ttlMs: 150, holder: null })).acquired).toBe(true);
    const startedAt = performance.now();
    const waiting = store.acquire({ id: key, ownerToken: newOwnerToken(), ttlMs: 5_000, holder: null, waitMs: 3_000 });
    await eventually(async () => expect(await raw.zcard(keys.queue)).toBe(1), 5_000, 5);
    // The waiter's record names another instance: the hand-over message goes to a channel nobody reads.
    const [id, record] = Object.entries(await raw.hgetall(keys.waiters))[0] as [string, string];
    const fields = record.split('|');
    fields[4] = 'elsewhere';
    await raw.hset(keys.waiters, id, fields.join('|'));
    // The visit due when the lease ends hands the lock over and reports the grant; the wait is far from over.
    expect((await waiting).acquired).toBe(true);
    expect(performance.now() - startedAt).toBeLessThan(1_500);
  });
});

describe('redis store: listing pages', () => {
  it('a page over a sparse keyspace stops after 10 SCAN rounds, with a plain SCAN cursor to go on from', async () => {
    const fillers = Array.from({ length: 2_000 }, (_, i) => `filler:${i}`);
    await raw.mset(...fillers.flatMap((k) => [k, '1']));
    try {
      const scansBefore = await callsOf('scan');
      const page = await store.list({ prefix: 'nomatch', limit: 1 });
      expect(page.leases).toEqual([]);
      // LIST_MAX_SCAN_ROUNDS: the page comes back empty with a cursor rather than walk the whole keyspace.
      expect((await callsOf('scan')) - scansBefore).toBe(10);
      // On one Redis the cursor is SCAN's own (no `<node>-` in front).
      expect(page.nextCursor).toMatch(/^[1-9][0-9]*$/);
    } finally {
      await raw.unlink(...fillers);
    }
  });

  it('a page stops at the first SCAN round that brings `limit` ids', async () => {
    await raw.flushdb();
    const ids = Array.from({ length: 200 }, (_, i) => `paged${i}`);
    await Promise.all(ids.map((key) => store.acquire({ id: key, ownerToken: newOwnerToken(), ttlMs: 30_000, holder: null })));
    // Lookups move a hash table that is being resized along: SCAN below sees one settled table.
    await raw.exists(...Array.from({ length: 1_000 }, (_, i) => `absent:${i}`));
    const pattern = keySpace.lockPattern('paged');
    // A limit whose first round (SCAN 0 MATCH ... COUNT limit) brings exactly `limit` ids.
    let limit = 0;
    let cursor = '0';
    for (let l = 1; l <= 40 && limit === 0; l++) {
      const [next, found] = await raw.scan('0', 'MATCH', pattern, 'COUNT', l);
      if (found.length === l && next !== '0') [limit, cursor] = [l, next];
    }
    expect(limit).toBeGreaterThan(0);
    const scansBefore = await callsOf('scan');
    const page = await store.list({ prefix: 'paged', limit });
    expect((await callsOf('scan')) - scansBefore).toBe(1);
    expect(page.leases).toHaveLength(limit);
    expect(page.nextCursor).toBe(cursor);
  });
});

describe('redis store: replica acknowledgement on a Redis without replicas', () => {
  // WAIT 1 on a lone Redis answers 0 after the timeout: nothing is confirmed.
  let strict: Worded<RedisStore>;
  beforeAll(async () => {
    strict = withWords(
      new RedisStore({
        url: server.url,
        keyPrefix: PREFIX,
        replicaAcks: { minReplicas: 1, timeoutMs: 20 },
        commandTimeoutMs: 1_000,
        fenceGraceMs: 60_000,
      }),
    );
    await eventually(() => strict.ping(), 10_000);
  });
  afterAll(async () => {
    await strict?.close();
  });

  it('an unconfirmed grant is rolled back and answered 503', async () => {
    const key = uniqueKey('acked');
    await expect(strict.acquire({ id: key, ownerToken: newOwnerToken(), ttlMs: 5_000, holder: null })).rejects.toThrow(
      /reached 0 of 1 replicas within 20 ms and was rolled back/,
    );
    expect(await store.inspect(key)).toBeNull();
  });

  it('an unconfirmed renewal is answered 503 and leaves the lease its holder relies on', async () => {
    const key = uniqueKey('renewed');
    const ownerToken = newOwnerToken();
    const grant = await store.acquire({ id: key, ownerToken, ttlMs: 5_000, holder: null });
    expect(grant.acquired).toBe(true);
    await expect(strict.renew(key, ownerToken, 5_000)).rejects.toBeInstanceOf(StoreUnavailableError);
    expect((await store.inspect(key))?.fencingToken).toBe(grant.acquired ? grant.fencingToken : -1);
  });

  it('an unconfirmed lock set is given back whole and answered 503', async () => {
    const keys = [uniqueKey('set/a'), uniqueKey('set/b')];
    const ownerToken = newOwnerToken();
    await expect(strict.lockSets.acquireSet({ ids: keys, ownerToken, ttlMs: 5_000, holder: null })).rejects.toBeInstanceOf(
      StoreUnavailableError,
    );
    for (const key of keys) expect(await store.inspect(key)).toBeNull();
  });

  it('a set renewal is confirmed only when it renewed something; unconfirmed, the set stays held', async () => {
    const keys = [uniqueKey('set/c'), uniqueKey('set/d')];
    const ownerToken = newOwnerToken();
    const set = await store.lockSets.acquireSet({ ids: keys, ownerToken, ttlMs: 5_000, holder: null });
    expect(set.acquired).toBe(true);
    // Nothing renewed: nothing to confirm, the plain answer.
    await expect(strict.lockSets.renewSet(keys, newOwnerToken(), 5_000)).resolves.toEqual({ renewed: false });
    await expect(strict.lockSets.renewSet(keys, ownerToken, 5_000)).rejects.toBeInstanceOf(StoreUnavailableError);
    for (const key of keys) expect((await store.inspect(key))?.fencingToken).toBeGreaterThan(0);
    expect(await store.lockSets.releaseSet(keys, ownerToken)).toBe(true);
  });
});
