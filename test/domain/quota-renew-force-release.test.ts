import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../src/config.js';
import type { LeaseLimits } from '../../src/domain/limits.js';
import type { Store } from '../../src/domain/lease-store.js';
import { LockService } from '../../src/domain/lock-service.js';
import { LockSetService } from '../../src/domain/lock-sets.js';
import { createPermitCores, type PermitCores } from '../../src/domain/primitives.js';
import { RwLockService } from '../../src/domain/rwlocks.js';
import { SemaphoreService } from '../../src/domain/semaphores.js';
import { threeStores } from '../helpers/three-stores.js';
import { renewalsHeldAfterTheStore } from '../helpers/with-leases.js';

/**
 * A renewal whose store step is done when an administrator force-releases its lease, and whose quota
 * slot's extend reaches the store only after the force release gave that slot back: the lease is gone, so
 * the extend must neither move nor count the slot again. Counted again, the slot of a lease that no longer
 * exists held a unit of the namespace until the renewed end (a minute here), and the namespace was refused
 * a lease under its cap meanwhile. Each case runs the calls in exactly that order: the renewal is held
 * after its store step until the force release has answered.
 */
const stores = threeStores('quota-renew-force');
const uniqueNamespace = () => `ns-${randomUUID().slice(0, 8)}`;
const TTL = 60_000;

describe.each(stores)('a renewal racing a force release gives the quota nothing back to count (%s)', (_name, open) => {
  let store: Store;
  let race: ReturnType<typeof renewalsHeldAfterTheStore>['race'];
  let services: (cap: number) => {
    locks: LockService;
    sets: LockSetService;
    cores: PermitCores;
    semaphores: SemaphoreService;
    rwlocks: RwLockService;
  };

  beforeAll(async () => {
    store = await open();
    const held = renewalsHeldAfterTheStore(store);
    race = held.race;
    services = (cap) => {
      const limits: LeaseLimits = { ...DEFAULT_LIMITS, maxHeldLocksPerNamespace: cap };
      const locks = new LockService(held.host, limits);
      const cores = createPermitCores(held.host, limits, locks.waitGate);
      return {
        locks,
        sets: new LockSetService(held.host, limits, locks),
        cores,
        semaphores: new SemaphoreService(cores.semaphores),
        rwlocks: new RwLockService(cores.rwlocks),
      };
    };
  }, 60_000);
  afterAll(async () => {
    await store?.close();
  });

  it('a lock: the force-released lease frees its unit for good', async () => {
    const ns = uniqueNamespace();
    const { locks } = services(1);
    const held = await locks.acquire(ns, 'a', TTL);
    await race(
      () => locks.renew(ns, 'a', held.ownerToken, TTL),
      () => locks.forceRelease(ns, 'a'),
    );
    expect(await locks.inspect(ns, 'a')).toBeNull();
    // The namespace holds nothing: its cap of one admits a lease.
    const next = await locks.acquire(ns, 'b', TTL);
    await locks.release(ns, 'b', next.ownerToken);
  });

  it('a semaphore permit: likewise', async () => {
    const ns = uniqueNamespace();
    const { locks, cores, semaphores } = services(1);
    const permit = await semaphores.acquire(ns, 's', { limit: 2, ttlMs: TTL });
    await race(
      () => semaphores.renew(ns, 's', permit.ownerToken, TTL),
      () => cores.semaphores.forceRelease(ns, 's'),
    );
    const next = await locks.acquire(ns, 'b', TTL);
    await locks.release(ns, 'b', next.ownerToken);
  });

  it('a read/write lock lease, evicted by its fencing token: likewise', async () => {
    const ns = uniqueNamespace();
    const { locks, cores, rwlocks } = services(1);
    const reader = await rwlocks.acquire(ns, 'r', { mode: 'read', ttlMs: TTL });
    await race(
      () => rwlocks.renew(ns, 'r', reader.ownerToken, TTL),
      () => cores.rwlocks.forceRelease(ns, 'r', reader.fencingToken),
    );
    const next = await locks.acquire(ns, 'b', TTL);
    await locks.release(ns, 'b', next.ownerToken);
  });

  it("a lock set: the set's renewal, or its key's through the lock route, revives no slot of the evicted key", async () => {
    const ns = uniqueNamespace();
    const { locks, sets } = services(2);
    const set = await sets.acquire(ns, ['a', 'b'], TTL);
    await race(
      () => sets.renew(ns, ['a', 'b'], set.ownerToken, TTL),
      () => locks.forceRelease(ns, 'a'),
    );
    // b is still the set's and counts; a's unit is free: one more lease fits under the cap of two.
    const c = await locks.acquire(ns, 'c', TTL);
    await race(
      () => locks.renew(ns, 'b', set.ownerToken, TTL),
      () => locks.forceRelease(ns, 'b'),
    );
    const d = await locks.acquire(ns, 'd', TTL);
    await locks.release(ns, 'c', c.ownerToken);
    await locks.release(ns, 'd', d.ownerToken);
  });
});
