import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../src/config.js';
import type { LeaseLimits } from '../../src/domain/limits.js';
import { LockService } from '../../src/domain/lock-service.js';
import { createPermitCores } from '../../src/domain/primitives.js';
import { SemaphoreService } from '../../src/domain/semaphores.js';
import type { RedisStore } from '../../src/store/redis/redis-store.js';
import { FaultProxy } from '../helpers/fault-proxy.js';
import { openRedisStore } from '../helpers/redis-store.js';
import { RedisServer } from '../helpers/redis-server.js';

/**
 * A Redis waiter whose caller leaves (abort) just as the key is handed to it. Its quota slot (the
 * quota-slot calls: semaphores, locks under a cap below 9,600) must not be given back while the lease
 * handed to it is still live in Redis: WaitRoom.onAbort answers the caller at once, so the slot is freed
 * in the same moment as the cancel is sent, and the lease is released only after the cancel's reply.
 * Over a link with some latency (here 3 s, well inside the command deadline, and far longer than the checks take) the namespace holds more
 * leases than its cap for that long; if the cancel or the release fails, for the lease's whole TTL.
 */
const CAP = 2;
const LATENCY_MS = 3_000;
const LIMITS: LeaseLimits = { ...DEFAULT_LIMITS, maxHeldLocksPerNamespace: CAP };

let server: RedisServer;
let proxy: FaultProxy;
let far: RedisStore;
let near: RedisStore;

beforeAll(async () => {
  server = await RedisServer.start();
  proxy = await FaultProxy.start(server.port);
  far = await openRedisStore({ url: proxy.url } as RedisServer, { keyPrefix: 'qa:', commandTimeoutMs: 10_000 });
  near = await openRedisStore(server, { keyPrefix: 'qa:' });
});
afterAll(async () => {
  await far?.close();
  await near?.close();
  await proxy?.close();
  await server?.stop();
});

function semaphores(store: RedisStore): SemaphoreService {
  return new SemaphoreService(createPermitCores(store, LIMITS, new LockService(store, LIMITS).waitGate).semaphores);
}

describe('a Redis waiter that leaves as the key is handed to it', () => {
  it('semaphore: its quota slot counts until the permit handed to it is given back', async () => {
    const ns = `ns-${randomUUID().slice(0, 8)}`;
    const farSems = semaphores(far);
    const sems = semaphores(near);
    const a = await sems.acquire(ns, 's', { limit: 1, ttlMs: 30_000 });
    const leaving = new AbortController();
    const b = farSems.acquire(ns, 's', { limit: 1, ttlMs: 30_000, waitMs: 20_000, signal: leaving.signal }).catch((e: unknown) => e);
    await expect.poll(async () => (await sems.inspect(ns, 's'))?.waiters).toBe(1);
    await sleep(50);

    proxy.set({ kind: 'delayReplies', delayMs: LATENCY_MS });
    try {
      // Redis hands the permit to B; B's instance hears of it only LATENCY_MS later, and B leaves now.
      await sems.release(ns, 's', a.ownerToken);
      leaving.abort();
      await sleep(100);
      // B's permit is live in Redis (its give-back waits for the cancel's reply) ...
      const handed = (await sems.inspect(ns, 's'))?.permitsHeld ?? 0;
      expect(handed).toBe(1);
      // ... so one more lease fills the cap of 2, and a second must be refused.
      const x = await sems.acquire(ns, 'x', { limit: 5, ttlMs: 30_000 }).then(
        () => 1,
        () => 0,
      );
      const y = await sems.acquire(ns, 'y', { limit: 5, ttlMs: 30_000 }).then(
        () => 1,
        () => 0,
      );
      const heldAtOnce = handed + x + y;
      expect(heldAtOnce).toBeLessThanOrEqual(CAP);
    } finally {
      proxy.heal();
      await b;
    }
  });

  it('lock under a cap below 9,600: its quota slot counts until the lease handed to it is given back', async () => {
    const ns = `ns-${randomUUID().slice(0, 8)}`;
    const farLocks = new LockService(far, LIMITS);
    const locks = new LockService(near, LIMITS);
    const a = await locks.acquire(ns, 'k', 30_000);
    const leaving = new AbortController();
    const b = farLocks.acquire(ns, 'k', 30_000, { waitMs: 20_000, signal: leaving.signal }).catch((e: unknown) => e);
    await expect.poll(async () => (await locks.inspect(ns, 'k'))?.waiters).toBe(1);
    await sleep(50);

    proxy.set({ kind: 'delayReplies', delayMs: LATENCY_MS });
    try {
      await locks.release(ns, 'k', a.ownerToken);
      leaving.abort();
      await sleep(100);
      const handed = (await locks.inspect(ns, 'k')) === null ? 0 : 1;
      expect(handed).toBe(1);
      const x = await locks.acquire(ns, 'x', 30_000).then(
        () => 1,
        () => 0,
      );
      const y = await locks.acquire(ns, 'y', 30_000).then(
        () => 1,
        () => 0,
      );
      expect(handed + x + y).toBeLessThanOrEqual(CAP);
    } finally {
      proxy.heal();
      await b;
    }
  });
});
