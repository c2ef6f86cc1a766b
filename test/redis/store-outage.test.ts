import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RedisStore } from '../../src/store/redis/redis-store.js';
import { RedisServer } from '../helpers/redis-server.js';
import { eventually, openRedisStore } from '../helpers/redis-store.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';

/**
 * The service in front of a real redis-server that is killed, paused and wiped: it fails closed (503)
 * quickly, never grants while unsure, recovers by itself, and fencing tokens never go back.
 */
const COMMAND_TIMEOUT_MS = 300;

let redis: RedisServer;
let store: RedisStore;
let t: TestApp;

beforeAll(async () => {
  redis = await RedisServer.start();
  store = await openRedisStore(redis, { commandTimeoutMs: COMMAND_TIMEOUT_MS, keyPrefix: 'outage:' });
  t = await buildTestApp({ store });
});
afterAll(async () => {
  await t.close();
  await redis.stop();
});

const acquire = (key: string, ttlMs = 5_000) => request(t.app.server).post(`/v1/locks/${key}/acquire`).send({ ttlMs });

async function highestTokenAfterBurst(key: string, grants: number): Promise<number> {
  let highest = 0;
  for (let i = 0; i < grants; i++) {
    // A long lease: the late-reply guard (half the lease) must not turn a slow answer on a busy machine into a 503.
    const res = await acquire(key, 30_000).expect(200);
    highest = res.body.fencingToken;
    await request(t.app.server).post(`/v1/locks/${key}/release`).send({ ownerToken: res.body.ownerToken }).expect(200);
  }
  return highest;
}

describe('Redis outages', () => {
  it('Redis killed: 503 store_unavailable at once, /readyz 503, /livez 200; then recovery by itself', async () => {
    await acquire('outage-a').expect(200);
    await redis.kill();

    const started = performance.now();
    const res = await acquire('outage-b');
    const elapsed = performance.now() - started;
    expect(res.status).toBe(503);
    expect(res.body.code).toBe('store_unavailable');
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(elapsed).toBeLessThan(COMMAND_TIMEOUT_MS + 2_000);
    // Each call well-formed, so the only possible refusal is the store's.
    const renew = await request(t.app.server).post('/v1/locks/outage-b/renew').send({ ownerToken: 'AAAAAAAAAAAAAAAAAAAAAA', ttlMs: 1_000 });
    expect(renew.status).toBe(503);
    expect(renew.body.code).toBe('store_unavailable');
    const release = await request(t.app.server).post('/v1/locks/outage-b/release').send({ ownerToken: 'AAAAAAAAAAAAAAAAAAAAAA' });
    expect(release.status).toBe(503);
    expect(release.body.code).toBe('store_unavailable');
    expect((await request(t.app.server).get('/v1/locks/outage-b')).status).toBe(503);
    const ready = await request(t.app.server).get('/readyz');
    expect(ready.status).toBe(503);
    expect(ready.body).toMatchObject({ code: 'store_unavailable', store: 'redis' });
    await request(t.app.server).get('/livez').expect(200);

    await redis.launch();
    // What a fresh connection costs on this machine now: the store's own reconnect needs about as much.
    const connectStarted = Date.now();
    const probe = redis.client();
    await probe.ping();
    const connectMs = Date.now() - connectStarted;
    probe.disconnect();
    const recoveryMs = await eventually(async () => {
      await request(t.app.server).get('/readyz').expect(200);
    }, 10_000);
    // The store retries at least every RECONNECT_MAX_DELAY_MS (1 s) for ever, so it is back within one
    // retry period plus a connect, measured above (the probe above already took part of that time).
    expect(recoveryMs).toBeLessThanOrEqual(1_000 + 2 * connectMs + 500);
    await acquire('outage-c').expect(200);
  });

  it('Redis paused (answers nothing): 503 within the command timeout, not the TCP timeout', async () => {
    redis.pause();
    try {
      const started = performance.now();
      const res = await acquire('paused-a');
      const elapsed = performance.now() - started;
      expect(res.status).toBe(503);
      expect(res.body.code).toBe('store_unavailable');
      expect(elapsed).toBeGreaterThanOrEqual(COMMAND_TIMEOUT_MS - 50);
      expect(elapsed).toBeLessThan(COMMAND_TIMEOUT_MS + 2_000);
    } finally {
      redis.resume();
    }
    await eventually(async () => {
      await acquire(`paused-b-${Date.now()}`).expect(200);
    }, 10_000);
  });

  it('tokens after FLUSHALL are greater than every token before', async () => {
    const before = await highestTokenAfterBurst('flushed', 30);
    const client = redis.client();
    await client.flushall();
    client.disconnect();
    const after = await acquire('flushed').expect(200);
    expect(after.body.fencingToken).toBeGreaterThan(before);
  });

  it('tokens after an operator deletes the key are greater than every token before', async () => {
    const before = await highestTokenAfterBurst('deleted', 30);
    const client = redis.client();
    await client.del('outage:{deleted}');
    client.disconnect();
    const after = await acquire('deleted').expect(200);
    expect(after.body.fencingToken).toBeGreaterThan(before);
  });

  it('tokens after a Redis restart without persistence are greater than every token before', async () => {
    const before = await highestTokenAfterBurst('restarted', 30);
    await redis.restart();
    await eventually(async () => {
      await request(t.app.server).get('/readyz').expect(200);
    }, 10_000);
    const after = await acquire('restarted').expect(200);
    expect(after.body.fencingToken).toBeGreaterThan(before);
  });
});
