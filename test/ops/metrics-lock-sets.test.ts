import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { createMetrics, type Metrics } from '../../src/observability/metrics.js';
import { embeddedAndRedis } from '../helpers/both-stores.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';

/** One sample's name and labels as the exposition text writes them, e.g. `name{a="b",c="d"}`. */
function sampleOf(name: string, labels: Record<string, string>): string {
  const entries = Object.entries(labels);
  return entries.length === 0 ? name : `${name}{${entries.map(([k, v]) => `${k}="${v}"`).join(',')}}`;
}

/**
 * docs/operations.md, Metrics: a lock set's acquires, renewals and releases are counted under
 * primitive="lock_set" (keyholder_primitive_operations_total, its duration, the acquire latency), its
 * waits in keyholder_lock_wait_seconds, and each key of a set is one lease in keyholder_locks_held,
 * keyholder_lock_hold_seconds and keyholder_leases_expired_total, whichever route ends it. Read from the
 * text GET /metrics serves, as Prometheus would.
 */
describe.each(embeddedAndRedis('metrics-lock-sets'))('%s store: lock sets in /metrics', (_name, makeStore) => {
  let metrics: Metrics;
  let t: TestApp;
  beforeAll(async () => {
    metrics = createMetrics({ defaultMetrics: false });
    const store = metrics.instrumentStore(await makeStore());
    t = await buildTestApp({ store, metrics, observer: metrics.lockObserver, limits: DEFAULT_LIMITS, history: null });
    metrics.countWaitingCallers(() => t.locks.waitingCallers);
  });
  afterAll(async () => t?.close());

  const post = (url: string, payload: object) => t.app.inject({ method: 'POST', url, payload });
  const scrape = async (): Promise<string> => {
    const res = await t.app.inject({ method: 'GET', url: '/metrics' });
    expect(res.statusCode).toBe(200);
    return res.body;
  };
  /** A sample's value in the scraped text; 0 when the series is not there (yet). */
  const value = async (name: string, labels: Record<string, string> = {}): Promise<number> => {
    const wanted = `${sampleOf(name, labels)} `;
    const line = (await scrape()).split('\n').find((l) => l.startsWith(wanted));
    return line === undefined ? 0 : Number(line.slice(wanted.length).split(' ')[0]);
  };
  const ops = (operation: string, outcome: string) =>
    value('keyholder_primitive_operations_total', { primitive: 'lock_set', operation, outcome });
  const held = () => value('keyholder_locks_held');
  const keysOf = (n: number) => Array.from({ length: n }, (_, i) => `set-${i}-${randomUUID()}`);

  it('counts every set operation under primitive="lock_set", with its latency, and not as lock operations', async () => {
    const lockOps0 = await value('keyholder_lock_operations_total', { operation: 'acquire', outcome: 'acquired' });
    const [acquired0, held0, renewed0, released0, notOwner0] = await Promise.all([
      ops('acquire', 'acquired'),
      ops('acquire', 'held'),
      ops('renew', 'renewed'),
      ops('release', 'released'),
      ops('release', 'not_owner'),
    ]);
    const latency = (operation: string) =>
      value('keyholder_primitive_operation_duration_seconds_count', { primitive: 'lock_set', operation });
    const acquireLatency0 = await value('keyholder_acquire_duration_seconds_count', { primitive: 'lock_set' });
    const [acquireSeconds0, renewSeconds0, releaseSeconds0] = [await latency('acquire'), await latency('renew'), await latency('release')];

    const keys = keysOf(3);
    const granted = await post('/v1/lock-sets/acquire', { keys, ttlMs: 10_000 });
    expect(granted.statusCode).toBe(200);
    const { ownerToken } = granted.json<{ ownerToken: string }>();
    expect((await post('/v1/lock-sets/acquire', { keys: [keys[1], `other-${randomUUID()}`], ttlMs: 10_000 })).statusCode).toBe(409);
    expect((await post('/v1/lock-sets/renew', { keys, ownerToken, ttlMs: 10_000 })).statusCode).toBe(200);
    expect((await post('/v1/lock-sets/release', { keys, ownerToken })).statusCode).toBe(200);
    expect((await post('/v1/lock-sets/release', { keys, ownerToken })).statusCode).toBe(409);

    expect(await ops('acquire', 'acquired')).toBe(acquired0 + 1);
    expect(await ops('acquire', 'held')).toBe(held0 + 1);
    expect(await ops('renew', 'renewed')).toBe(renewed0 + 1);
    expect(await ops('release', 'released')).toBe(released0 + 1);
    expect(await ops('release', 'not_owner')).toBe(notOwner0 + 1);
    expect(await latency('acquire')).toBe(acquireSeconds0 + 2);
    expect(await latency('renew')).toBe(renewSeconds0 + 1);
    expect(await latency('release')).toBe(releaseSeconds0 + 2);
    expect(await value('keyholder_acquire_duration_seconds_count', { primitive: 'lock_set' })).toBe(acquireLatency0 + 2);
    // Counted once, as a set: not as lock acquires too.
    expect(await value('keyholder_lock_operations_total', { operation: 'acquire', outcome: 'acquired' })).toBe(lockOps0);
  });

  it("counts a set's wait for a busy key in the wait histogram, not in its acquire latency", async () => {
    const [busy, free] = keysOf(2);
    const lock = await post(`/v1/locks/${busy}/acquire`, { ttlMs: 10_000 });
    expect(lock.statusCode).toBe(200);
    const waits = (outcome: string) => value('keyholder_lock_wait_seconds_count', { outcome });
    const [granted0, notGranted0] = [await waits('granted'), await waits('not_granted')];
    const waitSum = (outcome: string) => value('keyholder_lock_wait_seconds_sum', { outcome });
    const latencySum = () => value('keyholder_acquire_duration_seconds_sum', { primitive: 'lock_set' });
    const durationSum = () => value('keyholder_primitive_operation_duration_seconds_sum', { primitive: 'lock_set', operation: 'acquire' });
    const [grantedSum0, notGrantedSum0] = [await waitSum('granted'), await waitSum('not_granted')];
    const [latencySum0, durationSum0] = [await latencySum(), await durationSum()];

    // Runs out while the key stays held.
    expect((await post('/v1/lock-sets/acquire', { keys: [busy, free], ttlMs: 10_000, waitMs: 100 })).statusCode).toBe(409);
    expect(await waits('not_granted')).toBe(notGranted0 + 1);

    // Granted once the key is released.
    const waiting = post('/v1/lock-sets/acquire', { keys: [busy, free], ttlMs: 10_000, waitMs: 10_000 });
    await vi.waitFor(async () => expect(await value('keyholder_waiting_callers')).toBe(1), { timeout: 5_000, interval: 20 });
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect((await post(`/v1/locks/${busy}/release`, { ownerToken: lock.json().ownerToken })).statusCode).toBe(200);
    const set = await waiting;
    expect(set.statusCode).toBe(200);
    expect(await waits('granted')).toBe(granted0 + 1);
    // The refused set waited out its 100 ms; the granted one waited until the release.
    const waitedOut = (await waitSum('not_granted')) - notGrantedSum0;
    const waitedForKey = (await waitSum('granted')) - grantedSum0;
    expect(waitedOut).toBeGreaterThanOrEqual(0.09);
    expect(waitedForKey).toBeGreaterThan(0);
    // Each acquire's time is its wait plus its latency (the store round trips): the wait is not latency.
    const latency = (await latencySum()) - latencySum0;
    expect((await durationSum()) - durationSum0).toBeCloseTo(waitedOut + waitedForKey + latency, 6);
    expect((await post('/v1/lock-sets/release', { keys: [busy, free], ownerToken: set.json().ownerToken })).statusCode).toBe(200);
  });

  it('holds one lease per key: a key released through the lock route leaves the others held', async () => {
    const held0 = await held();
    const holds0 = await value('keyholder_lock_hold_seconds_count');
    const keys = keysOf(3);
    const granted = await post('/v1/lock-sets/acquire', { keys, ttlMs: 10_000 });
    expect(granted.statusCode).toBe(200);
    const { ownerToken } = granted.json<{ ownerToken: string }>();
    expect(await held()).toBe(held0 + 3);

    // One key given back on its own, with the set's owner token: the two others are still held.
    expect((await post(`/v1/locks/${keys[0]}/release`, { ownerToken })).statusCode).toBe(200);
    expect((await t.app.inject({ method: 'GET', url: `/v1/locks/${keys[1]}` })).json()).toMatchObject({ held: true });
    expect(await held()).toBe(held0 + 2);
    expect(await value('keyholder_lock_hold_seconds_count')).toBe(holds0 + 1);

    // A force release of another key takes that one key.
    expect((await t.app.inject({ method: 'DELETE', url: `/v1/locks/${keys[1]}?namespace=default` })).statusCode).toBe(200);
    expect(await held()).toBe(held0 + 1);

    // The set's release frees what is left.
    expect((await post('/v1/lock-sets/release', { keys, ownerToken })).statusCode).toBe(200);
    expect(await held()).toBe(held0);
    expect(await value('keyholder_lock_hold_seconds_count')).toBe(holds0 + 2);
  });

  it('expires each key of a set on its own lease end: a key renewed through the lock route outlives the others', async () => {
    const held0 = await held();
    const expired0 = await value('keyholder_leases_expired_total');
    const keys = keysOf(2);
    const granted = await post('/v1/lock-sets/acquire', { keys, ttlMs: 1_500 });
    expect(granted.statusCode).toBe(200);
    const { ownerToken } = granted.json<{ ownerToken: string }>();
    expect((await post(`/v1/locks/${keys[0]}/renew`, { ownerToken, ttlMs: 20_000 })).statusCode).toBe(200);

    // The other key runs out (its lease end, plus the tracker's sweep): one lease expired, one still held.
    await vi.waitFor(async () => expect(await value('keyholder_leases_expired_total')).toBe(expired0 + 1), {
      timeout: 10_000,
      interval: 100,
    });
    expect(await held()).toBe(held0 + 1);
    expect((await t.app.inject({ method: 'GET', url: `/v1/locks/${keys[0]}` })).json()).toMatchObject({ held: true });

    expect((await post(`/v1/locks/${keys[0]}/release`, { ownerToken })).statusCode).toBe(200);
    expect(await held()).toBe(held0);
    expect(await value('keyholder_leases_expired_total')).toBe(expired0 + 1);
  });
});
