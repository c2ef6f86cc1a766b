import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HistoryRecorder } from '../../src/domain/history.js';
import { createMetrics, type Metrics } from '../../src/observability/metrics.js';
import { RedisHistory } from '../../src/store/redis/redis-history.js';
import { RedisServer } from '../helpers/redis-server.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';

/**
 * Lease history whose store goes away: the leases go on (history is written off the request path), and
 * what history loses is counted (keyholder_history_batches_lost_total, keyholder_history_events_lost_total).
 * The leases live in the embedded store and the history in a Redis of its own, so killing that Redis
 * takes the history's store away and nothing else.
 */
let redis: RedisServer;
let metrics: Metrics;
let t: TestApp;
beforeAll(async () => {
  redis = await RedisServer.start();
  metrics = createMetrics({ defaultMetrics: false });
  const store = new RedisHistory({
    connection: { mode: 'standalone', url: redis.url },
    keyPrefix: 'kh:',
    commandTimeoutMs: 500,
    limits: { eventsPerKey: 50, keysPerNamespace: 5_000, retentionMs: 86_400_000 },
  });
  const history = new HistoryRecorder(store, { flushMs: 5, maxBuffered: 50_000, observer: metrics.historyObserver });
  t = await buildTestApp({ metrics, history });
});
afterAll(async () => {
  await t?.close();
  await redis?.stop();
});

/** A counter's value in the exposition text (one series: its name, or its name and labels). */
async function counter(series: string): Promise<number> {
  const { body } = await metrics.render();
  const line = body.split('\n').find((l) => l.startsWith(`${series} `));
  if (line === undefined) throw new Error(`no ${series} in /metrics`);
  return Number(line.slice(series.length + 1));
}

async function pair(key: string): Promise<void> {
  const acquired = await t.app.inject({ method: 'POST', url: `/v1/locks/${key}/acquire`, payload: { ttlMs: 10_000 } });
  expect(acquired.statusCode, acquired.body).toBe(200);
  const released = await t.app.inject({
    method: 'POST',
    url: `/v1/locks/${key}/release`,
    payload: { ownerToken: acquired.json<{ ownerToken: string }>().ownerToken },
  });
  expect(released.statusCode, released.body).toBe(200);
}

describe('lease history whose store is down', () => {
  it('counts every batch it could not write, and no request fails', async () => {
    await pair('before');
    const written = await t.app.inject({ method: 'GET', url: '/v1/locks/before/history' });
    expect(written.json<{ events: { type: string }[] }>().events.map((e) => e.type)).toEqual(['granted', 'released']);
    expect(await counter('keyholder_history_batches_lost_total')).toBe(0);
    expect(await counter('keyholder_history_events_lost_total{reason="store"}')).toBe(0);

    await redis.kill();
    // Pairs go on while the batches fail (each within the history's 500 ms command timeout, or at once
    // once the connection is seen closed): every answer a 200 (pair() fails the test otherwise), until a
    // loss is counted. The deadline is far above that timeout: a busy machine only makes it slower.
    let pairs = 0;
    const deadline = Date.now() + 20_000;
    while ((await counter('keyholder_history_batches_lost_total')) === 0) {
      if (Date.now() > deadline) throw new Error(`no lost batch counted after ${pairs} pairs`);
      await pair(`during-${++pairs}`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    await t.history?.flush();
    const batches = await counter('keyholder_history_batches_lost_total');
    const events = await counter('keyholder_history_events_lost_total{reason="store"}');
    // Each lost batch held at least one event; no event of these pairs was written anywhere, and each is
    // counted once: a grant and a release, whether folded into one record (a short pair) or not.
    expect(events).toBeGreaterThanOrEqual(batches);
    expect(events).toBe(2 * pairs);
    expect(await counter('keyholder_history_events_lost_total{reason="buffer"}')).toBe(0);
  });
});
