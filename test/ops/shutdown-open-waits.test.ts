import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, KeyholderProcess } from '../helpers/keyholder-process.js';
import { RedisServer } from '../helpers/redis-server.js';

/**
 * Graceful shutdown of the compiled server (node dist/server.js) over a Redis of its own: every open
 * wait is answered 503 shutting_down, the leases held stay held (they belong to the clients), and the
 * process exits 0 well within SHUTDOWN_TIMEOUT_MS.
 */
let redis: RedisServer;
const running: KeyholderProcess[] = [];

beforeAll(async () => {
  redis = await RedisServer.start();
});
afterAll(async () => {
  await Promise.all(running.map((p) => p.stop('SIGKILL')));
  await redis?.stop();
});

async function start(env: Record<string, string> = {}): Promise<KeyholderProcess> {
  const proc = await KeyholderProcess.start({ compiled: true, env: { REDIS_URL: redis.url, SHUTDOWN_TIMEOUT_MS: '8000', ...env } });
  running.push(proc);
  return proc;
}

describe('SIGTERM of node dist/server.js', () => {
  it('answers every open wait 503 shutting_down, keeps held leases, ends watches, exits 0 in time', async () => {
    const a = await start();
    const held = await call(a.url, 'POST', '/v1/locks/sd-lock/acquire', { ttlMs: 60_000 });
    expect(held.status).toBe(200);
    const sem = await call(a.url, 'POST', '/v1/semaphores/sd-sem/acquire', { limit: 1, ttlMs: 60_000 });
    expect(sem.status).toBe(200);
    const rw = await call(a.url, 'POST', '/v1/rwlocks/sd-rw/acquire', { mode: 'write', ttlMs: 60_000 });
    expect(rw.status).toBe(200);
    const inspected = await call(a.url, 'GET', '/v1/locks/sd-lock');
    const index = inspected.body.index as number;
    const semInspected = await call(a.url, 'GET', '/v1/semaphores/sd-sem');

    const waits = {
      lock: call(a.url, 'POST', '/v1/locks/sd-lock/acquire', { ttlMs: 5_000, waitMs: 30_000 }, 40_000),
      semaphore: call(a.url, 'POST', '/v1/semaphores/sd-sem/acquire', { limit: 1, ttlMs: 5_000, waitMs: 30_000 }, 40_000),
      rwlock: call(a.url, 'POST', '/v1/rwlocks/sd-rw/acquire', { mode: 'read', ttlMs: 5_000, waitMs: 30_000 }, 40_000),
      lockSet: call(a.url, 'POST', '/v1/lock-sets/acquire', { keys: ['sd-free', 'sd-lock'], ttlMs: 5_000, waitMs: 30_000 }, 40_000),
      watch: call(a.url, 'GET', `/v1/locks/sd-lock?index=${index}&waitMs=30000`, undefined, 40_000),
      semWatch: call(a.url, 'GET', `/v1/semaphores/sd-sem?index=${semInspected.body.index as number}&waitMs=30000`, undefined, 40_000),
    };
    // All six are open on the instance before the signal.
    await expect
      .poll(
        async () => {
          const metrics = await fetch(`${a.url}/metrics`).then((r) => r.text());
          return Number(/^keyholder_waiting_callers (\d+)/m.exec(metrics)?.[1] ?? -1);
        },
        { timeout: 10_000, interval: 100 },
      )
      .toBe(6);

    const signalledAt = performance.now();
    const exited = a.stop('SIGTERM');
    const answers = await Promise.all(
      Object.entries(waits).map(async ([name, p]) => {
        const res = await p;
        return { name, status: res.status, code: res.body.code, afterMs: performance.now() - signalledAt };
      }),
    );
    for (const answer of answers) {
      expect(answer, answer.name).toMatchObject({ status: 503, code: 'shutting_down' });
      expect(answer.afterMs, answer.name).toBeLessThan(3_000);
    }
    await exited;
    expect(performance.now() - signalledAt).toBeLessThan(8_000);
    expect(a.exit).toEqual({ code: 0, signal: null });

    // The leases belong to their clients: another instance renews each of them with its token.
    const b = await start();
    const renewed = await call(b.url, 'POST', '/v1/locks/sd-lock/renew', { ownerToken: held.body.ownerToken, ttlMs: 60_000 });
    expect(renewed.status).toBe(200);
    const semRenewed = await call(b.url, 'POST', '/v1/semaphores/sd-sem/renew', { ownerToken: sem.body.ownerToken, ttlMs: 60_000 });
    expect(semRenewed.status).toBe(200);
    const rwRenewed = await call(b.url, 'POST', '/v1/rwlocks/sd-rw/renew', { ownerToken: rw.body.ownerToken, ttlMs: 60_000 });
    expect(rwRenewed.status).toBe(200);
    // And none of the waiters took anything on its way out.
    expect((await call(b.url, 'GET', '/v1/locks/sd-free')).body.held).toBe(false);
    await b.stop('SIGTERM');
    expect(b.exit).toEqual({ code: 0, signal: null });
  }, 90_000);
});
