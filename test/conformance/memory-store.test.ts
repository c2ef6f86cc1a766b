import { MemoryStore } from '../../src/store/memory/memory-store.js';
import { describeStoreContract } from './lock-store.contract.js';

describeStoreContract('embedded (memory)', {
  open: async ({ fenceGraceMs, maxWaitersPerKey }) => new MemoryStore({ fenceGraceMs, sweepIntervalMs: 0, maxWaitersPerKey }),
  // One process, one map: every instance of the embedded store is the same store.
  peer: async (store) => store,
  // The embedded store loses everything when its process restarts: a new instance is exactly that.
  loseData: async (store) => {
    await store.close();
    return new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0 });
  },
  hasState: async (store, key) => (store as MemoryStore).has(key),
  collect: async (store) => (store as MemoryStore).sweep(),
});
