import { describe, expect, it } from 'vitest';
import { leaseStoreOver, type LeaseEngine, type StoreParts } from '../../src/store/shared/lease-port.js';

/**
 * The domain's port over a store's engine says what the store says about its quota: the lease service
 * decides from `quotaInside` and `quotaInsideFrom` whether the store counts a namespace's cap inside its
 * own lock steps, so a port that dropped them would have the cap counted twice, or never.
 */
describe('the lease port over a store', () => {
  const parts = (quotaInside: boolean | undefined, quotaInsideFrom: number | undefined): StoreParts => ({
    kind: 'redis',
    quotaInside,
    quotaInsideFrom,
    reserveQuotaSlot: async () => ({ reserved: true }),
    extendQuotaSlot: async () => undefined,
    freeQuotaSlot: async () => undefined,
    retireQuotaSlot: async () => undefined,
  });
  const engine = {} as LeaseEngine;

  it("says the store's kind and quota, as the store says them", () => {
    const inside = leaseStoreOver(parts(true, 40), engine);
    expect([inside.kind, inside.quotaInside, inside.quotaInsideFrom]).toEqual(['redis', true, 40]);
    const outside = leaseStoreOver(parts(false, undefined), engine);
    expect([outside.quotaInside, outside.quotaInsideFrom]).toEqual([false, undefined]);
  });

  it('reads them from the store on each call, not once when it was made', () => {
    const store = { ...parts(false, undefined) };
    const port = leaseStoreOver(store, engine);
    Object.assign(store, { quotaInside: true, quotaInsideFrom: 8 });
    expect([port.quotaInside, port.quotaInsideFrom]).toEqual([true, 8]);
  });
});
