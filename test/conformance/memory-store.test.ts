import { performance } from 'node:perf_hooks';
import { MemoryHistory } from '../../src/store/memory/memory-history.js';
import { describeHistoryContract } from './history.contract.js';
import { describeStoreContract } from './lock-store.contract.js';
import { memoryHarness } from './memory-harness.js';

/**
 * The contract compares the store's lease ends with Date.now(), as it does for Redis (whose TIME is this
 * machine's wall clock). The production clock (monotonic time since process start, on the wall clock at
 * start) drifts from Date.now() while the wall clock is being slewed: 135 ppm was measured on a CI VM,
 * 70 ms over one test worker's life, enough to fail "retry after at most the lease's end". So the
 * contract runs the embedded store on the wall clock, kept from stepping back. Date.now() is whole
 * milliseconds, though, and fencing tokens are floored at microseconds: a "restart" (a new instance) in
 * the same millisecond as a burst of grants would start below them, which no real restart can do. The
 * sub-millisecond part from performance.now() gives the clock the production clock's resolution.
 */
let last = 0;
const wallClock = (): number => (last = Math.max(last, Date.now() + (performance.now() % 1)));

describeStoreContract('embedded (memory)', memoryHarness(wallClock));

describeHistoryContract('embedded (memory)', {
  open: async (limits) => new MemoryHistory(limits),
  stored: async (store, key) => await (store as MemoryHistory).stored(key),
  keysKept: (keysPerNamespace) => keysPerNamespace,
});
