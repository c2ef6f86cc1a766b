import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { buildApp } from '../../src/app.js';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { LockService } from '../../src/domain/lock-service.js';
import { createLogger } from '../../src/observability/logger.js';
import { createMetrics, type Metrics } from '../../src/observability/metrics.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import type { Store } from '../../src/domain/lease-store.js';
import { histogramPart } from '../helpers/metric-values.js';
import { RedisServer } from '../helpers/redis-server.js';
import { requireTool } from '../helpers/tools.js';
import { setTimeout as sleep } from 'node:timers/promises';

/** The value of one series in the registry (0 when it does not exist yet). */
async function value(metrics: Metrics, name: string, labels: Record<string, string> = {}): Promise<number> {
  const metric = metrics.registry.getSingleMetric(name);
  if (!metric) throw new Error(`no metric named ${name}`);
  const { values } = await metric.get();
  const match = values.find(
    (v) =>
      ((v as { metricName?: string }).metricName ?? name) === name &&
      Object.entries(labels).every(([k, want]) => String((v.labels as Record<string, unknown>)[k]) === want),
  );
  return match?.value ?? 0;
}

async function until(check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  await vi.waitFor(
    async () => {
      if (!(await check())) throw new Error(`condition not met within ${timeoutMs} ms`);
    },
    { timeout: timeoutMs, interval: 50 },
  );
}

describe('metrics over a real Redis', () => {
  let redis: RedisServer;
  let metrics: Metrics;
  let store: Store;
  let app: FastifyInstance;
  const key = (name: string) => `metrics-${randomUUID()}-${name}`;
  const post = (path: string, body: unknown) => app.inject({ method: 'POST', url: path, payload: body as object });

  beforeAll(async () => {
    redis = await RedisServer.start();
    metrics = createMetrics();
    store = metrics.instrumentStore(
      new RedisStore({ url: redis.url, keyPrefix: `kh-metrics-${randomUUID()}:`, commandTimeoutMs: 500, fenceGraceMs: 60_000 }),
    );
    await until(
      async () =>
        store.ping().then(
          () => true,
          () => false,
        ),
      10_000,
    );
    const locks = new LockService(store, DEFAULT_LIMITS, metrics.lockObserver);
    metrics.countWaitingCallers(() => locks.waitingCallers);
    app = await buildApp({ locks, store, logger: createLogger('silent'), metrics });
    await app.ready();
  });

  afterAll(async () => {
    await app?.close();
    await store?.close();
    await redis?.stop();
  });

  it('counts operations by outcome, hold time, held leases and lost leases', async () => {
    const k = key('cycle');
    const granted = await post(`/v1/locks/${k}/acquire`, { ttlMs: 5_000 });
    expect(granted.statusCode).toBe(200);
    const { ownerToken } = granted.json<{ ownerToken: string }>();
    expect(await value(metrics, 'keyholder_locks_held')).toBe(1);

    expect((await post(`/v1/locks/${k}/acquire`, { ttlMs: 5_000 })).statusCode).toBe(409);
    expect((await post(`/v1/locks/${k}/renew`, { ownerToken, ttlMs: 5_000 })).statusCode).toBe(200);
    expect((await post(`/v1/locks/${k}/release`, { ownerToken })).statusCode).toBe(200);
    expect((await post(`/v1/locks/${k}/renew`, { ownerToken, ttlMs: 5_000 })).statusCode).toBe(409);
    expect((await post(`/v1/locks/${k}/release`, { ownerToken })).statusCode).toBe(409);
    expect((await post(`/v1/locks/${k}/acquire`, { ttlMs: 1 })).statusCode).toBe(400);

    const ops = 'keyholder_lock_operations_total';
    expect(await value(metrics, ops, { operation: 'acquire', outcome: 'acquired' })).toBe(1);
    expect(await value(metrics, ops, { operation: 'acquire', outcome: 'held' })).toBe(1);
    expect(await value(metrics, ops, { operation: 'acquire', outcome: 'invalid' })).toBe(1);
    expect(await value(metrics, ops, { operation: 'renew', outcome: 'renewed' })).toBe(1);
    expect(await value(metrics, ops, { operation: 'renew', outcome: 'not_owner' })).toBe(1);
    expect(await value(metrics, ops, { operation: 'release', outcome: 'released' })).toBe(1);
    expect(await value(metrics, ops, { operation: 'release', outcome: 'not_owner' })).toBe(1);
    expect(await value(metrics, 'keyholder_lost_leases_total', { operation: 'renew' })).toBe(1);
    expect(await value(metrics, 'keyholder_lost_leases_total', { operation: 'release' })).toBe(1);
    expect(await value(metrics, 'keyholder_locks_held')).toBe(0);
  });

  it('counts every error answer by code, 404 included', async () => {
    const problems = 'keyholder_problems_total';
    const before = {
      notFound: await value(metrics, problems, { code: 'not_found' }),
      invalid: await value(metrics, problems, { code: 'invalid_request' }),
      held: await value(metrics, problems, { code: 'lock_held' }),
    };
    expect((await app.inject({ method: 'GET', url: '/no/such/route' })).statusCode).toBe(404);
    expect((await post(`/v1/locks/${key('p')}/acquire`, { ttlMs: 'x' })).statusCode).toBe(400);
    const k = key('held');
    const { ownerToken } = (await post(`/v1/locks/${k}/acquire`, { ttlMs: 5_000 })).json<{ ownerToken: string }>();
    expect((await post(`/v1/locks/${k}/acquire`, { ttlMs: 5_000 })).statusCode).toBe(409);
    await post(`/v1/locks/${k}/release`, { ownerToken });
    expect(await value(metrics, problems, { code: 'not_found' })).toBe(before.notFound + 1);
    expect(await value(metrics, problems, { code: 'invalid_request' })).toBe(before.invalid + 1);
    expect(await value(metrics, problems, { code: 'lock_held' })).toBe(before.held + 1);
    // Every code is there from the start.
    expect((await metrics.render()).body).toContain('keyholder_problems_total{code="forbidden"} 0');
  });

  it('observes the hold time at release and the acquire latency', async () => {
    const before = await histogramCount(metrics, 'keyholder_lock_hold_seconds');
    const sumBefore = await histogramPart(metrics, 'keyholder_lock_hold_seconds', 'sum');
    const storeReleases = () =>
      histogramCount(metrics, 'keyholder_store_operation_duration_seconds', { operation: 'release', result: 'ok' });
    const releasesBefore = await storeReleases();
    const k = key('hold');
    const { ownerToken } = (await post(`/v1/locks/${k}/acquire`, { ttlMs: 5_000 })).json<{ ownerToken: string }>();
    await sleep(50);
    await post(`/v1/locks/${k}/release`, { ownerToken });
    expect(await histogramCount(metrics, 'keyholder_lock_hold_seconds')).toBe(before + 1);
    // The store's release is timed as its own operation, once.
    expect(await storeReleases()).toBe(releasesBefore + 1);
    // A lower bound only: the lock was held for at least the 50 ms sleep, however slow the machine.
    expect((await histogramPart(metrics, 'keyholder_lock_hold_seconds', 'sum')) - sumBefore).toBeGreaterThanOrEqual(0.045);
    expect(await histogramCount(metrics, 'keyholder_lock_operation_duration_seconds', { operation: 'acquire' })).toBeGreaterThan(0);
    expect(
      await histogramCount(metrics, 'keyholder_store_operation_duration_seconds', { operation: 'acquire', result: 'ok' }),
    ).toBeGreaterThan(0);
  });

  it('leaves the time in the queue out of the acquire latency (keyholder_acquire_duration_seconds)', async () => {
    const sum = (name: string, labels: Record<string, string>) => histogramPart(metrics, name, 'sum', labels);
    const latency = () => sum('keyholder_acquire_duration_seconds', { primitive: 'lock' });
    const answered = () => sum('keyholder_lock_operation_duration_seconds', { operation: 'acquire' });
    const waited = () => sum('keyholder_lock_wait_seconds', {});
    const [latency0, answered0, waited0] = [await latency(), await answered(), await waited()];

    const k = key('queued');
    const { ownerToken } = (await post(`/v1/locks/${k}/acquire`, { ttlMs: 5_000 })).json<{ ownerToken: string }>();
    const queued = post(`/v1/locks/${k}/acquire`, { ttlMs: 5_000, waitMs: 10_000 });
    await until(async () => (await value(metrics, 'keyholder_waiting_callers')) === 1, 10_000);
    await sleep(200);
    await post(`/v1/locks/${k}/release`, { ownerToken });
    const granted = await queued;
    expect(granted.statusCode).toBe(200);
    await post(`/v1/locks/${k}/release`, { ownerToken: granted.json<{ ownerToken: string }>().ownerToken });

    const waitedSeconds = (await waited()) - waited0;
    // A lower bound only: the caller was queued for at least the 200 ms sleep.
    expect(waitedSeconds).toBeGreaterThanOrEqual(0.19);
    // Each acquire's latency is its time to answer minus its wait, so the sums differ by the wait exactly.
    expect((await latency()) - latency0).toBeCloseTo((await answered()) - answered0 - waitedSeconds, 6);
    expect((await latency()) - latency0).toBeLessThan(waitedSeconds);
  });

  it('drops a lease from locks_held when it expires unreleased', async () => {
    const expiredBefore = await value(metrics, 'keyholder_leases_expired_total');
    expect((await post(`/v1/locks/${key('expire')}/acquire`, { ttlMs: 150 })).statusCode).toBe(200);
    expect(await value(metrics, 'keyholder_locks_held')).toBe(1);
    await until(async () => (await value(metrics, 'keyholder_locks_held')) === 0, 5_000);
    expect(await value(metrics, 'keyholder_leases_expired_total')).toBe(expiredBefore + 1);
  });

  it('serves /metrics in a format promtool accepts', async () => {
    requireTool('promtool', 'prometheus');
    const res = await app.inject({ method: 'GET', url: '/metrics' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(res.body).toContain('process_cpu_seconds_total');
    expect(res.body).toContain('nodejs_eventloop_lag_seconds');
    const check = spawnSync('promtool', ['check', 'metrics'], { input: res.body, encoding: 'utf8' });
    expect(check.stdout + check.stderr).toBe('');
    expect(check.status).toBe(0);
  });

  it('builds any number of apps in one process (one registry each)', () => {
    expect(() => [createMetrics(), createMetrics()]).not.toThrow();
  });

  it('reports store_up 0 while Redis is down and 1 once it is back', async () => {
    const scrape = async () => (await app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(await scrape()).toContain('keyholder_store_up{store="redis"} 1');
    await redis.kill();
    expect(await scrape()).toContain('keyholder_store_up{store="redis"} 0');
    expect((await post(`/v1/locks/${key('down')}/acquire`, { ttlMs: 1_000 })).statusCode).toBe(503);
    expect(await value(metrics, 'keyholder_lock_operations_total', { operation: 'acquire', outcome: 'error' })).toBe(1);
    expect(
      await histogramCount(metrics, 'keyholder_store_operation_duration_seconds', { operation: 'acquire', result: 'unavailable' }),
    ).toBe(1);
    await redis.launch();
    await until(async () => (await scrape()).includes('keyholder_store_up{store="redis"} 1'), 15_000);
  });
});

function histogramCount(metrics: Metrics, name: string, labels: Record<string, string> = {}): Promise<number> {
  return histogramPart(metrics, name, 'count', labels);
}
