import type { Redis } from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { InvalidRequestError, StoreUnavailableError } from '../../src/domain/errors.js';
import { newOwnerToken } from '../../src/domain/lock-service.js';
import { KeySpace } from '../../src/store/redis/keys.js';
import { onSubscriberConnection } from '../../src/store/redis/nodes.js';
import { RedisStore, type RedisStoreOptions } from '../../src/store/redis/redis-store.js';
import { FaultProxy } from '../helpers/fault-proxy.js';
import { RedisServer } from '../helpers/redis-server.js';
import { eventually } from '../helpers/redis-store.js';
import { lockField, setLockFields } from '../helpers/lock-record.js';
import { withWords, type Worded } from '../helpers/store-words.js';

/**
 * The Redis store's own wiring, each test on a store it builds itself: what the constructor hands to
 * the wait room, the permits, the watch marks and the two connections (a store built in a beforeAll
 * hook is built outside any test, so the mutation run would not count these tests as reaching the
 * constructor), and the paths the contract does not pin: the watch channel's bookkeeping, listing
 * cursors at their bounds, replica acknowledgement that no replica gives, a reply lost for good.
 */
let server: RedisServer;
let raw: Redis;
const PREFIX = 'wiring:';
const keys = new KeySpace(PREFIX);
let n = 0;
const uniqueKey = (name: string) => `wiring/${name}-${++n}`;

beforeAll(async () => {
  server = await RedisServer.start();
  raw = server.client();
});
afterAll(async () => {
  raw.disconnect();
  await server.stop();
});

const opened: Worded<RedisStore>[] = [];
afterEach(async () => {
  for (const store of opened.splice(0)) await store.close();
});

/** A RedisStore built in the test itself, resolved once it answers; closed after the test. */
async function open(options: Partial<RedisStoreOptions> = {}): Promise<Worded<RedisStore>> {
  const store = withWords(
    new RedisStore({ url: server.url, keyPrefix: PREFIX, commandTimeoutMs: 1_000, fenceGraceMs: 60_000, ...options }),
  );
  opened.push(store);
  await eventually(() => store.ping(), 10_000);
  return store;
}

/** Closes a store of this test now (before the server or proxy under it goes). */
async function closeNow(store: Worded<RedisStore>): Promise<void> {
  opened.splice(opened.indexOf(store), 1);
  await store.close();
}

/** `promise`'s outcome, or 'hung' if it has not settled within `ms`: a lost answer fails the test instead of hanging it. */
async function within<T>(promise: Promise<T>, ms: number): Promise<T | 'hung'> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<'hung'>((resolve) => (timer = setTimeout(() => resolve('hung'), ms)));
  try {
    return await Promise.race([promise, hung]);
  } finally {
    clearTimeout(timer);
  }
}

/** How many connections are subscribed to `channel` (the store's subscriber, or none). */
async function subscribers(channel: string): Promise<number> {
  const reply = (await raw.pubsub('NUMSUB', channel)) as [string, number];
  return Number(reply[1]);
}

const take = (
  store: Worded<RedisStore>,
  key: string,
  ttlMs: number,
  more: { waitMs?: number; lockDelayMs?: number; signal?: AbortSignal } = {},
) => store.acquire({ id: key, ownerToken: newOwnerToken(), ttlMs, holder: null, ...more });

describe('redis store: what the constructor wires up', () => {
  it('keeps the namespace cap in its scripts; without a url or connection it is refused', async () => {
    const store = await open();
    expect(store.quotaInside).toBe(true);
    expect(() => withWords(new RedisStore({ keyPrefix: PREFIX, commandTimeoutMs: 1_000, fenceGraceMs: 60_000 }))).toThrow(
      /needs a url or a connection/,
    );
  });

  it('listens for hand-overs on its own grant channel; a waiter is handed the lock when it is released', async () => {
    const prefix = `wiring-${++n}:`;
    const store = await open({ keyPrefix: prefix });
    await vi.waitFor(async () => expect(await raw.pubsub('CHANNELS', `${prefix}grants:*`)).toHaveLength(1));
    const key = uniqueKey('hand-over');
    const holder = newOwnerToken();
    await store.acquire({ id: key, ownerToken: holder, ttlMs: 10_000, holder: null });
    const waiting = take(store, key, 10_000, { waitMs: 3_000 });
    await vi.waitFor(async () => expect((await store.inspect(key))?.waiters).toBe(1));
    expect(await store.release(key, holder)).toBe(true);
    expect(await within(waiting, 2_000)).toMatchObject({ acquired: true });
  });

  it('a wait that runs out answers "not acquired", also when it asked for a lock-delay', async () => {
    const store = await open();
    const key = uniqueKey('wait-runs-out');
    await take(store, key, 10_000);
    expect(await within(take(store, key, 1_000, { waitMs: 50, lockDelayMs: 1_000 }), 2_000)).toMatchObject({ acquired: false });
  });

  it('a lease that runs out is handed to the waiter by the visit due at its end (no script runs then)', async () => {
    const store = await open();
    const key = uniqueKey('lease-ends');
    await take(store, key, 100);
    expect(await within(take(store, key, 1_000, { waitMs: 2_000 }), 3_000)).toMatchObject({ acquired: true });
  });

  it('a waiter that leaves as the lock is handed to it gives the lease back at once', async () => {
    const store = await open();
    const key = uniqueKey('leaves');
    const holder = newOwnerToken();
    await store.acquire({ id: key, ownerToken: holder, ttlMs: 10_000, holder: null });
    const caller = new AbortController();
    const leaving = take(store, key, 30_000, { waitMs: 5_000, signal: caller.signal }).catch((err: unknown) => err);
    await vi.waitFor(async () => expect((await store.inspect(key))?.waiters).toBe(1));
    // The release hands the lock to the waiter; its caller leaves in the same tick, before the message.
    const released = store.release(key, holder);
    caller.abort(new Error('the caller left'));
    expect(await released).toBe(true);
    expect(await leaving).toMatchObject({ message: 'the caller left' });
    await vi.waitFor(async () => expect(await store.inspect(key)).toBeNull());
  });

  it('logs connecting, and losing the connection, with the store named', async () => {
    const own = await RedisServer.start();
    const uncaught: unknown[] = [];
    const onUncaught = (err: unknown) => uncaught.push(err);
    process.on('uncaughtException', onUncaught);
    try {
      const log = { info: vi.fn(), warn: vi.fn() };
      const logged = withWords(new RedisStore({ url: own.url, keyPrefix: PREFIX, commandTimeoutMs: 1_000, fenceGraceMs: 60_000, log }));
      // Without a log, losing Redis is just as quiet (nothing thrown out of the client's event handler).
      const quiet = withWords(new RedisStore({ url: own.url, keyPrefix: PREFIX, commandTimeoutMs: 1_000, fenceGraceMs: 60_000 }));
      opened.push(logged, quiet);
      await eventually(() => Promise.all([logged.ping(), quiet.ping()]), 10_000);
      expect(log.info).toHaveBeenCalledWith({ store: 'redis' }, expect.any(String));
      expect(log.warn).not.toHaveBeenCalled();
      await own.kill();
      await vi.waitFor(() => expect(log.warn).toHaveBeenCalledWith({ store: 'redis', err: expect.any(String) }, expect.any(String)), {
        timeout: 3_000,
      });
      // Both clients retry on the same schedule: the quiet one has met the outage too by now.
      await sleep(100);
      expect(uncaught).toEqual([]);
    } finally {
      process.off('uncaughtException', onUncaught);
      await own.stop();
    }
  });

  it('a call whose reply was lost for good: the store finds its connection out of step by itself and replaces it', async () => {
    const proxy = await FaultProxy.start(server.port);
    try {
      const store = await open({ url: proxy.url, commandTimeoutMs: 200 });
      proxy.set({ kind: 'dropReplies' });
      await expect(store.ping()).rejects.toBeInstanceOf(StoreUnavailableError);
      proxy.heal();
      // One call at a time: on a connection left out of step, each would read the reply of the one
      // before it and time out, for ever. The store's own probe after the time-out finds that out.
      await eventually(() => store.ping(), 3_000, 50);
      await closeNow(store);
    } finally {
      await proxy.close();
    }
  });
});

describe('redis store: watch channels', () => {
  it('watching a lock marks it in Redis, so the scripts announce its changes to this instance', async () => {
    const store = await open();
    const key = uniqueKey('marked');
    const changes = vi.fn();
    const stop = await store.watchChanges(key, changes);
    expect(Number(await lockField(raw, keys.lock(key), 'w'))).toBeGreaterThan(Date.now());
    await take(store, key, 5_000);
    await vi.waitFor(() => expect(changes).toHaveBeenCalled());
    stop();
  });

  it('a permit watch subscribes too: a grant reaches its listener', async () => {
    const store = await open();
    const key = uniqueKey('permit');
    const changes = vi.fn();
    const stop = await store.permits.watchPermitChanges('semaphore', key, changes);
    expect(stop).toBeTypeOf('function');
    await store.permits.acquirePermit({
      kind: 'semaphore',
      id: key,
      ownerToken: newOwnerToken(),
      ttlMs: 5_000,
      holder: null,
      weight: 1,
      capacity: 2,
    });
    await vi.waitFor(() => expect(changes).toHaveBeenCalled());
    stop();
  });

  it('two listeners of one key share its subscription: stopping one keeps the other, stopping the last unsubscribes', async () => {
    const store = await open();
    const key = uniqueKey('two');
    const channel = keys.changeChannel(key);
    const first = vi.fn();
    const second = vi.fn();
    const stopFirst = await store.watchChanges(key, first);
    const stopSecond = await store.watchChanges(key, second);
    expect(await subscribers(channel)).toBe(1);
    // A change notice, as the scripts publish it.
    await raw.publish(channel, '');
    await vi.waitFor(() => expect([first.mock.calls.length, second.mock.calls.length]).toEqual([1, 1]));
    stopFirst();
    await raw.publish(channel, '');
    await vi.waitFor(() => expect(second).toHaveBeenCalledTimes(2));
    expect(first).toHaveBeenCalledTimes(1);
    stopSecond();
    await vi.waitFor(async () => expect(await subscribers(channel)).toBe(0));
  });

  it('a stop called a second time does not end a later watch of the same key', async () => {
    const store = await open();
    const key = uniqueKey('stop-twice');
    const stopEarlier = await store.watchChanges(key, vi.fn());
    stopEarlier();
    const later = vi.fn();
    const stopLater = await store.watchChanges(key, later);
    stopEarlier();
    await raw.publish(keys.changeChannel(key), '');
    await vi.waitFor(() => expect(later).toHaveBeenCalled());
    stopLater();
  });

  it('a watch that cannot mark its lock fails with a 503 and leaves no subscription; the next one subscribes and marks', async () => {
    const store = await open();
    const key = uniqueKey('unmarkable');
    const channel = keys.changeChannel(key);
    // Not a lock hash: the mark script fails on it.
    await raw.set(keys.lock(key), 'not a lock hash');
    try {
      await expect(store.watchChanges(key, vi.fn())).rejects.toBeInstanceOf(StoreUnavailableError);
      await vi.waitFor(async () => expect(await subscribers(channel)).toBe(0));
    } finally {
      await raw.del(keys.lock(key));
    }
    const changes = vi.fn();
    const stop = await store.watchChanges(key, changes);
    expect(await lockField(raw, keys.lock(key), 'w')).not.toBeNull();
    await raw.publish(channel, '');
    await vi.waitFor(() => expect(changes).toHaveBeenCalled());
    stop();
  });

  it('a listener that joined while the subscription was being made keeps it when the first one fails', async () => {
    const store = await open();
    const key = uniqueKey('joined');
    await raw.set(keys.lock(key), 'not a lock hash');
    try {
      const failing = store.watchChanges(key, vi.fn());
      const joined = vi.fn();
      const stopJoined = await store.watchChanges(key, joined);
      await expect(failing).rejects.toBeInstanceOf(StoreUnavailableError);
      await raw.publish(keys.changeChannel(key), '');
      await vi.waitFor(() => expect(joined).toHaveBeenCalled());
      stopJoined();
    } finally {
      await raw.del(keys.lock(key));
    }
  });

  it('when the subscriber connection comes back, every listener is told to read again (notices may have been lost)', async () => {
    const store = await open();
    const changes = vi.fn();
    const stop = await store.watchChanges(uniqueKey('reconnect'), changes);
    expect(changes).not.toHaveBeenCalled();
    await raw.client('KILL', 'TYPE', 'pubsub');
    await vi.waitFor(() => expect(changes).toHaveBeenCalled(), { timeout: 3_000 });
    stop();
  });

  it("the subscriber's first connection is no reason to read again; each one after a loss is, once", async () => {
    // A watch that began before the first connection waits for its SUBSCRIBE's reply and then reads:
    // a read again on that first connection too made it read twice for one notice.
    const subscriber = server.client();
    const connected = vi.fn();
    onSubscriberConnection(subscriber, connected);
    try {
      await new Promise<void>((resolve) => subscriber.once('ready', () => resolve()));
      expect(connected).not.toHaveBeenCalled();
      await subscriber.subscribe('wiring:first-connection');
      await raw.client('KILL', 'TYPE', 'pubsub');
      await vi.waitFor(() => expect(connected).toHaveBeenCalledTimes(1), { timeout: 3_000 });
    } finally {
      subscriber.disconnect();
    }
  });

  it('a subscription Redis does not confirm within the command timeout is a 503, not a wait for ever', async () => {
    const store = await open({ commandTimeoutMs: 100 });
    server.pause();
    try {
      const outcome = await within(
        store.watchChanges(uniqueKey('unconfirmed'), vi.fn()).then(
          () => 'subscribed',
          (err: unknown) => err,
        ),
        1_000,
      );
      expect(outcome).toBeInstanceOf(StoreUnavailableError);
    } finally {
      server.resume();
    }
  });

  it('a subscription Redis refuses is a 503 with its reason, at once', async () => {
    const prefix = `wiring-${++n}:`;
    const store = await open({ keyPrefix: prefix, commandTimeoutMs: 1_000 });
    // Only the store's grant channel stays allowed (revoking that one would drop its subscriber too).
    let grants: string[] = [];
    await vi.waitFor(async () => expect((grants = (await raw.pubsub('CHANNELS', `${prefix}grants:*`)) as string[])).toHaveLength(1));
    await raw.acl('SETUSER', 'default', 'resetchannels', `&${grants[0] as string}`);
    try {
      const err = await store.watchChanges(uniqueKey('refused'), vi.fn()).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StoreUnavailableError);
      expect((err as Error).message).toMatch(/NOPERM/);
    } finally {
      await raw.acl('SETUSER', 'default', 'allchannels');
    }
  });

  it('a mark found run out at its renewal has the listeners read again; a stopped watch is no longer renewed', async () => {
    // Only the renewal passes and the clock they read are faked (WATCH_MARK_RENEW_MS, 10 s: each mark
    // is due once within it); Redis and its replies are real.
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'performance'] });
    try {
      const store = await open();
      const key = uniqueKey('lapse');
      const changes = vi.fn();
      const stop = await store.watchChanges(key, changes);
      // Redis lost the mark (a FLUSHALL, a failover to a replica that never had it).
      await setLockFields(raw, keys.lock(key), { w: null });
      await vi.advanceTimersByTimeAsync(10_000);
      await vi.waitFor(() => expect(changes).toHaveBeenCalled());
      expect(await lockField(raw, keys.lock(key), 'w')).not.toBeNull();
      stop();
      await setLockFields(raw, keys.lock(key), { w: null });
      await vi.advanceTimersByTimeAsync(10_000);
      // A round trip behind any renewal the interval would have sent on the same connection.
      await store.inspect(key);
      expect(await lockField(raw, keys.lock(key), 'w')).toBeNull();
      await closeNow(store);
    } finally {
      vi.useRealTimers();
    }
  });
});

describe('redis store: listing cursors and replica acknowledgement', () => {
  it("a listing cursor past a SCAN cursor or naming a node that does not exist is the caller's mistake", async () => {
    const store = await open();
    const list = (cursor: string) => store.list({ prefix: uniqueKey('none-here'), limit: 10, cursor });
    await expect(list('18446744073709551616')).rejects.toBeInstanceOf(InvalidRequestError);
    await expect(list('1-0')).rejects.toBeInstanceOf(InvalidRequestError);
    // The largest SCAN cursor (2^64 - 1) is one Redis takes.
    expect((await list('18446744073709551615')).leases).toEqual(expect.any(Array));
  });

  it('with replica acknowledgement and no replica: grants are given back with a 503, renewals are a 503 but kept', async () => {
    const plain = await open();
    const acked = await open({ replicaAcks: { minReplicas: 1, timeoutMs: 20 } });
    const key = uniqueKey('acks');
    await expect(take(acked, key, 5_000)).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(await plain.inspect(key)).toBeNull();
    const owner = newOwnerToken();
    const held = await plain.acquire({ id: key, ownerToken: owner, ttlMs: 5_000, holder: null });
    if (!held.acquired) throw new Error('not granted');
    await expect(acked.renew(key, owner, 5_000)).rejects.toBeInstanceOf(StoreUnavailableError);
    expect((await plain.inspect(key))?.fencingToken).toBe(held.fencingToken);
    // Nothing to confirm for a renewal that renewed nothing.
    expect(await acked.renew(key, newOwnerToken(), 5_000)).toEqual({ renewed: false });
    const permitKey = uniqueKey('acks-permit');
    await expect(
      acked.permits.acquirePermit({
        kind: 'semaphore',
        id: permitKey,
        ownerToken: newOwnerToken(),
        ttlMs: 5_000,
        holder: null,
        weight: 1,
        capacity: 2,
      }),
    ).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(await plain.permits.inspectPermits('semaphore', permitKey)).toBeNull();
  });
});
