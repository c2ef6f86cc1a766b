import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { call, KeyholderProcess } from '../helpers/keyholder-process.js';
import { RedisServer } from '../helpers/redis-server.js';

/** Waiting across real keyholder processes on one Redis: FIFO across instances, and a dead instance's waiter. */
let redis: RedisServer;
const instances: KeyholderProcess[] = [];

beforeAll(async () => {
  redis = await RedisServer.start();
  instances.push(...(await Promise.all([0, 1, 2].map(() => KeyholderProcess.start({ env: { REDIS_URL: redis.url, LOG_LEVEL: 'warn' } })))));
}, 180_000);
afterAll(async () => {
  await Promise.all(instances.map((i) => i.stop('SIGKILL')));
  await redis.stop();
});

const url = (i: number) => (instances[i % instances.length] as KeyholderProcess).url;

/** Waits until the lock's inspect answer counts `count` waiters (a condition, not a sleep). */
async function waitForWaiters(key: string, count: number, timeout = 10_000): Promise<void> {
  await vi.waitFor(
    async () => {
      const waiters = (await call(url(0), 'GET', `/v1/locks/${key}`)).body.waiters;
      if (waiters !== count) throw new Error(`${key}: ${String(waiters)} waiters, waiting for ${count}`);
    },
    { timeout, interval: 10 },
  );
}

describe('waiting across instances', () => {
  it('grants waiters in arrival order across 3 instances; each hand-over takes milliseconds', async () => {
    const holder = await call(url(0), 'POST', '/v1/locks/fifo/acquire', { ttlMs: 30_000 });
    expect(holder.status).toBe(200);
    const arrivals: Array<Promise<{ i: number; token: string; at: number }>> = [];
    for (let i = 0; i < 6; i++) {
      arrivals.push(
        call(url(i), 'POST', '/v1/locks/fifo/acquire', { ttlMs: 30_000, waitMs: 20_000, holder: `w${i}` }, 25_000).then((r) => {
          expect(r.status).toBe(200);
          return { i, token: r.body.ownerToken as string, at: performance.now() };
        }),
      );
      // Arrival order is defined by Redis: send the next waiter only once this one is queued.
      await waitForWaiters('fifo', i + 1);
    }
    const order: number[] = [];
    const handOffMs: number[] = [];
    let token = holder.body.ownerToken as string;
    for (let n = 0; n < 6; n++) {
      const releasedAt = performance.now();
      const released = await call(url(n + 1), 'POST', '/v1/locks/fifo/release', { ownerToken: token });
      expect(released.status).toBe(200);
      const next = await Promise.race(arrivals.filter((_, i) => !order.includes(i)));
      order.push(next.i);
      handOffMs.push(next.at - releasedAt);
      token = next.token;
    }
    expect(order).toEqual([0, 1, 2, 3, 4, 5]);
    console.log(`hand-off over HTTP across instances (ms): ${handOffMs.map((m) => m.toFixed(1)).join(', ')}`);
    await call(url(0), 'POST', '/v1/locks/fifo/release', { ownerToken: token });
  });

  it('a waiter on an instance that dies leaves the queue; the next waiter gets the lock', async () => {
    const doomed = await KeyholderProcess.start({ env: { REDIS_URL: redis.url, LOG_LEVEL: 'warn' } });
    try {
      const holder = await call(url(0), 'POST', '/v1/locks/orphan/acquire', { ttlMs: 30_000 });
      void call(doomed.url, 'POST', '/v1/locks/orphan/acquire', { ttlMs: 30_000, waitMs: 20_000 }).catch(() => undefined);
      await waitForWaiters('orphan', 1);
      const survivor = call(url(1), 'POST', '/v1/locks/orphan/acquire', { ttlMs: 30_000, waitMs: 20_000 }, 25_000);
      await waitForWaiters('orphan', 2);
      await doomed.stop('SIGKILL');
      // Its waiter stops being refreshed and is skipped once its liveness (3 s) runs out: from then on
      // only the live waiter is counted.
      await waitForWaiters('orphan', 1, 3_500);
      const releasedAt = performance.now();
      expect((await call(url(0), 'POST', '/v1/locks/orphan/release', { ownerToken: holder.body.ownerToken })).status).toBe(200);
      const granted = await survivor;
      expect(granted.status).toBe(200);
      expect(performance.now() - releasedAt).toBeLessThan(1_000);
    } finally {
      // Stopped here whatever failed above, so a failure leaves no server behind.
      await doomed.stop('SIGKILL');
    }
  });
});
