import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { QuotaExceededError, StoreUnavailableError } from '../../src/domain/errors.js';
import type { LeaseStoreHost } from '../../src/domain/lease-store.js';
import type { LeaseLimits } from '../../src/domain/limits.js';
import { LockService } from '../../src/domain/lock-service.js';
import { LockSetService } from '../../src/domain/lock-sets.js';
import { createPermitCores } from '../../src/domain/primitives.js';
import { SemaphoreService } from '../../src/domain/semaphores.js';
import type { RedisStore } from '../../src/store/redis/redis-store.js';
import { FaultProxy } from '../helpers/fault-proxy.js';
import { openRedisStore } from '../helpers/redis-store.js';
import { RedisServer } from '../helpers/redis-server.js';

/**
 * A quota counted through the quota-slot calls (semaphores, lock sets, locks under a cap below 9,600):
 * an acquire that may wait reserves its slot first, then asks for the lease. When the lease's call runs in
 * Redis but its reply comes after the command deadline (REDIS_COMMAND_TIMEOUT_MS), the caller gets 503 and
 * the slot is freed although the lease is live: the namespace then holds more leases than its cap.
 */
const CAP = 2;
const TIMEOUT_MS = 200;
const REPLY_DELAY_MS = 700;
const LIMITS: LeaseLimits = { ...DEFAULT_LIMITS, maxHeldLocksPerNamespace: CAP };

let server: RedisServer;
let proxy: FaultProxy;
let slow: RedisStore;
let direct: RedisStore;

beforeAll(async () => {
  server = await RedisServer.start();
  proxy = await FaultProxy.start(server.port);
  slow = await openRedisStore({ url: proxy.url } as RedisServer, { keyPrefix: 'uq:', commandTimeoutMs: TIMEOUT_MS });
  direct = await openRedisStore(server, { keyPrefix: 'uq:' });
});
afterAll(async () => {
  await slow?.close();
  await direct?.close();
  await proxy?.close();
  await server?.stop();
});

/** The slow store, whose lease acquire (only) gets its reply after the command deadline; the call itself runs at once. */
function lateAcquireReply(): LeaseStoreHost {
  const leases = slow.leases;
  return {
    leases: Object.assign(Object.create(leases) as typeof leases, {
      acquire: (...args: Parameters<typeof leases.acquire>) => {
        proxy.set({ kind: 'delayReplies', delayMs: REPLY_DELAY_MS });
        return leases.acquire(...args);
      },
    }),
  };
}

async function settle(): Promise<void> {
  proxy.heal();
  // The held replies drain; the slot's give-back sent with them has run in Redis already.
  await sleep(REPLY_DELAY_MS + 300);
}

describe('an acquire whose reply missed the command deadline but which ran in Redis', () => {
  it('semaphore (waitMs > 0): the live permit keeps its quota slot; the namespace stays within its cap', async () => {
    const ns = `ns-${randomUUID().slice(0, 8)}`;
    const host = lateAcquireReply();
    const slowSems = new SemaphoreService(createPermitCores(host, LIMITS, new LockService(host, LIMITS).waitGate).semaphores);
    const locks = new LockService(direct, LIMITS);
    const sems = new SemaphoreService(createPermitCores(direct, LIMITS, locks.waitGate).semaphores);

    const err = await slowSems.acquire(ns, 'a', { limit: 5, ttlMs: 30_000, waitMs: 1_000 }).catch((e: unknown) => e);
    await settle();
    expect(err).toBeInstanceOf(StoreUnavailableError);
    // Redis granted it: a live permit nobody will release, for 30 s.
    expect((await sems.inspect(ns, 'a'))?.permitsHeld).toBe(1);

    await sems.acquire(ns, 'b', { limit: 5, ttlMs: 30_000 });
    // One live permit plus 'b' is the cap: a third must be refused.
    const third = await sems.acquire(ns, 'c', { limit: 5, ttlMs: 30_000 }).catch((e: unknown) => e);
    expect(third).toBeInstanceOf(QuotaExceededError);
  });

  it('lock under a cap below 9,600 (waitMs > 0): the live lease keeps its quota slot', async () => {
    const ns = `ns-${randomUUID().slice(0, 8)}`;
    const slowLocks = new LockService(lateAcquireReply(), LIMITS);
    const locks = new LockService(direct, LIMITS);

    const err = await slowLocks.acquire(ns, 'a', 30_000, { waitMs: 1_000 }).catch((e: unknown) => e);
    await settle();
    expect(err).toBeInstanceOf(StoreUnavailableError);
    expect(await locks.inspect(ns, 'a')).not.toBeNull();

    await locks.acquire(ns, 'b', 30_000);
    const third = await locks.acquire(ns, 'c', 30_000).catch((e: unknown) => e);
    expect(third).toBeInstanceOf(QuotaExceededError);
  });

  it('lock set: the live keys keep their quota slots', async () => {
    const ns = `ns-${randomUUID().slice(0, 8)}`;
    const host = lateAcquireReply();
    const slowLocks = new LockService(host, LIMITS);
    const slowSets = new LockSetService(host, LIMITS, slowLocks);
    const locks = new LockService(direct, LIMITS);

    const err = await slowSets.acquire(ns, ['a', 'b'], 30_000).catch((e: unknown) => e);
    await settle();
    expect(err).toBeInstanceOf(StoreUnavailableError);
    expect(await locks.inspect(ns, 'a')).not.toBeNull();
    expect(await locks.inspect(ns, 'b')).not.toBeNull();

    // Two live leases already fill the cap.
    const third = await locks.acquire(ns, 'c', 30_000).catch((e: unknown) => e);
    expect(third).toBeInstanceOf(QuotaExceededError);
  });
});
