import type { Clock } from '../../src/store/shared/clock.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import type { StoreHarness } from './lock-store.contract.js';

/** The embedded store for the store contract, on the given clock (the monotonic wall clock by default). */
export function memoryHarness(clock?: Clock): StoreHarness {
  return {
    open: async ({ fenceGraceMs, maxWaitersPerKey }) => new MemoryStore({ fenceGraceMs, sweepIntervalMs: 0, maxWaitersPerKey, clock }),
    // One process, one map: every instance of the embedded store is the same store.
    peer: async (store) => store,
    // The embedded store loses everything when its process restarts: a new instance is exactly that.
    loseData: async (store) => {
      await store.close();
      return new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0, clock });
    },
    hasState: async (store, key) => (store as MemoryStore).has(key),
    collect: async (store) => (store as MemoryStore).sweep(),
  };
}
