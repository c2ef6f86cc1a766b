import { afterAll, beforeAll, expect, it } from 'vitest';
import { newOwnerToken } from '../../src/domain/lock-service.js';
import { KeySpace } from '../../src/store/redis/keys.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { FaultProxy } from '../helpers/fault-proxy.js';
import { until } from '../helpers/redis-admin.js';
import { RedisServer } from '../helpers/redis-server.js';
import { eventually, quotaUnitsCounted } from '../helpers/redis-store.js';
import { withWords, type Worded } from '../helpers/store-words.js';

/**
 * Under a limit counted inside the lock scripts (docs/limits.md: from 9,600, the default
 * 10,000), a waiter takes a quota unit when it queues (acquire.lua), counted to the end of its wait
 * plus its lease, and "its cancelled wait gives it back" (cancel.lua). But a waiter whose wait has run
 * out in Redis is dropped from the queue as dead by the next hand-over (handOverFree) WITHOUT its unit
 * being given back, and its cancel, arriving a moment later, finds no record and gives back nothing.
 * The unit then counts for a whole wait + lease although the waiter holds nothing: the namespace is
 * refused below its limit, one lease per such waiter, for a lease length. The mixed workload
 * (test/redis/quota-workload.test.ts) left 1-2 such units behind in most 6 s runs.
 *
 * Made deterministic here: the waiter's instance reaches Redis through a proxy that delays its cancel,
 * and the holder releases after the waiter's wait has run out in Redis and before the cancel arrives.
 */
const PREFIX = 'dead-waiter:';
const space = new KeySpace(PREFIX);
let server: RedisServer;
let proxy: FaultProxy;
let waiterStore: Worded<RedisStore>;
let holderStore: Worded<RedisStore>;

beforeAll(async () => {
  server = await RedisServer.start();
  proxy = await FaultProxy.start(server.port);
  waiterStore = withWords(new RedisStore({ url: proxy.url, keyPrefix: PREFIX, commandTimeoutMs: 5_000, fenceGraceMs: 60_000 }));
  holderStore = withWords(new RedisStore({ url: server.url, keyPrefix: PREFIX, commandTimeoutMs: 5_000, fenceGraceMs: 60_000 }));
  await eventually(() => waiterStore.ping(), 10_000);
  await eventually(() => holderStore.ping(), 10_000);
}, 60_000);

afterAll(async () => {
  await waiterStore?.close().catch(() => undefined);
  await holderStore?.close().catch(() => undefined);
  await proxy?.close();
  await server?.stop();
});

const unitsCounted = (namespace: string): Promise<number> => quotaUnitsCounted(server, space, namespace);

it('a waiter whose wait ran out and was dropped by a hand-over before its cancel arrived gives its quota unit back', async () => {
  // A cap of 32 counted inside the lock scripts: two units per shard (the service asks this from 9,600 on,
  // 600 a shard; the store takes any cap), so two units are all the lock's shard has.
  const cap = 32;
  const id = 'ns/dead-waiter';
  const name = 'dead-waiter';
  const holder = newOwnerToken();
  expect(await holderStore.acquire({ id, ownerToken: holder, ttlMs: 30_000, holder: null, maxHeldInNamespace: cap })).toMatchObject({
    acquired: true,
  });
  expect(await unitsCounted('ns')).toBe(1);
  const waiterOwner = newOwnerToken();
  const waiting = waiterStore.acquire({ id, ownerToken: waiterOwner, ttlMs: 30_000, holder: null, waitMs: 300, maxHeldInNamespace: cap });
  await expect.poll(async () => (await holderStore.inspect(id))?.waiters, { timeout: 5_000, interval: 10 }).toBe(1);
  expect(await unitsCounted('ns')).toBe(2);
  // The waiter's instance is slow to reach Redis from now on: its cancel, sent when its wait runs out,
  // arrives 1.5 s late.
  proxy.set({ kind: 'delay', delayMs: 1_500 });
  const keys = space.lockKeys(id);
  await until("the waiter's wait to have run out on the Redis clock", 5_000, async () => {
    const raw = server.client();
    try {
      const [sec, usec] = (await raw.time()) as [number, number];
      const nowMs = Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
      const records = Object.values(await raw.hgetall(keys.waiters));
      return records.length === 1 && Number(records[0]?.split('|')[1]) < nowMs ? true : undefined;
    } finally {
      raw.disconnect();
    }
  });
  // The holder releases: the hand-over finds the waiter's wait over, and drops it.
  expect(await holderStore.release(id, holder)).toBe(true);
  proxy.heal();
  const outcome = await waiting;
  expect(outcome.acquired).toBe(false);
  // Nothing is held and nobody waits: the namespace counts nothing.
  expect(await holderStore.inspect(id)).toBeNull();
  expect(await unitsCounted('ns'), 'quota units still counted with nothing held and nobody waiting').toBe(0);
  // And so two locks in that shard are granted under the two-units-a-shard cap.
  const sameShard = Array.from({ length: 1_000 }, (_v, i) => `other-${i}`).filter((k) => space.shardOf(k) === space.shardOf(name));
  for (const key of sameShard.slice(0, 2)) {
    const other = await holderStore.acquire({
      id: `ns/${key}`,
      ownerToken: newOwnerToken(),
      ttlMs: 30_000,
      holder: null,
      maxHeldInNamespace: cap,
    });
    expect(other.acquired, `${key} refused with one lock held in a shard of two units`).toBe(true);
  }
}, 30_000);
