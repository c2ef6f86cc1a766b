import { describe, expect, it } from 'vitest';
import { LockHeldError, NotOwnerError, QuotaExceededError, StoreUnavailableError } from '../../src/domain/errors.js';
import { LeaseService } from '../../src/domain/lease-service.js';
import type { LeaseStore } from '../../src/domain/lease-store.js';
import { LockService } from '../../src/domain/lock-service.js';
import { embeddedStoreForFile, LIMITS, LOCK_REFUSALS, uniqueNamespace } from '../helpers/embedded-domain.js';

/**
 * What the lease engine asks of its store around a refusal, over the embedded store with its calls
 * counted: a refused acquire costs one store acquire (no second look for an idempotent replay unless
 * the namespace's quota refused an acquire that carried an Idempotency-Key), no release of a lease that
 * was never granted, and a store failure while the quota slot was reserved gives the slot back. A
 * service built without an observer answers lost leases and waits as one built with one.
 */
const store = embeddedStoreForFile();

/** The embedded store's port, with its acquires and releases counted (and acquires failing when asked). */
function counted(): { leases: LeaseStore; calls: { acquire: number; release: number }; failAcquire: { on: boolean } } {
  const calls = { acquire: 0, release: 0 };
  const failAcquire = { on: false };
  const inner = store.leases;
  const leases: LeaseStore = Object.create(inner) as LeaseStore;
  Object.assign(leases, {
    acquire: (request: Parameters<LeaseStore['acquire']>[0]) => {
      calls.acquire++;
      if (failAcquire.on) return Promise.reject(new StoreUnavailableError('down'));
      return inner.acquire(request);
    },
    release: (...args: Parameters<LeaseStore['release']>) => {
      calls.release++;
      return inner.release(...args);
    },
  });
  return { leases, calls, failAcquire };
}

describe('lease engine: store calls around refusals', () => {
  it('a lock held by another costs one store acquire, with or without an Idempotency-Key', async () => {
    const { leases, calls } = counted();
    const locks = new LockService({ leases }, LIMITS);
    const ns = uniqueNamespace();
    await locks.acquire(ns, 'k', 60_000);
    calls.acquire = 0;
    await expect(locks.acquire(ns, 'k', 60_000)).rejects.toBeInstanceOf(LockHeldError);
    await expect(locks.acquire(ns, 'k', 60_000, { idempotency: { callerId: 'c', key: 'i-1' } })).rejects.toBeInstanceOf(LockHeldError);
    expect(calls.acquire).toBe(2);
  });

  it("the quota's refusal without an Idempotency-Key looks for no replay: the one lease taken meanwhile is given back once", async () => {
    const { leases, calls } = counted();
    const locks = new LockService({ leases }, { ...LIMITS, maxHeldLocksPerNamespace: 1 });
    const ns = uniqueNamespace();
    await locks.acquire(ns, 'a', 60_000);
    calls.acquire = 0;
    await expect(locks.acquire(ns, 'b', 60_000)).rejects.toBeInstanceOf(QuotaExceededError);
    expect(calls).toStrictEqual({ acquire: 1, release: 1 });
    expect(await locks.inspect(ns, 'b')).toBeNull();
  });

  it("the quota's refusal with an Idempotency-Key looks once for a replay; a look that is refused releases nothing", async () => {
    const { leases, calls } = counted();
    const locks = new LockService({ leases }, { ...LIMITS, maxHeldLocksPerNamespace: 2 });
    const ns = uniqueNamespace();
    await locks.acquire(ns, 'a', 60_000);
    await locks.acquire(ns, 'b', 60_000);
    calls.acquire = 0;
    await expect(locks.acquire(ns, 'b', 60_000, { idempotency: { callerId: 'c', key: 'i-2' } })).rejects.toBeInstanceOf(QuotaExceededError);
    expect(calls).toStrictEqual({ acquire: 2, release: 0 });
  });

  it('a store failure while the quota slot was reserved is the answer, and the slot is given back', async () => {
    const { leases, failAcquire } = counted();
    const locks = new LockService({ leases }, { ...LIMITS, maxHeldLocksPerNamespace: 1 });
    const ns = uniqueNamespace();
    failAcquire.on = true;
    await expect(locks.acquire(ns, 'a', 60_000)).rejects.toBeInstanceOf(StoreUnavailableError);
    failAcquire.on = false;
    const grant = await locks.acquire(ns, 'a', 60_000);
    expect(grant.fencingToken).toBeGreaterThan(0);
  });
});

describe('lease engine: immediate reads of a semaphore or read/write lock', () => {
  it('callers asking together share one store read and one view; a caller after it reads again', async () => {
    let reads = 0;
    const leases: LeaseStore = Object.create(store.leases) as LeaseStore;
    Object.assign(leases, {
      inspectIndexed: (...args: Parameters<LeaseStore['inspectIndexed']>) => {
        reads++;
        return store.leases.inspectIndexed(...args);
      },
    });
    const service = new LeaseService(leases, LIMITS);
    const ns = uniqueNamespace();
    for (const kind of ['semaphore', 'rwlock'] as const) {
      reads = 0;
      const views = await Promise.all([0, 1, 2].map(() => service.watch(kind, ns, 'k', { index: undefined, waitMs: 0 })));
      expect(reads).toBe(1);
      expect(views[1]).toBe(views[0]);
      expect(views[2]).toBe(views[0]);
      await service.watch(kind, ns, 'k', { index: undefined, waitMs: 0 });
      expect(reads).toBe(2);
    }
  });
});

describe('lease engine: quota slot calls', () => {
  /** The embedded store's port with its quota-slot calls counted. */
  function slotCounted(): { leases: LeaseStore; slotCalls: string[] } {
    const slotCalls: string[] = [];
    const leases: LeaseStore = Object.create(store.leases) as LeaseStore;
    for (const name of ['reserveQuotaSlot', 'extendQuotaSlot', 'freeQuotaSlot'] as const) {
      const inner = store.leases[name].bind(store.leases) as (...args: unknown[]) => Promise<unknown>;
      Object.assign(leases, {
        [name]: (...args: unknown[]) => {
          slotCalls.push(name);
          return inner(...args);
        },
      });
    }
    return { leases, slotCalls };
  }

  it('without a per-namespace cap, locks and lock sets make no quota slot call', async () => {
    const { leases, slotCalls } = slotCounted();
    const service = new LeaseService(leases, { ...LIMITS, maxHeldLocksPerNamespace: 0 });
    const ns = uniqueNamespace();
    const ask = { kind: 'lock' as const, namespace: ns, key: 'k', capacity: 1, weight: 1, ttlMs: 60_000, holder: null, waitMs: 0 };
    const held = await service.acquire(ask, LOCK_REFUSALS);
    await service.renew('lock', ns, 'k', held.ownerToken, 60_000);
    await service.release('lock', ns, 'k', held.ownerToken);
    const set = await service.acquireSet({ namespace: ns, keys: ['a', 'b'], ttlMs: 60_000, holder: null, waitMs: 0, lockDelayMs: 0 });
    await service.renewSet(ns, ['a', 'b'], set.ownerToken, 60_000);
    await service.releaseSet(ns, ['a', 'b'], set.ownerToken);
    expect(slotCalls).toStrictEqual([]);
  });

  it('with a cap, a lock set reserves, extends and frees one slot per key', async () => {
    const { leases, slotCalls } = slotCounted();
    const service = new LeaseService(leases, { ...LIMITS, maxHeldLocksPerNamespace: 5 });
    const ns = uniqueNamespace();
    const set = await service.acquireSet({ namespace: ns, keys: ['a', 'b'], ttlMs: 60_000, holder: null, waitMs: 0, lockDelayMs: 0 });
    await service.renewSet(ns, ['a', 'b'], set.ownerToken, 60_000);
    await service.releaseSet(ns, ['a', 'b'], set.ownerToken);
    expect(slotCalls.filter((c) => c === 'extendQuotaSlot')).toHaveLength(2);
    expect(slotCalls.filter((c) => c === 'freeQuotaSlot')).toHaveLength(2);
  });

  it('a store that keeps the quota inside its lock steps is asked once: it looked for the replay itself', async () => {
    let acquires = 0;
    const leases: LeaseStore = Object.create(store.leases) as LeaseStore;
    Object.defineProperty(leases, 'quotaInside', { value: true });
    Object.assign(leases, {
      acquire: () => {
        acquires++;
        return Promise.resolve({ acquired: false, reason: 'full', retryAfterMs: 50, busyId: 'k', quotaFull: true });
      },
    });
    const service = new LeaseService(leases, { ...LIMITS, maxHeldLocksPerNamespace: 1 });
    const ns = uniqueNamespace();
    const ask = { kind: 'lock' as const, namespace: ns, key: 'k', capacity: 1, weight: 1, ttlMs: 60_000, holder: null, waitMs: 0 };
    await expect(service.acquire({ ...ask, idempotency: { callerId: 'c', key: 'i-3' } }, LOCK_REFUSALS)).rejects.toBeInstanceOf(
      QuotaExceededError,
    );
    expect(acquires).toBe(1);
  });
});

describe('lease engine without an observer', () => {
  it('answers a lost lease with not_owner and a wait with its grant', async () => {
    const service = new LeaseService(store.leases, LIMITS);
    const ns = uniqueNamespace();
    const ask = { kind: 'lock' as const, namespace: ns, key: 'k', capacity: 1, weight: 1, ttlMs: 60_000, holder: null, waitMs: 0 };
    const held = await service.acquire(ask, LOCK_REFUSALS);
    const waiting = service.acquire({ ...ask, waitMs: 10_000 }, LOCK_REFUSALS);
    await service.release('lock', ns, 'k', held.ownerToken);
    const handed = await waiting;
    expect(handed.fencingToken).toBeGreaterThan(held.fencingToken);
    await expect(service.renew('lock', ns, 'k', held.ownerToken, 60_000)).rejects.toBeInstanceOf(NotOwnerError);
    await expect(service.release('lock', ns, 'k', held.ownerToken)).rejects.toBeInstanceOf(NotOwnerError);
    await service.release('lock', ns, 'k', handed.ownerToken);
  });
});
