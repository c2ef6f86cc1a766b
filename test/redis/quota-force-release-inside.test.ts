import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { LockService } from '../../src/domain/lock-service.js';
import { LockSetService } from '../../src/domain/lock-sets.js';
import type { Store } from '../../src/domain/lease-store.js';
import { KeySpace, QUOTA_INSIDE_FROM } from '../../src/store/redis/keys.js';
import { openRedisStore, quotaUnitsCounted } from '../helpers/redis-store.js';
import { RedisServer } from '../helpers/redis-server.js';
import { renewalsHeldAfterTheStore } from '../helpers/with-leases.js';

/**
 * Under a cap the Redis store counts inside its lock scripts (9,600 and more), a force release and a
 * renewal of one lock racing it: a plain lock's unit lives in its lock's own shard, taken, moved and given
 * back by the lock scripts in the step that reads the lease, so there is nothing to race. A lock set's
 * key is counted through the quota-slot calls even then (field b = 0): its force release must give that
 * slot back, and a renewal of the key decided before the eviction must not count it again.
 */
let server: RedisServer;
let store: Store;
const prefix = 'force-inside:';
const cap = QUOTA_INSIDE_FROM;
const TTL = 60_000;
const keys = new KeySpace(prefix);

beforeAll(async () => {
  server = await RedisServer.start();
  store = await openRedisStore(server, { keyPrefix: prefix, fenceGraceMs: 60_000 });
});
afterAll(async () => {
  await store?.close();
  await server?.stop();
});

const unitsCounted = (namespace: string): Promise<number> => quotaUnitsCounted(server, keys, namespace);

describe('a force release under a cap counted inside the lock scripts', () => {
  it("a plain lock's renewal racing its force release leaves no unit counted", async () => {
    const ns = `ns-${randomUUID().slice(0, 8)}`;
    const { host, race } = renewalsHeldAfterTheStore(store);
    const locks = new LockService(host, { ...DEFAULT_LIMITS, maxHeldLocksPerNamespace: cap });
    const held = await locks.acquire(ns, 'a', TTL);
    expect(await unitsCounted(ns)).toBe(1);
    await race(
      () => locks.renew(ns, 'a', held.ownerToken, TTL),
      () => locks.forceRelease(ns, 'a'),
    );
    expect(await unitsCounted(ns)).toBe(0);
  });

  it("a lock set's key: its force release gives its slot back, and its renewal racing that counts none again", async () => {
    const ns = `ns-${randomUUID().slice(0, 8)}`;
    const { host, race } = renewalsHeldAfterTheStore(store);
    const limits = { ...DEFAULT_LIMITS, maxHeldLocksPerNamespace: cap };
    const locks = new LockService(host, limits);
    const sets = new LockSetService(host, limits, locks);
    const set = await sets.acquire(ns, ['a', 'b', 'c'], TTL);
    expect(await unitsCounted(ns)).toBe(3);
    await locks.forceRelease(ns, 'a');
    expect(await unitsCounted(ns)).toBe(2);
    await race(
      () => locks.renew(ns, 'b', set.ownerToken, TTL),
      () => locks.forceRelease(ns, 'b'),
    );
    expect(await unitsCounted(ns)).toBe(1);
    await locks.release(ns, 'c', set.ownerToken);
  });
});
