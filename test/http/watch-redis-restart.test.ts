import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';
import { RedisServer } from '../helpers/redis-server.js';
import { openRedisStore } from '../helpers/redis-store.js';
import { KeySpace } from '../../src/store/redis/keys.js';
import { DEFAULT_NAMESPACE, lockId } from '../../src/domain/namespaces.js';

/**
 * A Redis restart that loses its data (no persistence) while blocking queries are open. The
 * subscriber reconnects and the watchers read again; a change made AFTER Redis is back must wake them
 * promptly, not only when the watch mark's renewal (up to 10 s later) finds the mark gone.
 */
let server: RedisServer;
let t: TestApp;
let base: string;

beforeAll(async () => {
  server = await RedisServer.start();
  const store = await openRedisStore(server, { keyPrefix: 'rw-restart:' });
  t = await buildTestApp({ store });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
}, 30_000);
afterAll(async () => {
  await t?.close();
  await server?.stop();
});

const post = (path: string, body: object) =>
  fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

describe('watch across a Redis restart without persistence', () => {
  it('a grant made after Redis is back wakes the open watchers at once', async () => {
    const keys = ['rr:a', 'rr:b', 'rr:c', 'rr:d', 'rr:e'];
    const indexes = await Promise.all(
      keys.map(async (k) => ((await (await fetch(`${base}/v1/locks/${k}`)).json()) as { index: number }).index),
    );
    // Blocking queries on every key, asked again with the same index when answered 503 (as the clients'
    // watch loops do): one may be answered so while Redis restarts, if its read comes before the store's
    // connection is back.
    const watch = async (k: string, index: number): Promise<Response> => {
      for (;;) {
        const answer = await fetch(`${base}/v1/locks/${k}?index=${index}&waitMs=25000`);
        if (answer.status !== 503) return answer;
        await answer.arrayBuffer();
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    };
    const watches = keys.map((k, i) => watch(k, indexes[i] as number));
    await expect.poll(() => t.locks.changes.size, { timeout: 10_000, interval: 10 }).toBe(keys.length);

    await server.restart();
    // The store answers again (its connection is back).
    await expect.poll(async () => (await fetch(`${base}/v1/locks/${keys[0]}`)).status, { timeout: 10_000, interval: 50 }).toBe(200);
    // The subscriber is back: Redis has every watched key's channel subscribed again.
    const channels = keys.map((k) => new KeySpace('rw-restart:').changeChannel(lockId(DEFAULT_NAMESPACE, k)));
    const raw = server.client();
    try {
      await expect
        .poll(async () => ((await raw.pubsub('NUMSUB', ...channels)) as Array<string | number>).filter((_, i) => i % 2 === 1).map(Number), {
          timeout: 10_000,
          interval: 20,
        })
        .toEqual(keys.map(() => 1));
    } finally {
      raw.disconnect();
    }

    const granted = await Promise.all(keys.map((k) => post(`/v1/locks/${k}/acquire`, { ttlMs: 30_000, holder: 'after-restart' })));
    expect(granted.map((r) => r.status)).toEqual(keys.map(() => 200));
    const sentAt = Date.now();
    const answers = await Promise.all(
      watches.map(async (w) => {
        const body = (await (await w).json()) as { held: boolean };
        return { held: body.held, afterMs: Date.now() - sentAt };
      }),
    );
    // Every watcher sees the new holder, within a couple of seconds of the grant (not its 25 s wait, nor
    // the mark renewal's 10 s).
    for (const a of answers) {
      expect(a.held).toBe(true);
      expect(a.afterMs).toBeLessThan(2_000);
    }
  }, 40_000);
});
