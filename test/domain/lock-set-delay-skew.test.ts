import { describe, expect, it } from 'vitest';
import { LeaseService } from '../../src/domain/lease-service.js';
import type { LeaseAcquire, LeaseStore } from '../../src/domain/lease-store.js';
import { lockId } from '../../src/domain/namespaces.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import { LIMITS } from '../helpers/embedded-domain.js';

/**
 * A lock set waiting on a key whose lock-delay runs, with the store's clock apart from this instance's
 * (Redis's TIME on another host, or an instance whose clock NTP has moved): the delay's end is a time on
 * the store's clock, so this instance cannot tell from its own clock how long is left. Read against its
 * own clock while that clock was ahead, the delay seemed over, and the set asked the store again about
 * every millisecond until it ended (some 230 acquires for a 300 ms delay). It waits the time the store's
 * own refusal gives instead.
 */
const DELAY_MS = 300;

describe('a lock set waiting out a lock-delay, the store clock apart from the instance clock', () => {
  for (const behindMs of [0, 500, -500]) {
    it(`asks the store a few times, not once a millisecond (store clock ${behindMs} ms behind)`, async () => {
      const store = new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0, clock: () => Date.now() - behindMs });
      const inner = store.leases;
      let setAcquires = 0;
      const leases: LeaseStore = Object.create(inner) as LeaseStore;
      Object.assign(leases, {
        acquire: (request: LeaseAcquire) => {
          if (request.ids.length > 1) setAcquires++;
          return inner.acquire(request);
        },
      });
      const service = new LeaseService(leases, LIMITS);
      try {
        // A lease of 1 ms with a lock-delay: by the time the set asks, it has expired and its delay runs.
        const first = { kind: 'lock' as const, ids: [lockId('ns', 'a')], capacity: 1, weight: 1, holder: null };
        await inner.acquire({ ...first, ownerToken: 'a'.repeat(22), ttlMs: 1, lockDelayMs: DELAY_MS });
        const set = await service.acquireSet({
          namespace: 'ns',
          keys: ['a', 'b'],
          ttlMs: 60_000,
          holder: null,
          waitMs: 5_000,
          lockDelayMs: 0,
        });
        expect(set.locks.map((l) => l.key)).toEqual(['a', 'b']);
        expect(setAcquires).toBeLessThanOrEqual(6);
      } finally {
        service.shutdown();
        await store.close();
      }
    });
  }
});
