import { randomUUID } from 'node:crypto';
import { afterAll } from 'vitest';
import { DEFAULT_LIMITS } from '../../src/config.js';
import type { LeaseLimits } from '../../src/domain/limits.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';

/** The domain services' limits for in-process tests: the defaults, with TTLs as short as a test wants. */
export const LIMITS: LeaseLimits = { ...DEFAULT_LIMITS, minTtlMs: 1 };

/** A namespace of its own for each test, so tests sharing one store never see each other's keys. */
export const uniqueNamespace = (): string => `ns-${randomUUID().slice(0, 8)}`;

/**
 * One embedded store for a test file's in-process domain tests, closed after them. It sweeps nothing on
 * its own (sweepIntervalMs 0): leases end when a test makes them end, not when a timer happens to run.
 */
export function embeddedStoreForFile(): MemoryStore {
  const store = new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0 });
  afterAll(() => store.close());
  return store;
}
