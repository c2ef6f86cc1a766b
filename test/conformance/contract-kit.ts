import { afterAll, beforeAll } from 'vitest';
import type { LockStore } from '../helpers/store-words.js';
import type { StoreHarness } from './lock-store.contract.js';
import type { Clock } from '../../src/store/shared/clock.js';

/**
 * Three handles on one shared store, as three keyholder instances have (the embedded store's peers are
 * the same map), opened before the enclosing suite's tests and closed after them. Returns the i-th
 * instance (modulo three), so a test can spread its callers over instances by index.
 */
export function useInstances(harness: StoreHarness): (i?: number) => LockStore {
  let instances: LockStore[] = [];
  beforeAll(async () => {
    const first = await harness.open({ fenceGraceMs: 60_000, maxWaitersPerKey: 5 });
    instances = [first, await harness.peer(first), await harness.peer(first)];
  });
  afterAll(async () => {
    for (const store of new Set(instances)) await store.close();
  });
  return (i = 0) => instances[i % instances.length] as LockStore;
}

/**
 * The contract's pauses, on the global timers (not node:timers/promises): where a harness runs the
 * stores on a compressed fake clock (test/mutants/memory-store-fast-clock.ts), these pauses are
 * compressed with it, as are the stores' own lease and wait timers.
 */
export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** "Now" on the clock the harness's store reads (see StoreHarness.clock). */
export const clockOf = (harness: StoreHarness): Clock => harness.clock ?? (() => Date.now());
