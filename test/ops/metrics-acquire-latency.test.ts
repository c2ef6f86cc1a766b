import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { createMetrics, type Metrics } from '../../src/observability/metrics.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import type { LeaseStore, Store } from '../../src/domain/lease-store.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { histogramPart } from '../helpers/metric-values.js';

/** The store takes STORE_MS to answer each acquire (a slow Redis, a long network path). */
const STORE_MS = 150;

function slowAcquireStore(): Store {
  const inner = new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0 });
  const leases: LeaseStore = {
    ...inner.leases,
    kind: inner.leases.kind,
    acquire: async (request) => {
      await sleep(STORE_MS);
      return inner.leases.acquire(request);
    },
  };
  const store: Store = { kind: inner.kind, leases, ping: () => inner.ping(), close: () => inner.close() };
  return store;
}

/**
 * docs/operations.md: keyholder_acquire_duration_seconds is "the acquire latency: time to answer an
 * acquire minus any time it spent waiting in the key's queue", and keyholder_lock_wait_seconds the
 * "time an acquire with waitMs spent in the key's queue". An acquire with waitMs that finds the key
 * free never queues: its whole answer time is acquire latency, and it spent nothing in a queue.
 */
describe('acquire latency of a waitMs acquire that never queued', () => {
  let metrics: Metrics;
  let t: TestApp;
  beforeAll(async () => {
    metrics = createMetrics({ defaultMetrics: false });
    const store = metrics.instrumentStore(slowAcquireStore());
    t = await buildTestApp({ store, metrics, observer: metrics.lockObserver, limits: DEFAULT_LIMITS });
  });
  afterAll(async () => t?.close());

  for (const [primitive, path, body] of [
    ['lock', 'locks', {}],
    ['semaphore', 'semaphores', { limit: 2 }],
  ] as const) {
    it(`${primitive}: the store's answer time counts as acquire latency, not as time in the queue`, async () => {
      const latency0 = await histogramPart(metrics, 'keyholder_acquire_duration_seconds', 'sum', { primitive });
      const waited0 = await histogramPart(metrics, 'keyholder_lock_wait_seconds', 'sum');
      const res = await t.app.inject({
        method: 'POST',
        url: `/v1/${path}/free-${randomUUID()}/acquire`,
        payload: { ttlMs: 5_000, waitMs: 5_000, ...body },
      });
      expect(res.statusCode).toBe(200);
      const latency = (await histogramPart(metrics, 'keyholder_acquire_duration_seconds', 'sum', { primitive })) - latency0;
      const waited = (await histogramPart(metrics, 'keyholder_lock_wait_seconds', 'sum')) - waited0;
      // Nobody held the key: nothing was spent in its queue, and the whole answer is acquire latency.
      expect(latency).toBeGreaterThanOrEqual((STORE_MS - 10) / 1000);
      expect(waited).toBeLessThan(0.05);
    });
  }
});
