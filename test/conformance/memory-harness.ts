import { expect, vi } from 'vitest';
import { monotonicWallClock, type Clock } from '../../src/store/shared/clock.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import type { StoreHarness } from './lock-store.contract.js';
import { withWords, type Worded } from '../helpers/store-words.js';

/** The embedded store for the store contract, on the given clock (the monotonic wall clock by default). */
export function memoryHarness(clock?: Clock): StoreHarness {
  const now = clock ?? monotonicWallClock;
  return {
    clock: now,
    open: async ({ fenceGraceMs, maxWaitersPerKey }) =>
      withWords(new MemoryStore({ fenceGraceMs, sweepIntervalMs: 0, maxWaitersPerKey, clock })),
    // One process, one map: every instance of the embedded store is the same store.
    peer: async (store) => store,
    // The embedded store loses everything when its process restarts: a new instance is exactly that.
    loseData: async (store) => {
      await store.close();
      // A restart takes far longer than a millisecond; the fencing floor (the clock, in microseconds) relies on it.
      const closedAt = now();
      await vi.waitFor(() => expect(now()).toBeGreaterThan(closedAt + 1), { interval: 1 });
      return withWords(new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0, clock }));
    },
    hasState: async (store, key) => (store as Worded<MemoryStore>).has(key),
    collect: async (store) => (store as Worded<MemoryStore>).sweep(),
  };
}
