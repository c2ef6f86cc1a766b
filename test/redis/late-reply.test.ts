import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Redis } from 'ioredis';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { FaultProxy } from '../helpers/fault-proxy.js';
import { RedisServer } from '../helpers/redis-server.js';
import { eventually } from '../helpers/redis-store.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';
import { lockField } from '../helpers/lock-record.js';

/**
 * The late-grant guard, end to end: Redis grants at once, but its reply is held back (a stalled network)
 * past half the lease. The caller must get a 503 and nobody may be told it holds the lock; a new grant
 * must be given back in Redis rather than left to run out, a renewed lease kept for its holder.
 */
const TTL_MS = 4_000;
/** Past half the lease (the guard's line), well short of the whole lease: a slow machine only adds to it. */
const REPLY_DELAY_MS = TTL_MS / 2 + 200;
const PREFIX = 'late:';

let redis: RedisServer;
let proxy: FaultProxy;
let direct: Redis;
let t: TestApp;

beforeAll(async () => {
  redis = await RedisServer.start();
  proxy = await FaultProxy.start(redis.port);
  // The command timeout is well above the reply delay: the reply arrives, late, rather than timing out.
  const store = new RedisStore({ url: proxy.url, keyPrefix: PREFIX, commandTimeoutMs: 3 * REPLY_DELAY_MS, fenceGraceMs: 60_000 });
  await eventually(() => store.ping(), 10_000);
  t = await buildTestApp({ store });
  direct = redis.client();
});
afterAll(async () => {
  direct?.disconnect();
  await t?.close();
  await proxy?.close();
  await redis?.stop();
});

const post = (path: string, payload: object) => t.app.inject({ method: 'POST', url: path, payload });

/** Who Redis says holds lock `key` (its hash lives in the namespace's shard: `late:{default#n}/key`). */
async function ownerInRedis(key: string): Promise<string | null> {
  const [hash, ...more] = await direct.keys(`${PREFIX}{*}/${key}`);
  expect(more).toEqual([]);
  return hash === undefined ? null : lockField(direct, hash, 'o');
}

/**
 * Sends `send()` with Redis's replies held back by REPLY_DELAY_MS, and lets later replies through at
 * once: only the reply to this call is late, so the guard's own release is answered promptly.
 */
async function withLateReply<T>(send: () => Promise<T>): Promise<T> {
  const delayedBefore = proxy.stats.chunksDelayed;
  proxy.set({ kind: 'delayReplies', delayMs: REPLY_DELAY_MS });
  let pending: Promise<T>;
  try {
    pending = send();
    await vi.waitFor(() => expect(proxy.stats.chunksDelayed).toBeGreaterThan(delayedBefore), { timeout: REPLY_DELAY_MS });
  } finally {
    proxy.heal();
  }
  return pending;
}

describe('a store reply that arrives past half the lease', () => {
  it('acquire: 503 store_unavailable, nothing granted, and the lease is given back in Redis at once', async () => {
    const res = await withLateReply(() => post('/v1/locks/late-acquire/acquire', { ttlMs: TTL_MS, holder: 'late' }));
    expect(res.statusCode).toBe(503);
    expect(res.json()).toMatchObject({ code: 'store_unavailable' });
    expect(res.json()).not.toHaveProperty('ownerToken');
    // Redis granted it; the guard released it: no owner left although the lease had time to run.
    expect(await ownerInRedis('late-acquire')).toBeNull();
    const next = await post('/v1/locks/late-acquire/acquire', { ttlMs: TTL_MS });
    expect(next.statusCode).toBe(200);
  });

  it('renew: 503 store_unavailable, and the lease is kept: the holder renews again and keeps it', async () => {
    const granted = await post('/v1/locks/late-renew/acquire', { ttlMs: TTL_MS });
    expect(granted.statusCode).toBe(200);
    const { ownerToken } = granted.json<{ ownerToken: string }>();
    const res = await withLateReply(() => post('/v1/locks/late-renew/renew', { ownerToken, ttlMs: TTL_MS }));
    expect(res.statusCode).toBe(503);
    expect(res.json()).toMatchObject({ code: 'store_unavailable' });
    // The lease was the holder's before the renewal (and the holder still counts on its last known end):
    // giving it back would hand it to another caller inside that end, and cost the holder its lease.
    expect(await ownerInRedis('late-renew')).toBe(ownerToken);
    expect((await post('/v1/locks/late-renew/renew', { ownerToken, ttlMs: TTL_MS })).statusCode).toBe(200);
    expect((await post('/v1/locks/late-renew/release', { ownerToken })).statusCode).toBe(200);
  });
});
