import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { randomUUID } from 'node:crypto';
import { createMetrics, type Metrics } from '../../src/observability/metrics.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { histogramPart } from '../helpers/metric-values.js';
import { threeStores } from '../helpers/three-stores.js';

/**
 * keyholder_lock_wait_seconds is the time an acquire with waitMs spent in the key's queue, and
 * keyholder_acquire_duration_seconds the acquire's time less that. On every store: an acquire with
 * waitMs that finds its key free spends nothing in a queue (its store round trip is acquire latency),
 * and one handed the key after waiting spends its wait there.
 */
describe.each(threeStores('wait-split'))('%s store', (_name, makeStore) => {
  let metrics: Metrics;
  let t: TestApp;
  beforeAll(async () => {
    metrics = createMetrics({ defaultMetrics: false });
    const store = metrics.instrumentStore(await makeStore());
    t = await buildTestApp({ store, metrics, observer: metrics.lockObserver, limits: DEFAULT_LIMITS });
    metrics.countWaitingCallers(() => t.locks.waitingCallers);
  });
  afterAll(async () => t?.close());
  const post = (url: string, payload: object) => t.app.inject({ method: 'POST', url, payload });
  const waited = () => histogramPart(metrics, 'keyholder_lock_wait_seconds', 'sum');

  for (const [primitive, path, body] of [
    ['lock', 'locks', {}],
    ['semaphore', 'semaphores', { limit: 1 }],
    ['rwlock', 'rwlocks', { mode: 'write' }],
  ] as const) {
    it(`${primitive}: a free key's waitMs acquire adds nothing to the wait; a queued one adds its wait`, async () => {
      const key = `k-${randomUUID()}`;
      const waited0 = await waited();
      const latency0 = await histogramPart(metrics, 'keyholder_acquire_duration_seconds', 'sum', { primitive });
      const first = await post(`/v1/${path}/${key}/acquire`, { ttlMs: 10_000, waitMs: 5_000, ...body });
      expect(first.statusCode).toBe(200);
      expect(await waited()).toBe(waited0);
      expect(await histogramPart(metrics, 'keyholder_acquire_duration_seconds', 'sum', { primitive })).toBeGreaterThan(latency0);

      const queued = post(`/v1/${path}/${key}/acquire`, { ttlMs: 10_000, waitMs: 10_000, ...body });
      await vi.waitFor(async () => {
        const gauge = await metrics.registry.getSingleMetric('keyholder_waiting_callers')!.get();
        expect(gauge.values[0]?.value).toBe(1);
      });
      await new Promise((r) => setTimeout(r, 200));
      expect((await post(`/v1/${path}/${key}/release`, { ownerToken: first.json().ownerToken })).statusCode).toBe(200);
      const second = await queued;
      expect(second.statusCode).toBe(200);
      expect((await waited()) - waited0).toBeGreaterThanOrEqual(0.19);
      await post(`/v1/${path}/${key}/release`, { ownerToken: second.json().ownerToken });
    });
  }
});
