import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newOwnerToken } from '../../src/domain/lock-service.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { FaultProxy } from '../helpers/fault-proxy.js';
import { RedisServer } from '../helpers/redis-server.js';

/**
 * Replies lost on a connection that then carries on (a proxy dropping bytes) put every later reply out
 * of step with its call. The store must never take another call's reply as its own grant, and must
 * get back to serving once the fault is over. Regression test for scenario 7 (network faults).
 */
describe('Redis store: replies dropped mid-stream', () => {
  let redis: RedisServer;
  let proxy: FaultProxy;
  let store: RedisStore;
  const PREFIX = 'replydrop:';

  beforeAll(async () => {
    redis = await RedisServer.start();
    proxy = await FaultProxy.start(redis.port);
    store = new RedisStore({ url: proxy.url, keyPrefix: PREFIX, commandTimeoutMs: 200, fenceGraceMs: 60_000 });
    await waitUntilServing(store);
  });
  afterAll(async () => {
    await store?.close();
    await proxy?.close();
    await redis?.stop();
  });

  it('never reports a grant that is not its own, and recovers', async () => {
    const checker = redis.client();
    let granted = 0;
    let wrongGrants = 0;
    let unavailable = 0;
    const deadline = Date.now() + 3_000;
    // Short bursts of dropped replies while acquires on distinct keys keep flowing.
    const faults = (async () => {
      while (Date.now() < deadline - 500) {
        await sleep(100);
        proxy.set({ kind: 'dropReplies' });
        await sleep(5 + Math.random() * 10);
        proxy.heal();
      }
    })();
    // Half the calls go to locks that are already held (the true answer is "held"), half to new ones.
    for (let i = 0; i < 4; i++) await store.acquire({ key: `held${i}`, ownerToken: newOwnerToken(), ttlMs: 60_000, holder: null });
    let n = 0;
    const worker = async () => {
      while (Date.now() < deadline) {
        const i = n++;
        const key = i % 2 === 0 ? `held${i % 4}` : `new${i}`;
        const ownerToken = newOwnerToken();
        try {
          const outcome = await store.acquire({ key, ownerToken, ttlMs: 60_000, holder: null });
          if (outcome.acquired) {
            granted++;
            // The lease Redis holds for this key must be this caller's, with the token it was told.
            const [owner, token] = await checker.hmget(`${PREFIX}{${key}}`, 'o', 't');
            if (owner !== ownerToken || Number(token) !== outcome.fencingToken) wrongGrants++;
          }
        } catch {
          unavailable++;
          await sleep(5);
        }
      }
    };
    await Promise.all([faults, ...Array.from({ length: 16 }, worker)]);
    checker.disconnect();
    console.log(`[faults] reply drops: ${granted} grants, ${wrongGrants} not the caller's, ${unavailable} unavailable`);
    expect(wrongGrants).toBe(0);
    expect(granted).toBeGreaterThan(0);
    expect(unavailable).toBeGreaterThan(0);
    await waitUntilServing(store);
  }, 30_000);
});


async function waitUntilServing(store: RedisStore): Promise<void> {
  for (let i = 0; i < 200; i++) {
    try {
      await store.ping();
      return;
    } catch {
      await sleep(50);
    }
  }
  throw new Error('the store never served again');
}
