import { describe, expect, it } from 'vitest';
import { QuotaExceededError } from '../../src/domain/errors.js';
import { LeaseService, type LeaseAsk } from '../../src/domain/lease-service.js';
import type { LeaseAcquire, LeaseStore } from '../../src/domain/lease-store.js';
import { lockId } from '../../src/domain/namespaces.js';
import { leaseSlotId } from '../../src/domain/quota.js';
import { embeddedStoreForFile, LIMITS, LOCK_REFUSALS, lockAsk, uniqueNamespace } from '../helpers/embedded-domain.js';

/**
 * Who counts the namespace quota, over a store that can keep it inside its own lock steps (the Redis
 * store does, from a cap up): a cap at or above the store's threshold is the store's, carried by every
 * lock acquire; a smaller cap is the lease service's, and each lock lease then tells the store it took
 * no unit there, so that its release, renewal or eviction gives none back. Were both to count a lease,
 * or neither, a namespace would be refused under its cap or admitted over it. The embedded store stands
 * in for the store's lock steps; what the service asks of it is recorded.
 */
const store = embeddedStoreForFile();

const THRESHOLD = 10;

interface Recorded {
  leases: LeaseStore;
  acquires: LeaseAcquire[];
  /** Every quota-slot call, by name, with its arguments. */
  slots: Array<{ call: string; args: unknown[] }>;
  /** The store marks renewals and evictions as counted through the quota-slot calls (LeaseRenewOutcome.quotaOutside). */
  markOutside: { renewals: boolean; evictions: boolean };
  /** The store's own refusal of every lock acquire: the namespace holds its cap. */
  quotaFull: { on: boolean };
}

/** The embedded store's port, optionally claiming to keep the quota inside its lock steps from `THRESHOLD`. */
function recorded(quotaInside: boolean): Recorded {
  const inner = store.leases;
  const acquires: LeaseAcquire[] = [];
  const slots: Recorded['slots'] = [];
  const markOutside = { renewals: false, evictions: false };
  const quotaFull = { on: false };
  const leases: LeaseStore = Object.create(inner) as LeaseStore;
  if (quotaInside) {
    Object.defineProperty(leases, 'quotaInside', { value: true });
    Object.defineProperty(leases, 'quotaInsideFrom', { value: THRESHOLD });
  }
  for (const call of ['reserveQuotaSlot', 'extendQuotaSlot', 'freeQuotaSlot', 'retireQuotaSlot'] as const) {
    const innerCall = inner[call].bind(inner) as (...args: unknown[]) => Promise<unknown>;
    Object.assign(leases, {
      [call]: (...args: unknown[]) => {
        slots.push({ call, args });
        return innerCall(...args);
      },
    });
  }
  Object.assign(leases, {
    acquire: (request: LeaseAcquire) => {
      acquires.push(request);
      if (quotaFull.on && request.kind === 'lock') {
        return Promise.resolve({ acquired: false, reason: 'full', retryAfterMs: 50, busyId: request.ids[0], quotaFull: true });
      }
      return inner.acquire(request);
    },
    renew: async (...args: Parameters<LeaseStore['renew']>) => {
      const outcome = await inner.renew(...args);
      return outcome.renewed && markOutside.renewals ? { ...outcome, quotaOutside: true } : outcome;
    },
    forceRelease: async (...args: Parameters<LeaseStore['forceRelease']>) => {
      const evicted = await inner.forceRelease(...args);
      return markOutside.evictions ? evicted.map((e) => ({ ...e, quotaOutside: true })) : evicted;
    },
  });
  return { leases, acquires, slots, markOutside, quotaFull };
}

const semaphoreAsk = (namespace: string, key: string): LeaseAsk => ({ ...lockAsk(namespace, key), kind: 'semaphore', capacity: 3 });
const setAsk = (namespace: string) => ({ namespace, keys: ['x', 'y'], ttlMs: 60_000, holder: null, waitMs: 0, lockDelayMs: 0 });

/** What the store was told about the quota on each acquire: the cap it keeps, and whether the lease took a unit. */
const quotaTerms = (acquires: readonly LeaseAcquire[]) =>
  acquires.map((a) => ({ kind: a.kind, keys: a.ids.length, maxHeldInNamespace: a.maxHeldInNamespace, quotaOutside: a.quotaOutside }));

describe('who counts the namespace quota', () => {
  it("a cap at or above the store's threshold: the store keeps it for locks; semaphores and lock sets are counted by the service", async () => {
    const rec = recorded(true);
    const service = new LeaseService(rec.leases, { ...LIMITS, maxHeldLocksPerNamespace: THRESHOLD });
    const ns = uniqueNamespace();
    await service.acquire(lockAsk(ns, 'k'), LOCK_REFUSALS);
    expect(rec.slots).toStrictEqual([]);
    await service.acquire(semaphoreAsk(ns, 's'), LOCK_REFUSALS);
    expect(rec.slots.map((s) => s.call)).toStrictEqual(['reserveQuotaSlot']);
    await service.acquireSet(setAsk(ns));
    expect(quotaTerms(rec.acquires)).toStrictEqual([
      { kind: 'lock', keys: 1, maxHeldInNamespace: THRESHOLD, quotaOutside: undefined },
      { kind: 'semaphore', keys: 1, maxHeldInNamespace: undefined, quotaOutside: undefined },
      // A set's keys are counted through the quota-slot calls: the store takes no unit for them.
      { kind: 'lock', keys: 2, maxHeldInNamespace: undefined, quotaOutside: true },
    ]);
  });

  it("a cap below the store's threshold: the service keeps it, and each lock lease tells the store it took no unit", async () => {
    const rec = recorded(true);
    const service = new LeaseService(rec.leases, { ...LIMITS, maxHeldLocksPerNamespace: 4 });
    const ns = uniqueNamespace();
    await service.acquire(lockAsk(ns, 'k'), LOCK_REFUSALS);
    await service.acquire(semaphoreAsk(ns, 's'), LOCK_REFUSALS);
    await service.acquireSet(setAsk(ns));
    expect(quotaTerms(rec.acquires)).toStrictEqual([
      { kind: 'lock', keys: 1, maxHeldInNamespace: undefined, quotaOutside: true },
      { kind: 'semaphore', keys: 1, maxHeldInNamespace: undefined, quotaOutside: undefined },
      { kind: 'lock', keys: 2, maxHeldInNamespace: undefined, quotaOutside: true },
    ]);
    expect(rec.slots.filter((s) => s.call === 'reserveQuotaSlot')).toHaveLength(4);
  });

  it('no cap, over a store that could keep one: nothing to count, and no lease says it took no unit', async () => {
    const rec = recorded(true);
    const service = new LeaseService(rec.leases, { ...LIMITS, maxHeldLocksPerNamespace: 0 });
    const ns = uniqueNamespace();
    await service.acquire(lockAsk(ns, 'k'), LOCK_REFUSALS);
    await service.acquireSet(setAsk(ns));
    expect(quotaTerms(rec.acquires)).toStrictEqual([
      { kind: 'lock', keys: 1, maxHeldInNamespace: undefined, quotaOutside: undefined },
      { kind: 'lock', keys: 2, maxHeldInNamespace: undefined, quotaOutside: undefined },
    ]);
    expect(rec.slots).toStrictEqual([]);
  });

  it('a store that never keeps the quota is told nothing of it: the service counts every lease', async () => {
    const rec = recorded(false);
    const service = new LeaseService(rec.leases, { ...LIMITS, maxHeldLocksPerNamespace: 3 });
    const ns = uniqueNamespace();
    await service.acquire(lockAsk(ns, 'k'), LOCK_REFUSALS);
    await service.acquireSet(setAsk(ns));
    expect(quotaTerms(rec.acquires)).toStrictEqual([
      { kind: 'lock', keys: 1, maxHeldInNamespace: undefined, quotaOutside: undefined },
      { kind: 'lock', keys: 2, maxHeldInNamespace: undefined, quotaOutside: undefined },
    ]);
    expect(rec.slots.filter((s) => s.call === 'reserveQuotaSlot')).toHaveLength(3);
  });

  it('a waiting acquire the store refused at its cap looks for no replay: the store looked for it in the same step', async () => {
    const rec = recorded(true);
    const service = new LeaseService(rec.leases, { ...LIMITS, maxHeldLocksPerNamespace: THRESHOLD });
    const ns = uniqueNamespace();
    rec.quotaFull.on = true;
    const ask = { ...lockAsk(ns, 'k'), waitMs: 5_000, idempotency: { callerId: 'c', key: 'i-1' } };
    await expect(service.acquire(ask, LOCK_REFUSALS)).rejects.toBeInstanceOf(QuotaExceededError);
    expect(rec.acquires).toHaveLength(1);
  });
});

describe("a lock set's key renewed or evicted alone, under a cap the store keeps", () => {
  it("its renewal carries the key's quota slot to the new end; a lease that took its unit in the store moves none", async () => {
    const rec = recorded(true);
    const service = new LeaseService(rec.leases, { ...LIMITS, maxHeldLocksPerNamespace: THRESHOLD });
    const ns = uniqueNamespace();
    const set = await service.acquireSet(setAsk(ns));
    const held = await service.acquire(lockAsk(ns, 'k'), LOCK_REFUSALS);
    rec.slots.length = 0;
    await service.renew('lock', ns, 'k', held.ownerToken, 60_000);
    expect(rec.slots).toStrictEqual([]);
    rec.markOutside.renewals = true;
    const renewed = await service.renew('lock', ns, 'x', set.ownerToken, 60_000);
    expect(rec.slots).toStrictEqual([
      { call: 'extendQuotaSlot', args: [ns, leaseSlotId(set.ownerToken, lockId(ns, 'x')), renewed.expiresAtMs, THRESHOLD] },
    ]);
  });

  it("its eviction retires the key's quota slot; an evicted lease that took its unit in the store retires none", async () => {
    const rec = recorded(true);
    const service = new LeaseService(rec.leases, { ...LIMITS, maxHeldLocksPerNamespace: THRESHOLD });
    const ns = uniqueNamespace();
    const set = await service.acquireSet(setAsk(ns));
    await service.acquire(lockAsk(ns, 'k'), LOCK_REFUSALS);
    rec.slots.length = 0;
    expect(await service.forceRelease('lock', ns, 'k')).toHaveLength(1);
    expect(rec.slots).toStrictEqual([]);
    const live = await service.inspect('lock', ns, 'x');
    rec.markOutside.evictions = true;
    expect(await service.forceRelease('lock', ns, 'x')).toHaveLength(1);
    expect(rec.slots).toStrictEqual([
      { call: 'retireQuotaSlot', args: [ns, leaseSlotId(set.ownerToken, lockId(ns, 'x')), live?.expiresAtMs, THRESHOLD] },
    ]);
  });

  it("under a cap below the store's threshold, an evicted lock's slot is retired under the service's cap", async () => {
    const rec = recorded(true);
    const service = new LeaseService(rec.leases, { ...LIMITS, maxHeldLocksPerNamespace: 3 });
    const ns = uniqueNamespace();
    const held = await service.acquire(lockAsk(ns, 'k'), LOCK_REFUSALS);
    rec.slots.length = 0;
    rec.markOutside.evictions = true;
    expect(await service.forceRelease('lock', ns, 'k')).toHaveLength(1);
    expect(rec.slots).toStrictEqual([
      { call: 'retireQuotaSlot', args: [ns, leaseSlotId(held.ownerToken, lockId(ns, 'k')), held.expiresAtMs, 3] },
    ]);
  });
});
