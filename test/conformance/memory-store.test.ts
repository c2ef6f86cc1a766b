import { describeStoreContract } from './lock-store.contract.js';
import { memoryHarness } from './memory-harness.js';

describeStoreContract('embedded (memory)', memoryHarness());
