import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { KeySpace } from '../../src/store/redis/keys.js';
import type { Redis } from 'ioredis';
import { newOwnerToken } from '../../src/domain/lock-service.js';
import { StoreUnavailableError } from '../../src/domain/errors.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { FaultProxy } from '../helpers/fault-proxy.js';
import { RedisServer } from '../helpers/redis-server.js';
import { eventually, openRedisStore } from '../helpers/redis-store.js';
import { setLockFields } from '../helpers/lock-record.js';
import { withWords, type Worded } from '../helpers/store-words.js';

/**
 * The Redis store from states a test writes straight into Redis: what the conformance suite cannot
 * reach through the store's own API (Redis's clock cannot be faked; a dead instance's waiter record).
 */
let server: RedisServer;
let store: Worded<RedisStore>;
let raw: Redis;
const PREFIX = 'state:';
let n = 0;
const uniqueKey = () => `k${++n}`;

beforeAll(async () => {
  server = await RedisServer.startShared();
  store = withWords(await openRedisStore(server, { keyPrefix: PREFIX, maxWaitersPerKey: 2 }));
  raw = server.client();
});
afterAll(async () => {
  raw.disconnect();
  await store.close();
  await server.stop();
});

/** A waiter record as an instance that has since died left it: not refreshed for a long time. */
async function plantDeadWaiter(key: string, id: string): Promise<void> {
  const keys = new KeySpace(PREFIX).lockKeys(key);
  const longAgo = Date.now() - 60_000;
  await raw.zadd(keys.queue, longAgo * 1000, id);
  await raw.hset(keys.waiters, id, `${longAgo}|${Date.now() + 60_000}|5000|${newOwnerToken()}|dead-instance|`);
}

describe('redis store: states planted in Redis', () => {
  it('the next fencing token is exactly last + 1 when the last one is ahead of the clock', async () => {
    const key = uniqueKey();
    // Far ahead of the Redis clock in microseconds (~1.8e15 today), still well below 2^53.
    const last = 5_000_000_000_000_000;
    await setLockFields(raw, new KeySpace(PREFIX).lock(key), { t: String(last) });
    const ownerToken = newOwnerToken();
    const first = await store.acquire({ id: key, ownerToken, ttlMs: 5_000, holder: null });
    expect(first).toMatchObject({ acquired: true, fencingToken: last + 1 });
    await store.release(key, ownerToken);
    const second = await store.acquire({ id: key, ownerToken: newOwnerToken(), ttlMs: 5_000, holder: null });
    expect(second).toMatchObject({ acquired: true, fencingToken: last + 2 });
  });

  it('inspect does not count a dead instance’s waiters', async () => {
    const key = uniqueKey();
    const holder = newOwnerToken();
    await store.acquire({ id: key, ownerToken: holder, ttlMs: 10_000, holder: null });
    await plantDeadWaiter(key, 'ghost-1');
    await plantDeadWaiter(key, 'ghost-2');
    expect((await store.inspect(key))?.waiters).toBe(0);
    const waiting = store.acquire({ id: key, ownerToken: newOwnerToken(), ttlMs: 1_000, holder: null, waitMs: 5_000 });
    await expect.poll(async () => (await store.inspect(key))?.waiters, { interval: 10 }).toBe(1);
    expect((await store.list({ prefix: key, limit: 10 })).leases[0]?.waiters).toBe(1);
    await store.release(key, holder);
    expect((await waiting).acquired).toBe(true);
  });

  it('dead waiters do not fill the queue: they are swept out before anyone is refused', async () => {
    const key = uniqueKey();
    const holder = newOwnerToken();
    await store.acquire({ id: key, ownerToken: holder, ttlMs: 10_000, holder: null });
    // The cap is 2 and both places are taken by the dead.
    await plantDeadWaiter(key, 'ghost-1');
    await plantDeadWaiter(key, 'ghost-2');
    const waiters = [0, 1].map(async () => {
      const ownerToken = newOwnerToken();
      return { ownerToken, ...(await store.acquire({ id: key, ownerToken, ttlMs: 1_000, holder: null, waitMs: 5_000 })) };
    });
    await expect.poll(async () => (await store.inspect(key))?.waiters, { interval: 10 }).toBe(2);
    expect(await raw.zcard(new KeySpace(PREFIX).lockKeys(key).queue)).toBe(2);
    // Now the queue really is full of live waiters.
    await expect(store.acquire({ id: key, ownerToken: newOwnerToken(), ttlMs: 1_000, holder: null, waitMs: 5_000 })).rejects.toMatchObject({
      code: 'too_many_waiters',
    });
    // Both live waiters are served in turn; the dead are never handed the lock.
    let current = holder;
    for (const waiting of waiters) {
      expect(await store.release(key, current)).toBe(true);
      const next = await waiting;
      expect(next.acquired).toBe(true);
      current = next.ownerToken;
    }
    await store.release(key, current);
  });
});

describe('redis store: closed while a waiting acquire is in flight', () => {
  const proxies: FaultProxy[] = [];
  afterEach(async () => {
    await Promise.all(proxies.splice(0).map((p) => p.close()));
  });

  /**
   * A store whose Redis replies are held back (300 ms) by a proxy: an acquire script it sends runs in
   * Redis at once, but the store reads its answer only later, so a close can come in between.
   */
  async function storeWithHeldReplies(): Promise<Worded<RedisStore>> {
    const proxy = await FaultProxy.start(server.port);
    proxies.push(proxy);
    const closing = withWords(new RedisStore({ url: proxy.url, keyPrefix: PREFIX, commandTimeoutMs: 2_000, fenceGraceMs: 60_000 }));
    await eventually(() => closing.ping(), 10_000);
    proxy.set({ kind: 'delayReplies', delayMs: 300 });
    return closing;
  }

  it('the caller is answered "the store is closing", and no rejection is left unhandled meanwhile', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const key = uniqueKey();
      const holder = await store.acquire({ id: key, ownerToken: newOwnerToken(), ttlMs: 10_000, holder: null });
      expect(holder.acquired).toBe(true);
      const closing = await storeWithHeldReplies();
      const waiting = closing
        .acquire({ id: key, ownerToken: newOwnerToken(), ttlMs: 5_000, holder: null, waitMs: 10_000 })
        .catch((err: unknown) => err);
      // The script has reached Redis: the caller is queued there, its answer ("queued") held by the
      // proxy, so the waiter is registered and has no one listening to its outcome yet.
      await eventually(async () => expect((await store.inspect(key))?.waiters).toBe(1), 5_000, 5);
      await closing.close();
      expect(await waiting).toBeInstanceOf(StoreUnavailableError);
      // A turn of the event loop for Node to report a rejection nobody handled.
      await new Promise((r) => setTimeout(r, 20));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('a waiting acquire granted at once as the store closes is answered "the store is closing", and its lease is given back', async () => {
    const closing = await storeWithHeldReplies();
    const key = uniqueKey();
    // The key is free: the script grants it at once, and its answer is held by the proxy.
    const acquiring = closing
      .acquire({ id: key, ownerToken: newOwnerToken(), ttlMs: 10_000, holder: null, waitMs: 10_000 })
      .catch((err: unknown) => err);
    await eventually(async () => expect(await store.inspect(key)).not.toBeNull(), 5_000, 5);
    await closing.close();
    // Closing cancelled the caller in Redis, which gave the lease back: the caller must not be told it holds it.
    expect(await acquiring).toBeInstanceOf(StoreUnavailableError);
    const taken = await store.acquire({ id: key, ownerToken: newOwnerToken(), ttlMs: 5_000, holder: null });
    expect(taken.acquired).toBe(true);
  });

  it('the same for a waiting semaphore acquire: answered "the store is closing", and the permit is given back', async () => {
    const closing = await storeWithHeldReplies();
    const key = uniqueKey();
    const permit = (s: Worded<RedisStore>, waitMs: number) =>
      s.permits.acquirePermit({
        kind: 'semaphore',
        id: key,
        ownerToken: newOwnerToken(),
        ttlMs: 10_000,
        holder: null,
        weight: 1,
        capacity: 1,
        waitMs,
      });
    // The one permit is free: the script grants it at once, and its answer is held by the proxy.
    const acquiring = permit(closing, 10_000).catch((err: unknown) => err);
    await eventually(async () => expect((await store.permits.inspectPermits('semaphore', key))?.holders).toHaveLength(1), 5_000, 5);
    await closing.close();
    expect(await acquiring).toBeInstanceOf(StoreUnavailableError);
    expect(await permit(store, 0)).toMatchObject({ acquired: true });
  });
});

describe('redis store: lock sets on a store built in the test', () => {
  // A store built in beforeAll is built outside every test: this one also pins what its constructor
  // sets up for lock sets (the scripts that take their key count per call).
  it('a set of two free locks is granted with a token per lock, and released', async () => {
    const own = withWords(await openRedisStore(server, { keyPrefix: PREFIX }));
    try {
      const keys = [uniqueKey(), uniqueKey()];
      const ownerToken = newOwnerToken();
      const set = await own.lockSets.acquireSet({ ids: keys, ownerToken, ttlMs: 5_000, holder: null });
      expect(set).toMatchObject({ acquired: true, fencingTokens: [expect.any(Number), expect.any(Number)] });
      expect(await own.lockSets.releaseSet(keys, ownerToken)).toBe(true);
      // Released: each key is free for anyone else at once.
      for (const key of keys)
        expect(await store.acquire({ id: key, ownerToken: newOwnerToken(), ttlMs: 5_000, holder: null })).toMatchObject({ acquired: true });
    } finally {
      await own.close();
    }
  });
});
