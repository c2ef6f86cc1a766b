import { randomUUID } from 'node:crypto';
import { afterAll } from 'vitest';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { LockHeldError } from '../../src/domain/errors.js';
import type { LeaseAsk, LeaseRefusals } from '../../src/domain/lease-service.js';
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

/** A lock's refusals, as the lock service words them: a busy key, or (never for a lock) a mismatch, as held. */
export const LOCK_REFUSALS: LeaseRefusals = {
  full: (key, retryAfterMs) => new LockHeldError(key, retryAfterMs),
  mismatch: (key, _asked, _live, retryAfterMs) => new LockHeldError(key, retryAfterMs),
};

/** A plain lock acquire through the lease service: one minute, no holder label, no wait. */
export const lockAsk = (namespace: string, key: string): LeaseAsk => ({
  kind: 'lock',
  namespace,
  key,
  capacity: 1,
  weight: 1,
  ttlMs: 60_000,
  holder: null,
  waitMs: 0,
});
