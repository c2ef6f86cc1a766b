import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, KeyholderProcess } from '../helpers/keyholder-process.js';
import { RedisServer } from '../helpers/redis-server.js';

/** /livez and /readyz of the compiled server while its own Redis goes away and comes back. */
let redis: RedisServer;
const running: KeyholderProcess[] = [];

beforeAll(async () => {
  redis = await RedisServer.start();
});
afterAll(async () => {
  await Promise.all(running.map((p) => p.stop('SIGKILL')));
  await redis?.stop();
});

async function timed(url: string) {
  const startedAt = performance.now();
  const res = await call(url, 'GET', '');
  return { ...res, ms: performance.now() - startedAt };
}

describe('health probes', () => {
  it('readyz 503 store_unavailable while Redis is down (fast), 200 again when it is back; livez stays 200', async () => {
    const proc = await KeyholderProcess.start({ compiled: true, env: { REDIS_URL: redis.url } });
    running.push(proc);
    expect((await timed(`${proc.url}/readyz`)).status).toBe(200);

    await redis.kill();
    await expect.poll(async () => (await timed(`${proc.url}/readyz`)).status, { timeout: 5_000, interval: 50 }).toBe(503);
    const down = await timed(`${proc.url}/readyz`);
    expect(down.body).toMatchObject({ code: 'store_unavailable', store: 'redis' });
    expect(down.ms).toBeLessThan(1_000);
    const live = await timed(`${proc.url}/livez`);
    expect(live.status).toBe(200);
    expect(live.ms).toBeLessThan(1_000);

    await redis.launch();
    await expect.poll(async () => (await timed(`${proc.url}/readyz`)).status, { timeout: 10_000, interval: 100 }).toBe(200);
    await proc.stop();
  }, 60_000);

  it('probes are never counted by the rate limit nor need a key', async () => {
    const proc = await KeyholderProcess.start({ compiled: true, env: { REDIS_URL: redis.url, RATE_LIMIT_MAX: '3' } });
    running.push(proc);
    for (let i = 0; i < 10; i++) {
      const ready = await call(proc.url, 'GET', '/readyz');
      expect(ready.status).toBe(200);
      expect(ready.headers.get('x-ratelimit-remaining')).toBeNull();
      expect((await call(proc.url, 'GET', '/livez')).status).toBe(200);
    }
    // The caller's budget is whole after the probes.
    const first = await call(proc.url, 'POST', '/v1/locks/h1/acquire', { ttlMs: 1_000 });
    expect(first.status).toBe(200);
    expect(first.headers.get('x-ratelimit-remaining')).toBe('2');
    await proc.stop();
  }, 60_000);
});
