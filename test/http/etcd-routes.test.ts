import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { EtcdStore } from '../../src/store/etcd/etcd-store.js';
import { EtcdCluster } from '../helpers/etcd-cluster.js';
import { eventually } from '../helpers/redis-store.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';

/**
 * The routes every store serves, over HTTP on an etcd store: semaphores, read/write locks, lock sets
 * and lock-delay each answer as on the other stores (their behaviour is the conformance suite's; this
 * checks the app reaches them on etcd, with no route left that the store cannot serve).
 */
let cluster: EtcdCluster;
let t: TestApp;
const server = () => t.app.server;

beforeAll(async () => {
  cluster = await EtcdCluster.start(1);
  const store = new EtcdStore({ endpoints: cluster.endpoints, keyPrefix: 'routes/', commandTimeoutMs: 5_000, fenceGraceMs: 60_000 });
  await eventually(() => store.ping(), 10_000);
  t = await buildTestApp({ store, limits: { ...DEFAULT_LIMITS, maxLockDelayMs: 5_000 } });
}, 60_000);
afterAll(async () => {
  await t?.close();
  await cluster?.stop();
});

describe('routes on the etcd store', () => {
  it('semaphores and read/write locks: acquire, refuse, renew, inspect, list, release, force release', async () => {
    for (const [path, body] of [
      ['semaphores', { limit: 1, ttlMs: 30_000, holder: 'one' }],
      ['rwlocks', { mode: 'write', ttlMs: 30_000, holder: 'one' }],
    ] as const) {
      const grant = await request(server()).post(`/v1/${path}/p/acquire`).send(body).expect(200);
      expect(grant.body.fencingToken).toBeGreaterThan(0);
      const refused = await request(server()).post(`/v1/${path}/p/acquire`).send(body);
      expect(refused.status).toBe(409);
      const renewed = await request(server())
        .post(`/v1/${path}/p/renew`)
        .send({ ownerToken: grant.body.ownerToken, ttlMs: 30_000 })
        .expect(200);
      expect(renewed.body.fencingToken).toBe(grant.body.fencingToken);
      expect((await request(server()).get(`/v1/${path}/p`).expect(200)).body.holders).toHaveLength(1);
      expect(JSON.stringify((await request(server()).get(`/v1/${path}`).expect(200)).body)).toContain('"one"');
      await request(server()).post(`/v1/${path}/p/release`).send({ ownerToken: grant.body.ownerToken }).expect(200);
      const again = await request(server()).post(`/v1/${path}/p/acquire`).send(body).expect(200);
      expect(again.body.fencingToken).toBeGreaterThan(grant.body.fencingToken);
      await request(server()).delete(`/v1/${path}/p?namespace=default`).expect(200);
      await request(server()).post(`/v1/${path}/p/acquire`).send(body).expect(200);
    }
  });

  it('lock sets: acquire, renew, release; a set touching a held key is refused whole', async () => {
    const set = await request(server())
      .post('/v1/lock-sets/acquire')
      .send({ keys: ['s1', 's2'], ttlMs: 30_000 })
      .expect(200);
    expect(set.body.locks).toHaveLength(2);
    expect(
      (
        await request(server())
          .post('/v1/lock-sets/acquire')
          .send({ keys: ['s2', 's3'], ttlMs: 30_000 })
      ).status,
    ).toBe(409);
    expect((await request(server()).get('/v1/locks/s3').expect(200)).body.held).toBe(false);
    await request(server())
      .post('/v1/lock-sets/renew')
      .send({ ownerToken: set.body.ownerToken, keys: ['s1', 's2'], ttlMs: 30_000 })
      .expect(200);
    await request(server())
      .post('/v1/lock-sets/release')
      .send({ ownerToken: set.body.ownerToken, keys: ['s1', 's2'] })
      .expect(200);
    expect((await request(server()).get('/v1/locks/s1').expect(200)).body.held).toBe(false);
  });

  it('lock-delay: an expired lease keeps the lock for its delay', async () => {
    await request(server()).post('/v1/locks/d/acquire').send({ ttlMs: 200, lockDelayMs: 5_000 }).expect(200);
    await expect
      .poll(async () => ((await request(server()).get('/v1/locks/d')).body as { held: boolean }).held, { timeout: 5_000, interval: 20 })
      .toBe(false);
    expect((await request(server()).post('/v1/locks/d/acquire').send({ ttlMs: 1_000 })).status).toBe(409);
  });
});
