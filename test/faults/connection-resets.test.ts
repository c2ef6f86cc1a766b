import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { FaultProxy } from '../helpers/fault-proxy.js';
import { call, KeyholderProcess } from '../helpers/keyholder-process.js';
import { RedisServer } from '../helpers/redis-server.js';

/**
 * Connections to Redis reset again and again under traffic: the service answers 503 while it
 * reconnects, never crashes, and serves again afterwards. Regression test for scenario 7: ioredis's
 * own re-subscribe of the hand-over channel failed after a reset with an error nobody could catch,
 * and the process exited.
 */

describe('connection resets between keyholder and Redis', () => {
  let redis: RedisServer;
  let proxy: FaultProxy;
  let keyholder: KeyholderProcess;

  beforeAll(async () => {
    redis = await RedisServer.start();
    proxy = await FaultProxy.start(redis.port);
    keyholder = await KeyholderProcess.start({
      env: { REDIS_URL: proxy.url, REDIS_COMMAND_TIMEOUT_MS: '250', LOG_LEVEL: 'warn' },
    });
  }, 120_000);
  afterAll(async () => {
    await keyholder?.stop('SIGKILL');
    await proxy?.close();
    await redis?.stop();
  });

  it('keeps the process alive through 20 rounds of resets, then serves again', async () => {
    let stop = false;
    const statuses = new Map<number, number>();
    const clients = Array.from({ length: 16 }, async (_, i) => {
      while (!stop) {
        const res = await call(keyholder.url, 'POST', `/v1/locks/reset-${i % 4}/acquire`, { ttlMs: 1_000 }).catch(() => null);
        statuses.set(res?.status ?? 0, (statuses.get(res?.status ?? 0) ?? 0) + 1);
        if (res?.status === 200) {
          await call(keyholder.url, 'POST', `/v1/locks/reset-${i % 4}/release`, { ownerToken: res.body.ownerToken }).catch(() => null);
        }
      }
    });
    for (let round = 0; round < 20; round++) {
      await sleep(50 + Math.random() * 100);
      proxy.resetAll();
    }
    await sleep(1_500);
    stop = true;
    await Promise.all(clients);

    expect(keyholder.exit, keyholder.logs.slice(-20).join('\n')).toBeUndefined();
    expect(statuses.get(0) ?? 0).toBe(0); // every request was answered
    // Serves again once its connections are back: how long reconnecting takes depends on the machine's
    // load, so wait for it (each attempt on a key of its own) instead of guessing a delay.
    let attempt = 0;
    await vi.waitFor(
      async () => {
        const after = await call(keyholder.url, 'POST', `/v1/locks/reset-after-${++attempt}/acquire`, { ttlMs: 1_000 });
        expect(after.status).toBe(200);
      },
      { timeout: 30_000, interval: 200 },
    );
    expect(keyholder.exit).toBeUndefined();
  }, 90_000);
});
