import { describe, expect, it } from 'vitest';
import { OverloadedError, StoreUnavailableError } from '../../src/domain/errors.js';
import { createMetrics } from '../../src/observability/metrics.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import { withWords } from '../helpers/store-words.js';
import { withLeases } from '../helpers/with-leases.js';

/**
 * An acquire the Redis store could not send in time (its acquire lane was full: script-lane.ts) is a
 * request shed before any store work, so it counts in keyholder_requests_shed_total{budget="store_queue"}
 * beside the HTTP layer's budgets; other store errors do not.
 */
describe('keyholder_requests_shed_total{budget="store_queue"}', () => {
  it('counts a store call refused by its queue to the store, and nothing else', async () => {
    const metrics = createMetrics();
    const answers: Error[] = [new OverloadedError('store_queue', 1000, 'queue to the store full'), new StoreUnavailableError('down')];
    const inner = withLeases(new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0 }), () => ({
      acquire: () => Promise.reject(answers.shift() ?? new Error('no answer left')),
    }));
    const store = withWords(metrics.instrumentStore(inner));
    const input = { id: 'ns/k', ownerToken: 'o', ttlMs: 1000, holder: null };
    const shed = async () => {
      const text = await metrics.registry.metrics();
      const line = text.split('\n').find((l) => l.startsWith('keyholder_requests_shed_total{budget="store_queue",priority="normal"}'));
      return Number(line?.split(' ')[1]);
    };
    expect(await shed()).toBe(0);
    await expect(store.acquire(input)).rejects.toBeInstanceOf(OverloadedError);
    expect(await shed()).toBe(1);
    await expect(store.acquire(input)).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(await shed()).toBe(1);
    await store.close();
  });
});
