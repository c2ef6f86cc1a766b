import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';
import { RedisServer } from '../helpers/redis-server.js';
import { FaultProxy } from '../helpers/fault-proxy.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { eventually } from '../helpers/redis-store.js';

/**
 * An expiry writes nothing, so a watcher of a held lock is woken by the instance's one
 * lease-end timer. A blocking query that reads the lock after the expiry but before that timer fired
 * (its index: the free one, learned from a plain inspect) replaced the timer with none (a free lock
 * changes by itself never), and the watchers still at the held index were left waiting out their
 * whole waitMs with the lock long free.
 *
 * The instance's timer runs late here because its read of the lease came back late (a latency spike on
 * its Redis connection, through a proxy); two instances behind a balancer have the same gap between
 * one instance's timer and the other's.
 */
let server: RedisServer;
let proxy: FaultProxy;
let t: TestApp;
let base: string;

beforeAll(async () => {
  server = await RedisServer.start();
  proxy = await FaultProxy.start(server.port);
  const store = new RedisStore({ url: proxy.url, keyPrefix: 'rw-exp:', commandTimeoutMs: 5_000, fenceGraceMs: 60_000 });
  await eventually(() => store.ping(), 10_000);
  t = await buildTestApp({ store });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
}, 30_000);
afterAll(async () => {
  await t?.close();
  await proxy?.close();
  await server?.stop();
});

const post = (path: string, body: object) =>
  fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
type Status = { held: boolean; index: number };

describe('a lock that expires while watched', () => {
  it('wakes its watchers although a later query read the expiry before the lease-end timer fired', async () => {
    const key = 'exp:1';
    const grant = await post(`/v1/locks/${key}/acquire`, { ttlMs: 6_000, holder: 'vanishing' });
    expect(grant.status).toBe(200);
    const held = (await (await fetch(`${base}/v1/locks/${key}`)).json()) as Status;
    expect(held.held).toBe(true);

    // The instance's read for the first watcher comes back 1 s late: its lease-end timer is set 1 s late.
    proxy.set({ kind: 'delayReplies', delayMs: 1_000 });
    const first = fetch(`${base}/v1/locks/${key}?index=${held.index}&waitMs=20000`).then(async (r) => ({
      body: (await r.json()) as Status,
      at: Date.now(),
    }));
    await expect.poll(() => t.locks.changes.size, { timeout: 10_000, interval: 10 }).toBe(1);
    proxy.heal();

    // A plain inspect sees the lock free once the lease ran out; a blocking query at that index follows.
    let free: Status | undefined;
    await expect
      .poll(
        async () => {
          free = (await (await fetch(`${base}/v1/locks/${key}`)).json()) as Status;
          return free.held;
        },
        { timeout: 10_000, interval: 10 },
      )
      .toBe(false);
    const expiredAt = Date.now();
    const second = fetch(`${base}/v1/locks/${key}?index=${(free as Status).index}&waitMs=20000`);

    // The first watcher must learn that the lock is free soon after it expired, not after its 20 s.
    const woken = await first;
    expect(woken.body.held).toBe(false);
    expect(woken.at - expiredAt).toBeLessThan(3_000);

    await post(`/v1/locks/${key}/acquire`, { ttlMs: 5_000 });
    expect(((await (await second).json()) as Status).held).toBe(true);
  }, 40_000);
});
