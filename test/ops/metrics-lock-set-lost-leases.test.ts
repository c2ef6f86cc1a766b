import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { randomUUID } from 'node:crypto';
import { createMetrics, type Metrics } from '../../src/observability/metrics.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { metricValue } from '../helpers/metric-values.js';

/**
 * docs/operations.md: keyholder_lost_leases_total counts "renews or releases that came after the lease
 * was gone ... The caller's critical section ran unprotected. The alarm to watch" (and
 * KeyholderLostLeases alerts on it). A lock set's lease that ran out is such a lease: its holder's
 * renew or release comes after it, answered 409 not_owner, as a single lock's is.
 */
describe('a lock set whose lease ran out', () => {
  let metrics: Metrics;
  let t: TestApp;
  beforeAll(async () => {
    metrics = createMetrics({ defaultMetrics: false });
    const store = metrics.instrumentStore(new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0 }));
    t = await buildTestApp({ store, metrics, observer: metrics.lockObserver, limits: DEFAULT_LIMITS });
  });
  afterAll(async () => t?.close());
  const post = (url: string, payload: object) => t.app.inject({ method: 'POST', url, payload });

  it('counts its late renew and its late release as lost leases, as a lock would', async () => {
    const keys = [`a-${randomUUID()}`, `b-${randomUUID()}`];
    const granted = await post('/v1/lock-sets/acquire', { keys, ttlMs: 200 });
    expect(granted.statusCode).toBe(200);
    const { ownerToken } = granted.json<{ ownerToken: string }>();
    // The lease runs out (the store says so: another caller can take a key).
    await vi.waitFor(async () => expect((await post(`/v1/locks/${keys[0]}/acquire`, { ttlMs: 5_000 })).statusCode).toBe(200), {
      timeout: 5_000,
      interval: 50,
    });
    const lost = (operation: string) => metricValue(metrics, 'keyholder_lost_leases_total', { operation });
    const [renew0, release0] = [await lost('renew'), await lost('release')];
    expect((await post('/v1/lock-sets/renew', { keys, ownerToken, ttlMs: 5_000 })).statusCode).toBe(409);
    expect((await post('/v1/lock-sets/release', { keys, ownerToken })).statusCode).toBe(409);
    expect(await lost('renew')).toBe(renew0 + 1);
    expect(await lost('release')).toBe(release0 + 1);
  });
});
