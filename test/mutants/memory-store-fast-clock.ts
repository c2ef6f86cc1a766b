import { afterAll, beforeAll, vi } from 'vitest';
import { describeStoreContract } from '../conformance/lock-store.contract.js';
import { memoryHarness } from '../conformance/memory-harness.js';

/**
 * The store contract on the embedded store, on a compressed clock: StrykerJS's selection
 * (test/mutants/vitest.config.ts) runs this instead of test/conformance/memory-store.test.ts, which
 * stays in `npm test` on the real clock, unchanged.
 *
 * The timers, Date and performance are vitest's fake ones, and a real timer moves them on by
 * STEP_MS every real millisecond or so: every lease, wait and pause of the contract then passes about
 * ten times faster, in the same order, with the same margins in fake milliseconds. The store's clock
 * is the fake Date (through its clock seam, see compressedClock), so leases end on the same clock the timers run on. The contract
 * spends most of its time in such waits (about 11 s on the real clock), and a mutant that survives
 * runs all of it.
 */
const STEP_MS = 10;
const realSetInterval = globalThis.setInterval;
const realClearInterval = globalThis.clearInterval;
let ticker: ReturnType<typeof setInterval> | undefined;

beforeAll(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date', 'performance'], now: Date.now() });
  ticker = realSetInterval(() => vi.advanceTimersByTime(STEP_MS), 1);
});
afterAll(() => {
  realClearInterval(ticker);
  // The runner shares one module cache across files (isolate: false): the next file gets real timers.
  vi.useRealTimers();
});

/**
 * The fake Date, moved on by a microsecond at every read when it has not moved otherwise: the real
 * clock (with its fractional milliseconds) never reads the same twice across a burst of grants, and the
 * contract's "tokens keep increasing after data loss" counts on time passing, as it does in production.
 */
let lastMs = 0;
const compressedClock = () => (lastMs = Math.max(Date.now(), lastMs + 0.001));

describeStoreContract('embedded (memory), compressed clock', memoryHarness(compressedClock));
