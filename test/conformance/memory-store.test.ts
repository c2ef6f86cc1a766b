import { MemoryHistory } from '../../src/store/memory/memory-history.js';
import { describeHistoryContract } from './history.contract.js';
import { describeStoreContract } from './lock-store.contract.js';
import { memoryHarness } from './memory-harness.js';

// The production clock: the contract reads the same one (memoryHarness sets the harness's clock).
describeStoreContract('embedded (memory)', memoryHarness());

describeHistoryContract('embedded (memory)', {
  open: async (limits) => new MemoryHistory(limits),
  stored: async (store, key) => await (store as MemoryHistory).stored(key),
  keysKept: (keysPerNamespace) => keysPerNamespace,
});
