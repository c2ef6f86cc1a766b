import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { KeyholderProcess } from '../helpers/keyholder-process.js';
import { RedisServer } from '../helpers/redis-server.js';

/**
 * A new instance runs its warm-up (warm-up.ts) before it says it is ready: /livez answers at once,
 * /readyz answers 503 warming_up until the warm-up ends, then 200. The warm-up runs against a
 * throw-away memory store: nothing lands in Redis, and the served metrics count none of its calls.
 */
const PREFIX = 'warm:';
/**
 * 50,000 cycles within 3 s: far more cycles than 3 s allows even warm (about 0.2 ms each), so the time
 * bound ends it, and /readyz is seen 503 for seconds, however quickly the first poll comes.
 */
const WARM_UP = { WARM_UP_CYCLES: '50000', WARM_UP_MAX_MS: '3000' };

const get = (server: KeyholderProcess, path: string) => fetch(`${server.url}${path}`, { signal: AbortSignal.timeout(10_000) });

let redis: RedisServer;
let direct: Redis;
let server: KeyholderProcess;

beforeAll(async () => {
  redis = await RedisServer.start();
  direct = redis.client();
  server = await KeyholderProcess.start({
    env: { REDIS_URL: redis.url, REDIS_KEY_PREFIX: PREFIX, LOG_LEVEL: 'info', ...WARM_UP },
    waitFor: 'livez',
  });
}, 120_000);

afterAll(async () => {
  direct?.disconnect();
  await server?.stop();
  await redis?.stop();
});

describe('the warm-up of a new instance', () => {
  it('answers /readyz 503 warming_up until the warm-up ends, then 200; leaves no key in Redis and no count in the metrics', async () => {
    const notReady = await get(server, '/readyz');
    expect(notReady.status).toBe(503);
    expect(notReady.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(((await notReady.json()) as { code?: string }).code).toBe('warming_up');
    // Alive all along: restarting a warming instance would not help.
    expect((await get(server, '/livez')).status).toBe(200);

    const deadline = Date.now() + 60_000;
    let ready = await get(server, '/readyz');
    while (ready.status !== 200 && Date.now() < deadline) {
      expect(((await ready.json()) as { code?: string }).code).toBe('warming_up');
      await new Promise((resolve) => setTimeout(resolve, 100));
      ready = await get(server, '/readyz');
    }
    expect(ready.status).toBe(200);

    const done = server.jsonLogs().find((l) => l.msg === 'warm-up done; ready');
    expect(done).toBeDefined();
    expect(done?.cycles).toBeGreaterThan(0);
    expect(done?.unexpected).toBe(0);

    // Nothing written to the real store: not a lease, not a fencing counter, not a quota unit.
    expect(await direct.keys('*')).toEqual([]);
    // Nothing counted as callers' traffic: no lock operation, no problem answered (the 409s it provokes).
    const metrics = await (await get(server, '/metrics')).text();
    // (What the probes themselves count is theirs: the store's pings, the 503 warming_up answers.)
    const counted = metrics
      .split('\n')
      .filter((line) => line.startsWith('keyholder_') && Number(line.split(' ').pop()) > 0)
      .filter(
        (line) => !line.startsWith('keyholder_store_up') && !line.includes('operation="ping"') && !line.includes('code="warming_up"'),
      );
    expect(counted).toEqual([]);

    // And the instance serves for real afterwards.
    const grant = await fetch(`${server.url}/v1/locks/after-warm-up/acquire`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ttlMs: 10_000 }),
    });
    expect(grant.status).toBe(200);
    expect((await direct.keys('*')).length).toBeGreaterThan(0);
  }, 120_000);

  it('ends at a shutdown: SIGTERM during a long warm-up exits cleanly at once', async () => {
    const long = await KeyholderProcess.start({
      env: { KEYHOLDER_STORE: 'memory', LOG_LEVEL: 'info', WARM_UP_CYCLES: '1000000', WARM_UP_MAX_MS: '60000' },
      waitFor: 'livez',
    });
    expect((await get(long, '/readyz')).status).toBe(503);
    const stopping = performance.now();
    await long.stop();
    const stopMs = performance.now() - stopping;
    process.stdout.write(`[warm-up] stopped ${Math.round(stopMs)} ms after SIGTERM, during a 60 s warm-up\n`);
    expect(long.exit?.code).toBe(0);
    expect(long.jsonLogs().some((l) => l.msg === 'shut down cleanly')).toBe(true);
    // Far below the warm-up's 60 s and the shutdown timeout's 10 s: it ended with the shutdown.
    expect(stopMs).toBeLessThan(8_000);
  }, 120_000);
});
