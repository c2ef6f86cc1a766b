import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { LockService } from '../../src/domain/lock-service.js';
import { LockSetService } from '../../src/domain/lock-sets.js';
import { lockId } from '../../src/domain/namespaces.js';
import { leaseSlotId } from '../../src/domain/quota.js';
import { KeySpace, QUOTA_INSIDE_FROM } from '../../src/store/redis/keys.js';
import type { Store } from '../../src/domain/lease-store.js';
import { openRedisStore } from '../helpers/redis-store.js';
import { RedisServer } from '../helpers/redis-server.js';

/**
 * Under a cap the Redis store counts inside its lock scripts (9,600 and more), a lock set's keys are still
 * counted through the quota-slot calls (their lock records say so: field b = 0). A plain renew of such a
 * key must carry its slot to the lease's new end: left at the set's end, the lease lives on uncounted.
 */
let server: RedisServer;
let store: Store;
const prefix = 'set-key-renew:';
const cap = QUOTA_INSIDE_FROM;

beforeAll(async () => {
  server = await RedisServer.start();
  store = await openRedisStore(server, { keyPrefix: prefix, fenceGraceMs: 60_000 });
});
afterAll(async () => {
  await store?.close();
  await server?.stop();
});

describe('a lock set key renewed through the lock route, quota counted inside the lock scripts', () => {
  it("extends the set's quota slot of that key to the lease's new end", async () => {
    const ns = `ns-${randomUUID().slice(0, 8)}`;
    const limits = { ...DEFAULT_LIMITS, maxHeldLocksPerNamespace: cap };
    const locks = new LockService(store, limits);
    const sets = new LockSetService(store, limits, locks);
    const raw = server.client();
    try {
      const keys = new KeySpace(prefix);
      const set = await sets.acquire(ns, ['a', 'b'], 2_000);
      const slotId = leaseSlotId(set.ownerToken, lockId(ns, 'a'));
      const ends = keys.quotaFor(ns, slotId, cap).ends;
      const before = Number(await raw.zscore(ends, `u:${slotId}`));
      expect(before).toBeGreaterThan(0);
      const renewed = await locks.renew(ns, 'a', set.ownerToken, 60_000);
      expect(Number(await raw.zscore(ends, `u:${slotId}`))).toBe(Math.ceil(renewed.expiresAtMs / 1000));
      // The other key's slot is the set's, untouched.
      const other = leaseSlotId(set.ownerToken, lockId(ns, 'b'));
      expect(Number(await raw.zscore(keys.quotaFor(ns, other, cap).ends, `u:${other}`))).toBeLessThan(before + 2);
      // A plain lock of the namespace (counted inside the scripts) makes no quota slot when renewed.
      const plain = await locks.acquire(ns, 'c', 2_000);
      await locks.renew(ns, 'c', plain.ownerToken, 60_000);
      const plainSlot = leaseSlotId(plain.ownerToken, lockId(ns, 'c'));
      expect(await raw.zscore(keys.quotaFor(ns, plainSlot, cap).ends, `u:${plainSlot}`)).toBeNull();
      await locks.release(ns, 'c', plain.ownerToken);
      await sets.release(ns, ['a', 'b'], set.ownerToken);
    } finally {
      raw.disconnect();
    }
  });

  it('one quota-slot call per renewal counted through the quota-slot calls, none for a lock counted inside the scripts', async () => {
    const ns = `ns-${randomUUID().slice(0, 8)}`;
    const leases = store.leases;
    let extends_ = 0;
    const host = {
      leases: Object.assign(Object.create(leases) as typeof leases, {
        extendQuotaSlot: (...args: Parameters<typeof leases.extendQuotaSlot>) => {
          extends_++;
          return leases.extendQuotaSlot(...args);
        },
      }),
    };
    const counted = async (run: () => Promise<unknown>) => {
      const before = extends_;
      await run();
      return extends_ - before;
    };
    for (const [limit, plainCalls] of [
      [cap, 0],
      [2, 1],
    ] as const) {
      const limits = { ...DEFAULT_LIMITS, maxHeldLocksPerNamespace: limit };
      const locks = new LockService(host, limits);
      const sets = new LockSetService(host, limits, locks);
      const plain = await locks.acquire(ns, 'p', 60_000);
      expect(await counted(() => locks.renew(ns, 'p', plain.ownerToken, 60_000))).toBe(plainCalls);
      const set = await sets.acquire(ns, ['s'], 60_000);
      expect(await counted(() => locks.renew(ns, 's', set.ownerToken, 60_000))).toBe(1);
      await locks.release(ns, 'p', plain.ownerToken);
      await sets.release(ns, ['s'], set.ownerToken);
    }
  });
});
