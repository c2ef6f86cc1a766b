import { MemoryHistory } from '../../src/store/memory/memory-history.js';
import { describeHistoryContract } from '../conformance/history.contract.js';

/**
 * The history contract on the embedded store, for StrykerJS's `memory` part only
 * (test/mutants/vitest.config.ts): test/conformance/memory-store.test.ts runs the same contract in
 * `npm test`, but beside the whole lock store contract on the real clock, which the part replaces
 * with memory-store-fast-clock.ts.
 */
describeHistoryContract('embedded (memory)', {
  open: async (limits) => new MemoryHistory(limits),
  stored: async (store, key) => await (store as MemoryHistory).stored(key),
  keysKept: (keysPerNamespace) => keysPerNamespace,
});
