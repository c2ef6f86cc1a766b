import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_NAMESPACE, lockId } from '../../src/domain/namespaces.js';
import { RedisServer } from '../helpers/redis-server.js';
import { eventually, openRedisStore } from '../helpers/redis-store.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';
import { lockWords } from '../helpers/store-words.js';

/** Hand-offs over HTTP on the Redis store, where the releasing instance is also the waiter's. */
let server: RedisServer;
let t: TestApp;

beforeAll(async () => {
  server = await RedisServer.startShared();
  t = await buildTestApp({ store: await openRedisStore(server, { keyPrefix: 'waitingredis:' }) });
});
afterAll(async () => {
  await t?.close();
  await server?.stop();
});

const post = (url: string, payload: unknown) => t.app.inject({ method: 'POST', url, payload: payload as Record<string, unknown> });

describe('hand-offs on one instance (Redis store)', () => {
  it('the next holder is answered before the release that handed it the lock', async () => {
    for (let round = 0; round < 5; round++) {
      const key = `first-${round}`;
      const holder = await post(`/v1/locks/${key}/acquire`, { ttlMs: 30_000 });
      expect(holder.statusCode).toBe(200);
      const order: string[] = [];
      const waiting = post(`/v1/locks/${key}/acquire`, { ttlMs: 30_000, waitMs: 5_000 }).then((answer) => {
        order.push('grant');
        return answer;
      });
      await eventually(
        async () => expect((await lockWords(t.store.leases).inspect(lockId(DEFAULT_NAMESPACE, key)))?.waiters).toBe(1),
        5_000,
        5,
      );
      const released = await post(`/v1/locks/${key}/release`, { ownerToken: holder.json<{ ownerToken: string }>().ownerToken }).then(
        (answer) => {
          order.push('release');
          return answer;
        },
      );
      expect(released.statusCode).toBe(200);
      expect((await waiting).statusCode).toBe(200);
      // On a hot key the next hand-off waits for the new holder: its answer is not kept behind the release's.
      expect(order).toEqual(['grant', 'release']);
    }
  });
});
